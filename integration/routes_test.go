package integration

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

func TestRoutesWithThreeNodes(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)
	token := nodeToken(t, dataDir)

	procs := map[string]*harness.Proc{}
	for i := 0; i < 3; i++ {
		p, uuid := startNode(t, s, token, t.TempDir(), "trio")
		procs[uuid] = p
	}
	require.Len(t, procs, 3, "three distinct node uuids")
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "trio")) == 3 }, 20*time.Second, 100*time.Millisecond)
	trio := liveNodes(t, s.api, "trio")

	routes := []string{cluster.RouteRound, cluster.RouteConsistentHash, cluster.RouteFirst,
		cluster.RouteShardingBroadcast, cluster.RouteLeastRecentlyUsed, cluster.RouteFailover}
	jobs := map[string]int64{}
	for _, r := range routes {
		j, err := s.api.CreateJobBody(map[string]any{"name": "route-" + r, "group": "trio", "schedule": "*/1 * * * * *",
			"handler": "shell", "params": map[string]any{"script": `echo "$CRONIX_SHARD_INDEX/$CRONIX_SHARD_TOTAL"`},
			"route_strategy": r})
		require.NoError(t, err)
		jobs[r] = j.ID
	}

	// Observe a window of about 13 scheduled seconds: wait until the
	// scheduler is past its end and every run inside it is terminal.
	end := time.Now().Truncate(time.Second).Add(14 * time.Second)
	window := map[string][]harness.Run{}
	for _, r := range routes {
		runs := waitRuns(t, s.api, jobs[r], 40*time.Second, func(rs []harness.Run) bool {
			past := false
			for _, x := range rs {
				if !x.ScheduledAt.Before(end) {
					past = true
				} else if !cluster.Terminal(x.Status) {
					return false
				}
			}
			return past
		})
		window[r] = byScheduled(scheduledBefore(runs, end))
		for _, x := range window[r] {
			require.Equal(t, cluster.StatusSuccess, x.Status, "%s run %s: %+v", r, x.FireID, x)
			require.Contains(t, trio, x.Node, "%s run %s ran outside the trio", r, x.FireID)
		}
		if r != cluster.RouteShardingBroadcast {
			requireOncePerSecond(t, runs)
			require.GreaterOrEqual(t, len(window[r]), 11, "%s fired in the window", r)
		}
	}

	// ROUND: a repeating cycle through all three nodes.
	seq := nodesOf(window[cluster.RouteRound])
	t.Logf("ROUND order over %d fires: %v", len(seq), seq)
	require.Len(t, distinct(seq), 3, "ROUND uses every node: %v", seq)
	for i := range seq {
		if i+1 < len(seq) {
			require.NotEqual(t, seq[i], seq[i+1], "ROUND repeated a node at %d: %v", i, seq)
		}
		if i+2 < len(seq) {
			require.NotEqual(t, seq[i], seq[i+2], "ROUND repeated a node at %d: %v", i, seq)
		}
		if i+3 < len(seq) {
			require.Equal(t, seq[i], seq[i+3], "ROUND order is not periodic at %d: %v", i, seq)
		}
	}
	// CONSISTENT_HASH, FIRST and FAILOVER (all nodes healthy): one node.
	for _, r := range []string{cluster.RouteConsistentHash, cluster.RouteFirst, cluster.RouteFailover} {
		require.Len(t, distinct(nodesOf(window[r])), 1, "%s must stick to one node: %v", r, nodesOf(window[r]))
	}
	// LRU: all three, evenly.
	lru := distinct(nodesOf(window[cluster.RouteLeastRecentlyUsed]))
	require.Len(t, lru, 3, "LRU uses every node: %v", lru)
	t.Logf("LRU use counts: %v", lru)
	lo, hi := len(seq), 0
	for _, n := range lru {
		lo, hi = min(lo, n), max(hi, n)
	}
	require.LessOrEqual(t, hi-lo, 1, "LRU spreads evenly: %v", lru)
	// SHARDING_BROADCAST: indexes 0..2 of 3, once each, on distinct nodes, every second.
	perSecond := map[int64][]harness.Run{}
	for _, x := range window[cluster.RouteShardingBroadcast] {
		perSecond[x.ScheduledAt.Unix()] = append(perSecond[x.ScheduledAt.Unix()], x)
	}
	require.GreaterOrEqual(t, len(perSecond), 11, "broadcast fired in the window")
	for sec, rs := range perSecond {
		require.Len(t, rs, 3, "broadcast second %d: %+v", sec, rs)
		require.Len(t, distinct(nodesOf(rs)), 3, "broadcast second %d on distinct nodes: %+v", sec, rs)
		var outs []string
		for _, x := range rs {
			require.Equal(t, 3, x.ShardTotal, "%+v", x)
			require.Equal(t, cluster.ShardFireID(jobs[cluster.RouteShardingBroadcast], x.ScheduledAt, x.ShardIndex), x.FireID)
			require.Equal(t, fmt.Sprintf("%d/3\n", x.ShardIndex), x.Output)
			outs = append(outs, x.Output)
		}
		sort.Strings(outs)
		require.Equal(t, []string{"0/3\n", "1/3\n", "2/3\n"}, outs, "broadcast second %d", sec)
	}

	// kill -9 the node FAILOVER uses; once its lease is gone, FAILOVER and
	// ROUND use only the two live nodes.
	victim := window[cluster.RouteFailover][0].Node
	t.Logf("killing %s (the FAILOVER node)", victim)
	procs[victim].Kill()
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "trio")) == 2 }, 15*time.Second, 100*time.Millisecond,
		"killed node's registration must expire (lease 3s)")
	live := liveNodes(t, s.api, "trio")
	require.NotContains(t, live, victim)
	after := time.Now().Add(time.Second)
	for _, r := range []string{cluster.RouteFailover, cluster.RouteRound} {
		runs := waitRuns(t, s.api, jobs[r], 30*time.Second, func(rs []harness.Run) bool {
			return len(successes(scheduledAfter(rs, after))) >= 6
		})
		late := successes(scheduledAfter(runs, after))
		for _, x := range late {
			require.Contains(t, live, x.Node, "%s run %s after the kill", r, x.FireID)
		}
		if r == cluster.RouteRound {
			require.Len(t, distinct(nodesOf(late)), 2, "ROUND alternates over the live nodes: %v", nodesOf(byScheduled(late)))
		} else {
			require.Len(t, distinct(nodesOf(late)), 1, "FAILOVER sticks to one live node: %v", nodesOf(byScheduled(late)))
		}
	}
	for _, r := range routes {
		if r == cluster.RouteShardingBroadcast {
			continue
		}
		runs, _, err := s.api.Runs(jobs[r], 500)
		require.NoError(t, err)
		requireOncePerSecond(t, runs)
	}
}
