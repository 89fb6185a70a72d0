package scheduler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// The loop against the real SQLite store: jobs are read from SQL and every
// fire is recorded there once.
func TestWithSQLiteStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.EnsureGroup(ctx, "g", "G")
	require.NoError(t, err)

	h := newHarness(t)
	h.jobs, h.runs = db, db
	h.sched = h.newScheduler()
	h.addNode("n1", "g", "cmd")
	var ids []int64
	for range 50 {
		j := job(0, everySecond)
		require.NoError(t, db.CreateJob(ctx, &j))
		ids = append(ids, j.ID)
	}
	off := job(0, everySecond)
	off.Enabled = false
	require.NoError(t, db.CreateJob(ctx, &off))

	h.start()
	h.step()
	h.step()

	for _, id := range ids {
		for s := 1; s <= 2; s++ {
			at := t0.Add(time.Duration(s) * time.Second)
			r, err := db.RunByFireID(ctx, cluster.FireID(id, at))
			require.NoError(t, err)
			require.Equal(t, cluster.StatusTriggered, r.Status)
			require.Equal(t, cluster.TriggerSchedule, r.Trigger)
			require.Equal(t, "n1", r.Node)
			require.True(t, r.ScheduledAt.Equal(at))
		}
	}
	_, total, err := db.ListRuns(ctx, off.ID, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Zero(t, total, "a disabled job fired")
	require.Equal(t, int64(100), h.count(h.keys.RunPrefix("n1")))

	// Enabling the disabled job in SQL and signalling it schedules it.
	off.Enabled = true
	require.NoError(t, db.UpdateJob(ctx, &off))
	_, err = h.cli.Put(ctx, h.keys.JobSignal(off.ID), "2")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(h.keys.Job("n1", off.ID)) != nil }, 10*time.Second, 5*time.Millisecond)
	h.step()
	_, err = db.RunByFireID(ctx, cluster.FireID(off.ID, t0.Add(3*time.Second)))
	require.NoError(t, err)
}
