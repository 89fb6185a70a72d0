// Package agent is a node's link to the Cronix cluster: it registers the
// node in etcd, takes the fires the trigger leader dispatches to it, runs
// them through a Runner (the plugin host) and reports their results to the
// servers in batches.
//
// # Life of a fire on a node
//
//	leader txn: PUT /Cronix/run/<node>/<fire_id> = Dispatch
//	    │  intake: List the run prefix, then Watch from that revision+1
//	    ▼
//	dedupe by fire id ──(already running / finished / recently deleted)──► ignored
//	    │                                       (a recently deleted fire's new key is deleted again)
//	    ▼  wait for one of MaxConcurrent run slots
//	Runner.Run(ctx with the job timeout, handler, request, capped output)
//	    │  still going after RunningAfter (1s)? one "running" report
//	    ▼
//	result: success | failed (exit code, message) | timeout | killed (shutdown)
//	    │  reporter: queue (+ spool file), batch every ReportInterval or ReportBatch results
//	    ▼
//	POST <server>/api/v1/internal/results ──(error/non-200)──► keep, back off, try other servers
//	    │ 200
//	    ▼
//	one etcd txn deletes the batch's finished run keys
//
// # Guarantees
//
//   - Each fire id is run at most once per agent process: a fire already
//     running, finished, or whose run key this process deleted (a bounded
//     recent set) is not run again, whatever the watch delivers.
//   - Results are delivered at least once, in the order they were produced.
//     A result is dropped only when a server answered 200 for it; until then
//     it is retried with backoff against every known server. The server
//     stores results idempotently by fire id and never overwrites a final
//     status, so a repeat is harmless.
//   - A run key is deleted only after the fire's final result was accepted
//     by a server. A "running" report never deletes it.
//   - With SpoolDir set, queued results are fsynced to disk before each
//     delivery attempt and forgotten only after their run keys are deleted,
//     so a restart loses none that were synced, and their fires are not run
//     again by the next process (it delivers them first). A fire whose result was
//     not yet synced when the process died still has its run key, so the
//     next process runs it again (at-most-once holds per process, not
//     across a crash); the server keeps the first final result.
//   - A panic in the agent's code or an in-process Runner fails that fire;
//     the node keeps going. Plugin crashes surface as Runner errors and are
//     reported "failed" with the error text.
//   - The registration key lives under a lease; if the lease is lost (etcd
//     outage, revocation) a new lease is granted and the node registers
//     again. On Stop the node first advertises "draining", finishes (or after
//     ShutdownGrace cancels) its runs, flushes results, then deletes its key
//     and revokes its lease.
//
// # Not guaranteed
//
//   - Job retries and block strategies are not applied here yet: a fire runs
//     one attempt (Request.Attempt is 1).
//   - Fires dispatched while the agent is stopped wait in etcd; whether they
//     are run later or declared lost is the server's lost-run monitor's call.
package agent
