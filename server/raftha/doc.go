// Package raftha elects the Cronix trigger leader among server replicas with
// hashicorp/raft and replicates the scheduler's own state: per-job fire
// cursors (the last scheduled time fired, Unix ms) and opaque route state
// (round-robin counters, LFU/LRU use) for the route strategies.
//
// Storage: raft-boltdb/v2 (raft.db) for the log and stable store, a file
// snapshot store (snapshots/), a TCP transport. A tick is one log entry
// (the cursors grouped by time, JSON); the newest 64 entries are cached in
// memory. A single voter bootstraps itself (Config.Bootstrap); an HA
// cluster is bootstrapped by starting every replica with the same
// Config.Peers (all voters, "id=host:port"). Later
// membership changes go through the leader: AddNonvoter adds a server that
// does not count for quorum, RunPromoter (run on the leader) promotes it
// with Promote once its own progress report says it caught up — a dead
// address never reports, so it can never cost the quorum — and
// RemoveServer removes any member while a quorum remains. Status reports
// the configuration, the leader and raft's progress.
//
// A quorum lost for good is recovered offline with Recover (hashicorp/raft
// RecoverCluster) on every survivor: the configuration becomes the
// survivors, the FSM state and log are kept, and the stored term can be
// raised above the leader fence's term so the recovered leader's first
// claim succeeds instead of being fenced forever.
//
// Close on the leader transfers leadership to another voter first, so a
// graceful restart moves the trigger loop in about one round trip instead
// of an election timeout. A crashed leader is replaced after the followers'
// heartbeat timeout plus an election (about 1-2 s with the defaults).
//
// # Leadership
//
// Callbacks registered with OnLeadership run, each in its own goroutine,
// when this node gains leadership, after raft.Barrier has applied every
// committed entry to the FSM (so Cursors is up to date):
//
//	follower ──gain(term)──► barrier ──► callbacks(ctx, term) ──lose / Close──► ctx cancelled
//
// Guarantees:
//   - At most one leader session runs in a process at a time: a new session
//     waits until every callback of the previous one has returned before it
//     starts its own, so leader work of two terms never overlaps locally.
//   - A session is identified by its term; a stale session (leadership lost,
//     or the term moved on before the barrier finished) never starts its
//     callbacks and cannot cancel a newer session.
//   - Leadership changes are read from raft's NotifyCh, which is drained by
//     one goroutine, so no gain/loss edge is missed (LeaderCh is lossy).
//
// Not guaranteed: a deposed leader learns it lost leadership only when raft
// tells it (lease timeout). Work that must not be done by two leaders (the
// scheduler's dispatch) is therefore also fenced outside raft, on the etcd
// leader key with the raft term.
//
// # State
//
// Cursors only move forward: ApplyCursors stores max(old, new) per job, in
// one raft entry for the whole batch. ApplyTick commits a trigger-loop tick
// in ONE entry: cursor advances, route state entries (a nil value deletes
// one) and the deletion of deleted jobs' cursors, applied in that order. Snapshots hold the full state, so a
// restart restores the latest snapshot and replays only the trailing log.
package raftha
