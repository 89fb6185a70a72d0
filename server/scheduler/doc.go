// Package scheduler is the trigger loop: the leader-only component that
// fires due jobs. raftha starts Run(ctx, term) when this server becomes the
// raft leader and cancels ctx when it stops being the leader; the loop keeps
// nothing across terms and reloads everything at start.
//
// # One term of the loop
//
//	start ─► Claim fence(term) ─► load nodes, pending runs + processes, groups, route state,
//	         jobs + cursors, placements (Config.PlaceJobs), once requests; start the beat prober
//	      ─► loop: one select over
//	           timer (earliest next fire, or a retry)  → tick: fire every due job in ONE batch
//	           node watch      /Cronix/node/           → routing + placement
//	           signal watch    /Cronix/signal/job/     → reload / drop the jobs signalled (one query per watch response)
//	           group watch     /Cronix/signal/group/   → reload every group (manual address lists)
//	           once watch      /Cronix/once/           → manual fire now
//	           run watch       /Cronix/run/            → deletions only: a deleted run key = the run ended
//	                                                     (the leader puts its own keys in the busy cache)
//	           proc watch      /Cronix/proc/           → busy cache (BUSYOVER)
//	           leader watch    /Cronix/leader          → another term's claim: return ErrFenced
//	           relist timer    (30 s)                  → reload the jobs whose revision changed, every group
//	      beat prober (own goroutine, every BeatInterval = 2 s, wall clock):
//	           GET <node base URL>/healthz of each live node, concurrently,
//	           BeatTimeout (1 s) each → the set of nodes whose last beat failed
//	      ─► ctx cancelled → return nil;  write fenced → return ErrFenced
//
// Jobs wait in a min-heap by next fire time. At each tick every due job is
// popped and the batch is written ahead, each step once for the whole batch:
//
//  1. InsertRuns: one SQL statement records every fire (status triggered;
//     failed when routing finds no target; skipped for DO_NOTHING misfires);
//  2. Dispatch: the runs go to /Cronix/run/<node>/<fire_id> in as few etcd
//     transactions as the limits allow, each fenced on /Cronix/leader; every
//     record is signed (cluster.Keyring.Seal: an HMAC over key, term and
//     body with the cluster key), computed in memory: no extra round trip;
//  3. ApplyTick: ONE raft entry advances each job's cursor to the latest
//     scheduled time fired, writes the route state changed by this batch
//     (round-robin counters, LFU/LRU use) and drops the cursor and route
//     state of jobs deleted since the last entry.
//
// Then each job's next time is computed and it returns to the heap. A fire
// id is cluster.FireID(job, scheduled time) (cluster.ShardFireID for a
// shard of a broadcast), so a replay is recognisable.
//
// # Dispatch ahead
//
// With Config.DispatchAhead > 0 (the server's default, DefaultDispatchAhead,
// is 850ms) the timer wakes that long before the earliest fire and a tick
// takes every job due within that long of now. With DispatchAheadMin (the
// server's is half of DispatchAhead) "that long" follows the batches: the
// previous batch's size over aheadFiresPerSecond, between the two (a large batch
// needs the time, a small one competes less with the previous second's
// runs when it comes later), or longer when the write path needs it: the
// slowest of the last four batches' SQL insert and etcd dispatch plus half
// of that, at most twice DispatchAhead and MaxDispatchAhead, so that the
// node gets the batch well before its time also where the insert is slow
// (a slower machine, a large runs table). Those fires go through the same three steps
// early, each dispatch carrying StartAt = its scheduled time, and the node
// holds it until then (node/agent). The whole write path is then paid
// before the second begins. It is used only while every live node offers
// cluster.FeatureStartAt (an older node would start the fire at once); a
// node without it turns it off from the next tick. What changes:
//
//   - Cursors reach a scheduled time up to twice DispatchAhead before it
//     comes (never more than MaxDispatchAhead).
//     A new leader resumes after the cursor, so a fire dispatched ahead is
//     never fired again; the node that holds it runs it at its time, also
//     when the term that dispatched it has ended (it was verified when it
//     arrived, as any dispatch).
//   - A job disabled, deleted or unscheduled before the time of a fire
//     already dispatched ahead: the loop writes a signed cancel for it
//     (cluster.KillRequest with Cancel, fenced like a dispatch); the node
//     drops the fire if it has not started it and reports it skipped. Best
//     effort: a cancel written within 5ms of the fire's time, one whose
//     write fails, or one the node sees after the time, leaves the fire
//     to run, as it would have had the job been removed just after an
//     on-time dispatch.
//   - A job edited meanwhile: the fires already dispatched ahead run with
//     the config they were dispatched with; later ones use the new one.
//   - Block strategies and kills are applied by the node at the start time.
//   - Misfire handling is unchanged: it concerns times already past.
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
// A fire's target is chosen among the eligible nodes of the job's group,
// by job.RouteStrategy. Eligible are the live nodes (registration key
// present) offering the job's handler that are members of the group: for
// an auto group (the default, also a group not in SQL) the nodes
// registered with its appname, sorted by uuid; for a manual group the
// nodes listed in its Addresses (whatever group they registered with), in
// list order. Placement uses the same eligibility. Group definitions are
// loaded at start, on every /Cronix/signal/group/ change (the API puts it
// after each group write) and on the relist timer. The strategies
// ("" = FIRST): FIRST, LAST; ROUND (per-job counter, each job's cycle
// starting at its id modulo the number of nodes); RANDOM;
// CONSISTENT_HASH (ring of 160 virtual nodes per node: stable per
// job, and when a node leaves only its jobs move); LEAST_FREQUENTLY_USED
// (per-job use counts; a node new to the job starts at the current
// minimum) and LEAST_RECENTLY_USED (per-job last use), both breaking ties
// in that per-job order (so jobs on one schedule spread over the nodes in
// every tick, instead of all firing on one node and then all on the next);
// FAILOVER (first node whose registration status is "online" and whose last beat succeeded; a
// node not probed yet counts as healthy; BeatInterval < 0 turns beats
// off); BUSYOVER (first node without a
// pending run key or process key of the job, from the cache: the run keys
// listed when its term began and those it dispatched, less the deletions
// its run watch reports, and the
// process keys of the proc watch;
// none free → the run fails); SHARDING_BROADCAST (one fire per node, shard
// index 0..n-1 of n in the run and the dispatch). Route state lives in raft,
// so ROUND, LFU and LRU continue across leader changes and restarts; it is
// written in the tick's raft entry, never in an entry of its own. A job
// with NodeUUID is pinned to that node; its run fails when the node is not
// live. Placement (/Cronix/job/<node>/<id>, only with Config.PlaceJobs:
// no node reads it yet) never moves route state: the
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
// A tick whose policies did more for some jobs than fire their one missed
// time (collapsed, caught up or skipped times) counts those jobs in
// cronix_misfires_total by policy and logs one warning with the oldest
// missed time: FIRE_ONCE_NOW leaves no run for the times it collapses, so
// the metric and the log are where an overloaded or stalled leader shows.
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
//   - Signed: every run and placement record carries the term that wrote
//     it and a MAC for its own key, so a node runs nothing a leader did not
//     write (node/trust; docs/security.md). Runs are always written in this
//     term; a placement whose config is unchanged since an earlier term is
//     kept as that term signed it (a new leader rewrites only changed
//     placements).
//   - Fenced: every run and placement write compares /Cronix/leader with
//     this server's term; once a newer term claimed it, nothing more is
//     written and Run returns ErrFenced: at once when the leader key watch
//     sees the newer claim, at the latest at its next write.
//   - Transient SQL, etcd or raft failures are retried with backoff; the
//     fires due meanwhile join the retried batch.
//   - Deleted jobs (signal key deleted, or not found on reload) lose their
//     cursor and route state in the next raft entry (within about a second).
//
// # Exactly once across a leader change
//
// A leader that recorded and dispatched a batch but lost leadership (crash,
// SIGSTOP, partition) before its raft entry committed leaves cursors
// behind: the next leader fires the same scheduled times again, with the
// same fire ids. InsertRuns then reports those fire ids as not new:
// REPLAYED. A replayed fire is dispatched again only if no node can have
// received it (checkReplays, off the hot path, a few reads per batch):
//
//	SQL status terminal or running         → not dispatched (ran / runs)
//	triggered, run key present             → not dispatched (the node has it)
//	triggered, run key absent              → dispatched, to the node recorded in SQL
//	                                         (not at all if that node is not live:
//	                                         the lost-run monitor marks it lost)
//
// Why an absent key with a triggered run means "never dispatched": a run
// key is written only by the fence holder and deleted by its node only
// after a server stored the run's final result (node/agent), or by the
// lost-run monitor only after it marked the run lost. So a key that once
// existed and is gone has a terminal run. The key is read BEFORE the
// status (a run finishing between the two reads is then seen terminal),
// and the fence was claimed before the loop started (so the deposed leader
// cannot write the key after the read). The same rule covers a retry in
// one term whose InsertRuns committed but returned an error.
//
// What holds:
//
//   - Leader crash: every fire of the lost batch runs at most once, and a
//     fire that was recorded runs unless its node is gone (then lost).
//   - SIGSTOP or partition of the leader: fenced. When it wakes, its first
//     dispatch fails ErrFenced and writes nothing; runs it recorded in SQL
//     just before are replayed by the new leader as above. Its raft entry
//     cannot commit without a quorum.
//   - Node crash: its runs stay triggered/running until the lost-run
//     monitor (server/monitor) marks them lost once the node's lease
//     expired, and removes their run keys.
//
// What does not:
//
//   - A replayed fire that failed routing in the new term (no target) is
//     not re-checked: a triggered run left by the old leader on a live
//     node, never dispatched, stays triggered.
//   - Route state changed by the lost batch is lost with it (a ROUND
//     counter repeats; LFU/LRU use is not counted).
//   - A stalled leader's fires whose scheduled time the new leader never
//     fires (its misfire policy collapsed them) stay as recorded.
//
// # Not yet guaranteed
//
//   - FAILOVER health is as fresh as the last beat round (up to
//     BeatInterval + BeatTimeout old): a node that dies between beats can
//     still be chosen, and its run is then lost, not retried elsewhere.
//     Beats are per leader and start afresh each term.
//   - BUSYOVER and fixed_delay rely on run keys being deleted; a lost
//     node's run keys keep the job busy / waiting until the lost-run
//     monitor removes them (Interval + Grace after its lease expired).
package scheduler
