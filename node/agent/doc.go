// Package agent is a node's link to the Cronix cluster: it registers the
// node in etcd, takes the fires the trigger leader dispatches to it, runs
// them through a Runner (the plugin host) and reports their results to the
// servers in batches.
//
// # Life of a fire on a node
//
//	leader txn: PUT /Cronix/run/<node>/<fire_id> = Dispatch
//	    │  intake: List the run prefix, then Watch its puts from that revision+1; the fires
//	    │  of one response are checked by up to GOMAXPROCS goroutines, sharded by
//	    │  job id (one job's fires in dispatch order); each verifies and decodes
//	    │  64 fires, then dedupes and admits them under one lock, in order
//	    ▼
//	trust.Guard: MAC (current or previous cluster key) for this key, term fits /Cronix/leader
//	    │ ──(unsigned / mis-signed / copied / stale term)──► not run; key deleted, logged,
//	    │                                                    security event to the servers
//	    ▼
//	StartAt still to come (dispatched ahead)? held until then (at most 10s), not yet claimed
//	    │  (hold.go: one release goroutine, a timer per distinct StartAt; a kill or cancel
//	    │   request meanwhile is remembered and applied when it is released)
//	    ▼
//	dedupe by fire id ──(already running / finished / recently deleted)──► ignored
//	    │                                       (a recently deleted fire's new key is deleted again)
//	    ▼  block strategy, per job id (lane):
//	    │    job idle ─────────────► runs now
//	    │    SERIAL_EXECUTION ─────► queued FIFO; takes the slot of the fire before it
//	    │    DISCARD_LATER ────────► reported "skipped" at once
//	    │    COVER_EARLY ──────────► running fire cancelled ("killed", "covered by <fire>"), new one next
//	    ▼  wait for one of MaxConcurrent run slots
//	attempt n: Runner.Run(ctx with the job timeout, handler, request n, capped output)
//	    │  still going after RunningAfter (1s)? one "running" report
//	    │  still going after ProcThreshold (1s)? PUT /Cronix/proc/<node>/<job>/<run no> (registration lease;
//	    │      the proc keys queued together go in one txn per MaxTxnOps, procs.go)
//	    │  failed/timeout, n ≤ RetryCount, not permanent, not killed?
//	    │      "--- attempt n+1/N (after …) ---" in the output, pause, "running" report, attempt n+1
//	    ▼
//	result: success | failed (exit code, message) | timeout | killed (request, cover, shutdown)
//	    │  (Attempt = attempts made; proc key deleted)
//	    │  reporter: queue (+ spool file), batch every ReportInterval or ReportBatch results
//	    ▼
//	POST <server>/api/v1/internal/results ──(error/non-200)──► keep, back off, try other servers
//	    │ 200
//	    ▼
//	one etcd txn deletes the batch's finished run keys
//
// # Guarantees
//
//   - Only signed records are acted on: a run record, kill key, proc key
//     marked killed (and, in node/sysinfo, a system-info request) is acted
//     on only if its MAC verifies for its own key with the cluster key and
//     its term fits the leader key (node/trust). A refused record is deleted
//     (if unchanged), logged, and reported to POST
//     /api/v1/internal/security-events (in memory, up to 1000 waiting,
//     retried with backoff). Plain proc keys are the node's own.
//
//   - Each fire id is run at most once per agent process: a fire already
//     running, finished, or whose run key this process deleted (a bounded
//     recent set) is not run again, whatever the watch delivers.
//
//   - Results are delivered at least once, in the order they were produced.
//     A result is dropped only when a server answered 200 for it; until then
//     it is retried with backoff against every known server. The server
//     stores results idempotently by fire id and never overwrites a final
//     status, so a repeat is harmless.
//
//   - A run key is deleted only after the fire's final result was accepted
//     by a server. A "running" report never deletes it.
//
//   - With SpoolDir set, queued results are fsynced to disk before each
//     delivery attempt and forgotten only after their run keys are deleted,
//     so a restart loses none that were synced, and their fires are not run
//     again by the next process (it delivers them first). The fsync runs
//     without the reporter's lock (finishing runs keep queueing results
//     meanwhile; the next delivery's fsync covers them). A finishing run
//     only queues its result: the delivery encodes it, once, for both
//     the spool and the POST, after the node's starts went quiet. Memory holds at
//     most ResultMemory (64 MiB; the node's --result-memory) of
//     undelivered results; past it, newer results are in the spool only
//     and are read back in order as older ones are delivered, so an outage
//     of the servers, however long, does not grow the node's memory (nor
//     its next start's). The start journal (started.log in SpoolDir) has a
//     line for every fire whose handler was called — handed to the file
//     with write(2) before the handler is
//     called (the starts of one dispatch batch share writes), not fsynced,
//     so it survives the death of the process, not of the machine — and an
//     end line once its run key was deleted; the next process
//     reports a fire `lost` (and does not run it) only when it has a start
//     line, no end line, no spooled result and its run key still exists, so
//     fires that finished before a restart are never reported lost. A fire whose result was
//     not yet synced when the process died still has its run key, so the
//     next process runs it again (at-most-once holds per process, not
//     across a crash); the server keeps the first final result.
//
//   - A panic in the agent's code or an in-process Runner fails that fire;
//     the node keeps going. Plugin crashes surface as Runner errors and are
//     reported "failed" with the error text.
//
//   - The registration key lives under a lease; if the lease is lost (etcd
//     outage, revocation) a new lease is granted and the node registers
//     again. On Stop the node first advertises "draining", finishes (or after
//     ShutdownGrace cancels) its runs, flushes results, then deletes its key
//     and revokes its lease.
//
//   - Retries: a fire that fails or times out is run again up to
//     JobConfig.RetryCount more times, after RetryIntervalSeconds or, when
//     0, a pause growing from RetryBackoffBase (1s, 2s, 4s…) up to
//     RetryBackoffMax (60s). A Runner error marked pluginapi.Permanent and a
//     kill are never retried. Only the final result is terminal; output
//     keeps every attempt's output with one marker line per retry, and
//     RunResult.Attempt says how many attempts were made (0 for a fire that
//     never ran: skipped, or killed while queued).
//
//   - Dispatch ahead: a fire whose Dispatch.StartAt is in the future is
//     not started before StartAt by this node's clock (held at most 10 s
//     from its arrival). It is verified on arrival and claimed, admitted
//     (block strategy) and started at StartAt. A cancel request
//     (KillRequest.Cancel) drops a fire not started yet, reported skipped
//     with its message; it never stops a started fire. Stop drops held
//     fires unstarted: their run keys stay, and the next process holds and
//     runs them. The node advertises cluster.FeatureStartAt. With a Runner
//     that waits for Request.StartAt itself (a plugin of the Go SDK 1.1+,
//     pluginhost.Host.HoldsStartAt), the fire is released early: when its
//     job has nothing running or queued on this node then, 100ms plus
//     0.1ms per fire due at the same StartAt before it, at most 400ms
//     (batchLead; the fires due then are counted from the keys delivered
//     for that instant, so a batch that arrives late goes at once),
//     otherwise startLead (100ms) before. Its journal
//     line, goroutine and plugin call happen before the start time and the
//     plugin starts the handler at StartAt; the block strategy is applied
//     at the release (a busy job's: 100ms before StartAt), the job timeout
//     counts from StartAt, and started_at is StartAt. A crash between the
//     release and StartAt reports the fire lost (its start line is
//     written).
//
//   - Block strategies hold per job id on this node: at most one fire of a
//     job runs at a time; SERIAL_EXECUTION (the default) runs the queued
//     ones in dispatch order; a queued fire holds no run slot.
//
//   - Proc keys: a run going on longer than ProcThreshold has
//     /Cronix/proc/<node>/<job_id>/<run no> (ProcInfo) under the
//     registration lease, deleted when the run ends; shorter runs write
//     nothing. Puts and deletions are batched (a txn per MaxTxnOps of
//     those queued while the previous txn was in flight): a put still
//     queued when its run ends is never written. The <pid> segment is the
//     agent's per-process run number (plugins do not report child pids);
//     ProcInfo.PID carries the same.
//
//   - Kill: setting Killed in a proc key, or putting /Cronix/kill/<node>/<fire>,
//     kills the fire (cancels its handler's ctx; a queued fire is reported
//     at once): it ends "killed" with message "killed by request". A kill
//     key for a fire not taken yet is remembered (10 minutes), so the fire
//     is reported killed without running when its dispatch arrives. The
//     agent deletes kill keys it acted on.
//
//   - Live output: OutputHandler streams a held fire's output (what is kept
//     under OutputCap) while it runs and ends with the run.
//
// # Not guaranteed
//
//   - A proc key lives under the registration lease it was written under;
//     if that lease is lost and the node registers again, the proc keys of
//     runs in progress are gone until those runs end (they are not rewritten).
//   - Fires queued behind a running fire of their job when Stop begins are
//     not run by this process; their run keys stay for the next one.
//   - Fires dispatched while the agent is stopped wait in etcd; whether they
//     are run later or declared lost is the server's lost-run monitor's call.
package agent
