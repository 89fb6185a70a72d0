// Package scheduler is the trigger loop: the leader-only component that
// fires due jobs. raftha starts Run(ctx, term) when this server becomes the
// raft leader and cancels ctx when it stops being the leader; the loop keeps
// nothing across terms and reloads everything at start.
//
// # One term of the loop
//
//	start ─► Claim fence(term) ─► load nodes, jobs + cursors, placements, once requests
//	      ─► loop: one select over
//	           timer (earliest next fire, or a retry)  → tick: fire every due job in ONE batch
//	           node watch      /Cronix/node/           → routing + placement
//	           signal watch    /Cronix/signal/job/     → reload / drop one job
//	           once watch      /Cronix/once/           → manual fire now
//	           relist timer    (30 s)                  → reload every enabled job
//	      ─► ctx cancelled → return nil;  write fenced → return ErrFenced
//
// Jobs wait in a min-heap by next fire time. At each tick every due job is
// popped (at most one fire per job per batch) and the batch is written
// ahead, each step once for the whole batch:
//
//  1. InsertRuns: one SQL statement records every fire (status triggered,
//     or failed when no live node of the job's group offers its handler);
//  2. Dispatch: the runs go to /Cronix/run/<node>/<fire_id> in as few etcd
//     transactions as the limits allow, each fenced on /Cronix/leader;
//  3. ApplyCursors: one raft entry advances each job's cursor to the
//     scheduled time fired.
//
// Then each job's next time is computed and it returns to the heap. A fire
// id is cluster.FireID(job, scheduled time), so a replay is recognisable.
//
// # Misfires
//
// At start a job's next fire is the first after its cursor. Fires that fell
// between the cursor and now (missed while no leader ran) collapse into one
// fire due at once, with the latest missed time as its scheduled time
// (FIRE_ONCE_NOW; other policies come later). A job without a cursor fires
// first after now. While leading, a fire more than MisfireThreshold late
// (the loop was stalled) collapses the same way. A job that is enabled again,
// or whose schedule changes, fires first after now.
//
// # Guaranteed
//
//   - One leader never dispatches a fire id twice: a job's next time is
//     always after its cursor and after the fire just made, a batch that
//     failed half-way resumes from the step and the items it stopped at,
//     and once requests are deduplicated by mod revision.
//   - A scheduled time at or before a job's cursor never fires again, in
//     this term or a later one.
//   - Cursors advance only after the runs were recorded and dispatched.
//   - Fenced: every run and placement write compares /Cronix/leader with
//     this server's term; once a newer term claimed it, nothing more is
//     written and Run returns ErrFenced.
//   - Transient SQL, etcd or raft failures are retried with backoff; the
//     fires due meanwhile join the retried batch.
//
// # Not yet guaranteed
//
//   - HA failover re-send: a leader that dies after dispatching a batch but
//     before its cursor entry committed leaves fires the next leader fires
//     again with the same fire ids (the runs table dedupes them, but a node
//     that already ran and removed the run key may run it again). Resolving
//     in-flight intents on takeover comes with the HA work.
//   - Route strategies, misfire policies other than FIRE_ONCE_NOW, sharding
//     and broadcast: the target is one stable choice per job (hash of the
//     job id over the sorted eligible nodes).
//   - Cursors of deleted jobs are not removed from the raft state.
package scheduler
