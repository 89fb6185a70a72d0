package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// threeNodes starts a harness with live nodes a, b, c in group g.
func threeNodes(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.relist = 24 * time.Hour
	h.sched = h.newScheduler()
	for _, n := range []string{"a", "b", "c"} {
		h.addNode(n, "g", "cmd")
	}
	return h
}

func routed(id int64, strategy string) store.Job {
	j := job(id, everySecond)
	j.RouteStrategy = strategy
	return j
}

// nodesOf returns the node of job id's fire at t0+1s … t0+n s.
func (h *harness) nodesOf(id int64, n int) []string {
	h.t.Helper()
	runs, _, _ := h.store.snapshot()
	out := make([]string, n)
	for i := range n {
		r, ok := runs[cluster.FireID(id, t0.Add(time.Duration(i+1)*time.Second))]
		require.True(h.t, ok, "fire %d of job %d missing", i+1, id)
		out[i] = r.Node
	}
	return out
}

func (h *harness) steps(n int) {
	h.t.Helper()
	for range n {
		h.step()
	}
}

// waitSeen waits until the loop applied every change up to rev of one watch.
func (h *harness) waitSeen(which func(*seenRevs) int64, rev int64) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return which(&h.sched.seen) >= rev }, 10*time.Second, time.Millisecond)
}

func seenNodes(s *seenRevs) int64 { return s.nodes.Load() }
func seenRuns(s *seenRevs) int64  { return s.runs.Load() }
func seenProcs(s *seenRevs) int64 { return s.procs.Load() }

func (h *harness) put(key, val string) int64 {
	h.t.Helper()
	resp, err := h.cli.Put(context.Background(), key, val)
	require.NoError(h.t, err)
	return resp.Header.Revision
}

func (h *harness) del(key string) int64 {
	h.t.Helper()
	resp, err := h.cli.Delete(context.Background(), key)
	require.NoError(h.t, err)
	return resp.Header.Revision
}

func count(nodes []string) map[string]int {
	m := map[string]int{}
	for _, n := range nodes {
		m[n]++
	}
	return m
}

func TestRouteFirstLastPinned(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, ""))
	h.store.putJob(routed(2, cluster.RouteFirst))
	h.store.putJob(routed(3, cluster.RouteLast))
	pinned := routed(4, cluster.RouteLast)
	pinned.NodeUUID = "b"
	h.store.putJob(pinned)
	gone := routed(5, "")
	gone.NodeUUID = "zz"
	h.store.putJob(gone)
	h.start()
	h.steps(30)
	require.Equal(t, map[string]int{"a": 30}, count(h.nodesOf(1, 30)), "\"\" means FIRST")
	require.Equal(t, map[string]int{"a": 30}, count(h.nodesOf(2, 30)))
	require.Equal(t, map[string]int{"c": 30}, count(h.nodesOf(3, 30)))
	require.Equal(t, map[string]int{"b": 30}, count(h.nodesOf(4, 30)), "pinned wins over the strategy")
	runs, _, _ := h.store.snapshot()
	r := runs[cluster.FireID(5, t0.Add(time.Second))]
	require.Equal(t, cluster.StatusFailed, r.Status)
	require.Contains(t, r.Message, "pinned node zz is not live")
	require.NotNil(t, h.get(h.keys.Job("b", 4)), "a pinned job is placed on its node")
}

func TestRouteRoundContinuesAcrossTerms(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteRound))
	h.start()
	h.steps(30)
	got := h.nodesOf(1, 30)
	for i, n := range got { // job 1's cycle starts at its id modulo 3
		require.Equal(t, []string{"a", "b", "c"}[(i+1)%3], n, "fire %d", i+1)
	}
	require.NoError(t, h.stop())
	_, calls, _ := h.store.snapshot()
	require.Equal(t, int64(calls), h.cursors.applies.Load(), "route state rides in the tick's raft entry")

	// A new term (a new loop reloading from raft) continues the cycle.
	h.store.putJob(routed(1, cluster.RouteRound)) // unchanged
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.steps(4)
	require.Equal(t, []string{"b", "c", "a", "b"}, h.nodesOf(1, 34)[30:])
	b, ok := h.raft.RouteState(routeKey(1))
	require.True(t, ok)
	var rs routeState
	require.NoError(t, json.Unmarshal(b, &rs))
	require.Equal(t, uint64(34), rs.Seq)
}

// Jobs on one schedule spread over the nodes in every tick (ROUND, LFU,
// LRU), each job still cycling through all of them: started alike, every
// job sent its fire of a tick to the same node.
func TestRoutesSpreadEachTick(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	strategies := []string{cluster.RouteRound, cluster.RouteLeastFrequentlyUse, cluster.RouteLeastRecentlyUsed}
	const perStrategy = 30
	for s, strategy := range strategies {
		for i := range perStrategy {
			h.store.putJob(routed(int64(s*perStrategy+i+1), strategy))
		}
	}
	h.start()
	const ticks = 6
	h.steps(ticks)
	for s, strategy := range strategies {
		for tick := range ticks {
			perNode := map[string]int{}
			for i := range perStrategy {
				perNode[h.nodesOf(int64(s*perStrategy+i+1), ticks)[tick]]++
			}
			require.Equal(t, map[string]int{"a": 10, "b": 10, "c": 10}, perNode, "%s, tick %d", strategy, tick+1)
		}
		for i := range perStrategy {
			got := h.nodesOf(int64(s*perStrategy+i+1), ticks)
			require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, count(got), "%s, job %d cycles through the nodes: %v",
				strategy, s*perStrategy+i+1, got)
		}
	}
}

func TestRouteRandom(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteRandom))
	h.start()
	h.steps(30)
	c := count(h.nodesOf(1, 30))
	require.Len(t, c, 3, "30 random picks over 3 nodes should use each: %v", c)
}

func TestRouteLeastFrequentlyAndRecentlyUsed(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteLeastFrequentlyUse))
	h.store.putJob(routed(2, cluster.RouteLeastRecentlyUsed))
	h.start()
	h.steps(30)
	require.Equal(t, map[string]int{"a": 10, "b": 10, "c": 10}, count(h.nodesOf(1, 30)))
	lru := h.nodesOf(2, 30)
	require.Equal(t, map[string]int{"a": 10, "b": 10, "c": 10}, count(lru))
	for i := 3; i < 30; i++ {
		require.Equal(t, lru[i-3], lru[i], "LRU picks the node used longest ago")
	}
	b, ok := h.raft.RouteState(routeKey(1))
	require.True(t, ok)
	var rs routeState
	require.NoError(t, json.Unmarshal(b, &rs))
	require.Equal(t, map[string]uint64{"a": 10, "b": 10, "c": 10}, rs.Uses)

	// A node joining later starts at the others' count: it shares the load
	// instead of taking every fire.
	rev := h.put(h.keys.Node("d"), mustNode(t, "d"))
	h.waitSeen(seenNodes, rev)
	h.steps(8)
	runs, _, _ := h.store.snapshot()
	var later []string
	for i := 31; i <= 38; i++ {
		later = append(later, runs[cluster.FireID(1, t0.Add(time.Duration(i)*time.Second))].Node)
	}
	require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2, "d": 2}, count(later))
}

func mustNode(t *testing.T, uuid string) string {
	t.Helper()
	b, err := json.Marshal(cluster.NodeInfo{UUID: uuid, Group: "g", Status: NodeOnline,
		Plugins: []cluster.PluginInfo{{Name: "cmd", Version: "1"}}})
	require.NoError(t, err)
	return string(b)
}

func TestRouteConsistentHash(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	const jobs = 100
	for i := range jobs {
		h.store.putJob(routed(int64(i+1), cluster.RouteConsistentHash))
	}
	h.start()
	h.steps(3)
	before := map[int64]string{}
	spread := map[string]int{}
	for id := int64(1); id <= jobs; id++ {
		ns := h.nodesOf(id, 3)
		require.Equal(t, ns[0], ns[1], "job %d moved", id)
		require.Equal(t, ns[0], ns[2], "job %d moved", id)
		before[id] = ns[0]
		spread[ns[0]]++
	}
	for _, n := range []string{"a", "b", "c"} {
		require.Greater(t, spread[n], 15, "jobs are spread over the nodes: %v", spread)
	}

	// Node c leaves: only its jobs move.
	rev := h.del(h.keys.Node("c"))
	h.waitSeen(seenNodes, rev)
	h.steps(1)
	moved := 0
	for id := int64(1); id <= jobs; id++ {
		now := h.nodesOf(id, 4)[3]
		require.NotEqual(t, "c", now)
		if before[id] != "c" {
			require.Equal(t, before[id], now, "job %d moved although its node stayed", id)
		} else {
			moved++
		}
	}
	require.Equal(t, spread["c"], moved)
}

func TestRouteFailover(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteFailover))
	h.start()
	h.steps(10)
	rev := h.del(h.keys.Node("a")) // a's lease expired
	h.waitSeen(seenNodes, rev)
	h.steps(10)
	sick := cluster.NodeInfo{UUID: "b", Group: "g", Status: "offline", Plugins: []cluster.PluginInfo{{Name: "cmd"}}}
	b, err := json.Marshal(sick)
	require.NoError(t, err)
	rev = h.put(h.keys.Node("b"), string(b)) // b registered but not healthy
	h.waitSeen(seenNodes, rev)
	h.steps(10)
	got := h.nodesOf(1, 30)
	require.Equal(t, map[string]int{"a": 10}, count(got[:10]))
	require.Equal(t, map[string]int{"b": 10}, count(got[10:20]))
	require.Equal(t, map[string]int{"c": 10}, count(got[20:]))
}

func TestRouteBusyover(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteBusyover))
	h.start()
	// a runs job 1 (a long run's process key).
	rev := h.put(h.keys.Proc("a", 1, 4242), `{"pid":4242}`)
	h.waitSeen(seenProcs, rev)
	for i := range 30 {
		h.step()
		// The node finishes the run: its run key is deleted.
		at := t0.Add(time.Duration(i+1) * time.Second)
		r := h.nodesOf(1, i+1)[i]
		rev := h.del(h.keys.Run(r, cluster.FireID(1, at)))
		h.waitSeen(seenRuns, rev)
	}
	require.Equal(t, map[string]int{"b": 30}, count(h.nodesOf(1, 30)), "a is busy: %v", h.nodesOf(1, 30))

	// A run still pending on b makes b busy too; then every node is busy.
	h.step() // t0+31 → b, not deleted
	h.step() // t0+32 → c
	h.step() // t0+33 → none
	runs, _, _ := h.store.snapshot()
	require.Equal(t, "b", runs[cluster.FireID(1, t0.Add(31*time.Second))].Node)
	require.Equal(t, "c", runs[cluster.FireID(1, t0.Add(32*time.Second))].Node)
	r := runs[cluster.FireID(1, t0.Add(33*time.Second))]
	require.Equal(t, cluster.StatusFailed, r.Status)
	require.Contains(t, r.Message, "BUSYOVER")

	// a's process ends: a is free again.
	rev = h.del(h.keys.Proc("a", 1, 4242))
	h.waitSeen(seenProcs, rev)
	h.step()
	runs, _, _ = h.store.snapshot()
	require.Equal(t, "a", runs[cluster.FireID(1, t0.Add(34*time.Second))].Node)
}

// TestRunWatchCarriesOnlyDeletions: the leader's run watch filters puts (it
// writes every run key itself and tracks them when it dispatches), so a
// dispatch does not come back to it through etcd, and a run is still busy
// until its key is deleted, including after a new term listed it.
func TestRunWatchCarriesOnlyDeletions(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteBusyover))
	h.start()
	before := seenRuns(&h.sched.seen)
	h.step() // t0+1 → a, pending
	first := h.keys.Run("a", cluster.FireID(1, t0.Add(time.Second)))
	resp, err := h.cli.Get(context.Background(), first)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	put := resp.Kvs[0].ModRevision
	require.Greater(t, put, before)
	// A later write under another prefix, seen by the loop: had the run's
	// put come through the run watch, it would have been applied by now.
	rev := h.put(h.keys.Proc("c", 9, 1), `{"pid":1}`)
	h.waitSeen(seenProcs, rev)
	require.Less(t, seenRuns(&h.sched.seen), put, "a put reached the run watch")

	h.step() // t0+2 → b: a is busy with the pending run
	require.Equal(t, []string{"a", "b"}, h.nodesOf(1, 2))

	// A new term lists the pending runs: still busy.
	require.NoError(t, h.stop())
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.step() // t0+3 → c
	require.Equal(t, "c", h.nodesOf(1, 3)[2])

	// Their deletions come through the watch: a and b are free again.
	h.waitSeen(seenRuns, h.del(first))
	h.waitSeen(seenRuns, h.del(h.keys.Run("b", cluster.FireID(1, t0.Add(2*time.Second)))))
	h.step() // t0+4 → a
	require.Equal(t, "a", h.nodesOf(1, 4)[3])
}

func TestRouteShardingBroadcast(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteShardingBroadcast))
	h.start()
	h.steps(30)
	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 30, calls)
	require.Len(t, runs, 90)
	for s := 1; s <= 30; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		for i, n := range []string{"a", "b", "c"} {
			id := cluster.ShardFireID(1, at, i)
			require.Equal(t, fmt.Sprintf("%s-s%d", cluster.FireID(1, at), i), id)
			r, ok := runs[id]
			require.True(t, ok, "shard %d of fire %d", i, s)
			require.Equal(t, n, r.Node)
			require.Equal(t, i, r.ShardIndex)
			require.Equal(t, 3, r.ShardTotal)
			var d cluster.Dispatch
			require.NoError(t, json.Unmarshal(h.get(h.keys.Run(n, id)), &d))
			require.Equal(t, i, d.ShardIndex)
			require.Equal(t, 3, d.ShardTotal)
		}
	}
	c, _ := h.raft.Cursor(1)
	require.Equal(t, t0.Add(30*time.Second).UnixMilli(), c)
}

func TestJobConfigCarriesRetryAndBlock(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	j := routed(1, "")
	j.RetryCount, j.RetryIntervalSeconds, j.BlockStrategy = 3, 7, cluster.BlockDiscardLater
	h.store.putJob(j)
	h.start()
	h.step()
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal(h.get(h.keys.Run("a", cluster.FireID(1, t0.Add(time.Second)))), &d))
	require.Equal(t, 3, d.Job.RetryCount)
	require.Equal(t, 7, d.Job.RetryIntervalSeconds)
	require.Equal(t, cluster.BlockDiscardLater, d.Job.BlockStrategy)
}

func TestDeletedJobDropsCursorAndRouteState(t *testing.T) {
	t.Parallel()
	h := threeNodes(t)
	h.store.putJob(routed(1, cluster.RouteRound))
	h.store.putJob(routed(2, cluster.RouteRound))
	h.start()
	h.steps(2)
	_, ok := h.raft.RouteState(routeKey(1))
	require.True(t, ok)
	h.put(h.keys.JobSignal(1), "1") // the API's signal of job 1
	h.store.deleteJob(1)
	h.del(h.keys.JobSignal(1)) // deleted with the job
	// The loop dropped the job (its placement is gone) ...
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 1 }, 10*time.Second, time.Millisecond)
	h.steps(1) // ... and the deletion rides with this tick's entry
	require.Eventually(t, func() bool {
		_, c := h.raft.Cursor(1)
		_, r := h.raft.RouteState(routeKey(1))
		return !c && !r
	}, 3*time.Second, time.Millisecond, "cursors %v routes %v", h.raft.Cursors(), h.raft.RouteStates())
	_, ok = h.raft.Cursor(2)
	require.True(t, ok)
	_, calls, _ := h.store.snapshot()
	require.Equal(t, int64(calls), h.cursors.applies.Load(), "no extra raft entry for the deletion")
}
