// Package scheduler is the trigger loop: the leader-only component that
// fires due jobs. raftha starts Run(ctx, term) when this server becomes the
// raft leader and cancels ctx when it stops being the leader; the loop keeps
// nothing across terms and reloads everything at start.
//
// # One term of the loop
//
//	start ─► Claim fence(term) ─► load nodes, pending runs + processes, route state,
//	         jobs + cursors, placements, once requests
//	      ─► loop: one select over
//	           timer (earliest next fire, or a retry)  → tick: fire every due job in ONE batch
//	           node watch      /Cronix/node/           → routing + placement
//	           signal watch    /Cronix/signal/job/     → reload / drop one job
//	           once watch      /Cronix/once/           → manual fire now
//	           run watch       /Cronix/run/            → busy cache; a deleted run key = the run ended
//	           proc watch      /Cronix/proc/           → busy cache (BUSYOVER)
//	           relist timer    (30 s)                  → reload every enabled job
//	      ─► ctx cancelled → return nil;  write fenced → return ErrFenced
//
// Jobs wait in a min-heap by next fire time. At each tick every due job is
// popped and the batch is written ahead, each step once for the whole batch:
//
//  1. InsertRuns: one SQL statement records every fire (status triggered;
//     failed when routing finds no target; skipped for DO_NOTHING misfires);
//  2. Dispatch: the runs go to /Cronix/run/<node>/<fire_id> in as few etcd
//     transactions as the limits allow, each fenced on /Cronix/leader;
//  3. ApplyTick: ONE raft entry advances each job's cursor to the latest
//     scheduled time fired, writes the route state changed by this batch
//     (round-robin counters, LFU/LRU use) and drops the cursor and route
//     state of jobs deleted since the last entry.
//
// Then each job's next time is computed and it returns to the heap. A fire
// id is cluster.FireID(job, scheduled time) (cluster.ShardFireID for a
// shard of a broadcast), so a replay is recognisable.
//
// # Schedule kinds
//
//   - cron, fixed_rate: Next(t) of the schedule (schedule.Parse).
//   - once: fires at its instant; a cursor at or after it means never again,
//     also after a restart. A once job without a cursor whose instant passed
//     before the loop started never fires.
//   - none: never enters the heap (manual fires only).
//   - fixed_delay: the next fire is delay after the previous run ENDED: after
//     a fire the job leaves the heap until every run key of its fire(s) is
//     deleted (the node deletes it once the result is stored), then fires
//     delay after that moment; runs never overlap. At start a job with a run
//     key still pending waits for it; otherwise it fires delay after its
//     cursor (at once if that passed) or delay after now without a cursor.
//     A run key that is never deleted (a node lost with it) stalls the job
//     until the key is removed.
//
// # Routing
//
// A fire's target is chosen among the live nodes (registration key
// present) of the job's group that offer its handler, sorted by uuid, by
// job.RouteStrategy ("" = FIRST): FIRST, LAST; ROUND (per-job counter);
// RANDOM; CONSISTENT_HASH (ring of 160 virtual nodes per node: stable per
// job, and when a node leaves only its jobs move); LEAST_FREQUENTLY_USED
// (per-job use counts; a node new to the job starts at the current
// minimum) and LEAST_RECENTLY_USED (per-job last use); FAILOVER (first node
// whose registration status is "online"); BUSYOVER (first node without a
// pending run key or process key of the job, from the watch-fed cache;
// none free → the run fails); SHARDING_BROADCAST (one fire per node, shard
// index 0..n-1 of n in the run and the dispatch). Route state lives in raft,
// so ROUND, LFU and LRU continue across leader changes and restarts; it is
// written in the tick's raft entry, never in an entry of its own. A job
// with NodeUUID is pinned to that node; its run fails when the node is not
// live. Placement (/Cronix/job/<node>/<id>) never moves route state: the
// pinned node, the FIRST/LAST node, else the consistent-hash node.
//
// # Misfires
//
// At start a job's next fire is the first after its cursor; when that is
// due, the fires missed between the cursor and now are handled by the
// job's misfire policy. While leading, a fire more than MisfireThreshold
// late (the loop was stalled) is handled the same way:
//
//   - FIRE_ONCE_NOW (default): one fire now, at the latest missed time;
//   - CATCH_UP: every missed time, oldest first, in one batch, at most
//     MisfireMaxCatchUp (0 → 100); beyond it only the latest ones;
//   - DO_NOTHING: each missed time (at most MisfireMaxCatchUp, the latest)
//     is recorded as a skipped run and not dispatched; only a latest missed
//     time within MisfireThreshold of now still fires. The next fire is the
//     next scheduled time.
//
// A job without a cursor fires first after now. A job that is enabled
// again, or whose schedule changes, fires first after now.
//
// # Guaranteed
//
//   - One leader never dispatches a fire id twice: a job's next time is
//     always after its cursor and after the fires just made, a batch that
//     failed half-way resumes from the step and the items it stopped at,
//     and once requests are deduplicated by mod revision.
//   - A scheduled time at or before a job's cursor never fires again, in
//     this term or a later one (misfire policies only fire times after it).
//   - Cursors advance only after the runs were recorded and dispatched.
//   - Fenced: every run and placement write compares /Cronix/leader with
//     this server's term; once a newer term claimed it, nothing more is
//     written and Run returns ErrFenced.
//   - Transient SQL, etcd or raft failures are retried with backoff; the
//     fires due meanwhile join the retried batch.
//   - Deleted jobs (signal key deleted, or not found on reload) lose their
//     cursor and route state in the next raft entry (within about a second).
//
// # Not yet guaranteed
//
//   - HA failover re-send: a leader that dies after dispatching a batch but
//     before its raft entry committed leaves fires the next leader fires
//     again with the same fire ids (the runs table dedupes them, but a node
//     that already ran and removed the run key may run it again). Route
//     state changed by that batch is lost with it (a ROUND counter repeats).
//   - FAILOVER health is the registration status only, not a beat.
//   - BUSYOVER and fixed_delay rely on run keys being deleted; a lost node's
//     run keys keep the job busy / waiting until someone removes them.
package scheduler
