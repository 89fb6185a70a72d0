package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// runRecoverySuite covers the reads and writes of takeover recovery and the
// lost-run monitor; runSuite calls it on every dialect.
func runRecoverySuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("RunsByFireIDs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		j := newJob("recover")
		require.NoError(t, s.CreateJob(ctx, j))
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		var ids []string
		for i := range 2500 {
			r := newRun(j.ID, at.Add(time.Duration(i)*time.Second))
			r.Node = "n1"
			runs = append(runs, r)
			if i%2 == 0 {
				ids = append(ids, r.FireID)
			}
		}
		// A shard and a manual fire too: their fire keys ("<ms>-s<i>",
		// "m<rev>") sort apart from the scheduled ones on SQLite.
		shard := newRun(j.ID, at)
		shard.FireID, shard.Node = cluster.ShardFireID(j.ID, at, 2), "n1"
		manual := newRun(j.ID, at)
		manual.FireID, manual.Node, manual.Trigger = cluster.ManualFireID(j.ID, 99), "n1", cluster.TriggerManual
		runs = append(runs, shard, manual)
		ids = append(ids, shard.FireID, manual.FireID)
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)
		got, err := s.RunsByFireIDs(ctx, append(ids, "no-such-fire", ids[0]))
		require.NoError(t, err)
		require.Len(t, got, len(ids))
		want := map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
		for i, r := range got {
			require.True(t, want[r.FireID], r.FireID)
			require.Equal(t, "n1", r.Node)
			require.Equal(t, cluster.StatusTriggered, r.Status)
			if i > 0 {
				require.Less(t, got[i-1].FireID, r.FireID, "in fire id order")
			}
		}
		nodes, err := s.RunNodes(ctx, append(ids, "no-such-fire"))
		require.NoError(t, err)
		require.Len(t, nodes, len(ids))
		for _, id := range ids {
			require.Equal(t, "n1", nodes[id], id)
		}
		lost, err := s.MarkLost(ctx, ids, "gone")
		require.NoError(t, err)
		require.Equal(t, len(ids), lost)
		r, err := s.RunByFireID(ctx, manual.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusLost, r.Status)
		r, err = s.RunByFireID(ctx, runs[1].FireID) // not listed
		require.NoError(t, err)
		require.Equal(t, cluster.StatusTriggered, r.Status)
		none, err := s.RunsByFireIDs(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("ActiveRunsNotOnAndMarkLost", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		j := newJob("lost")
		require.NoError(t, s.CreateJob(ctx, j))
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		mk := func(i int, node, status string) store.Run {
			r := newRun(j.ID, at.Add(time.Duration(i)*time.Second))
			r.Node, r.Status = node, status
			return r
		}
		runs := []store.Run{
			mk(0, "live", cluster.StatusTriggered),
			mk(1, "dead", cluster.StatusTriggered),
			mk(2, "dead", cluster.StatusRunning),
			mk(3, "dead", cluster.StatusSuccess),
			mk(4, "", cluster.StatusTriggered),
			mk(5, "dead2", cluster.StatusTriggered),
		}
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)
		// running is a reported status: apply it as a node would.
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{FireID: runs[2].FireID, JobID: j.ID, Node: "dead", Status: cluster.StatusRunning}}))

		got, err := s.ActiveRunsNotOn(ctx, []string{"live"}, 0, 0)
		require.NoError(t, err)
		var fires []string
		for _, r := range got {
			fires = append(fires, r.FireID)
		}
		require.Equal(t, []string{runs[1].FireID, runs[2].FireID, runs[5].FireID}, fires)
		page, err := s.ActiveRunsNotOn(ctx, []string{"live"}, got[0].ID, 1)
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, runs[2].FireID, page[0].FireID)

		n, err := s.MarkLost(ctx, []string{runs[1].FireID, runs[2].FireID, runs[3].FireID, "no-such-fire"}, "node dead lost its lease")
		require.NoError(t, err)
		require.Equal(t, 2, n, "only the unfinished runs change")
		for i, want := range map[int]string{1: cluster.StatusLost, 2: cluster.StatusLost, 3: cluster.StatusSuccess, 0: cluster.StatusTriggered} {
			r, err := s.RunByFireID(ctx, runs[i].FireID)
			require.NoError(t, err)
			require.Equal(t, want, r.Status, fmt.Sprint(i))
			if want == cluster.StatusLost {
				require.Equal(t, "node dead lost its lease", r.Message)
				require.NotNil(t, r.FinishedAt)
			}
		}
		// A late result never overrides lost; marking again changes nothing.
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{FireID: runs[1].FireID, JobID: j.ID, Node: "dead", Status: cluster.StatusSuccess}}))
		r, err := s.RunByFireID(ctx, runs[1].FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusLost, r.Status)
		n, err = s.MarkLost(ctx, []string{runs[1].FireID}, "again")
		require.NoError(t, err)
		require.Zero(t, n)

		got, err = s.ActiveRunsNotOn(ctx, nil, 0, 10)
		require.NoError(t, err)
		require.Len(t, got, 2, "live and dead2 remain unfinished with a node")
	})
}
