package alert_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// TestScannerReadsLateCommitWithinOverlap: a run that becomes visible after
// the scanner has handled runs that are newer than it (its transaction
// stamped updated_at, then committed late) is still read from the overlap
// and raised, once; the runs handled before are not raised again.
func TestScannerReadsLateCommitWithinOverlap(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	svc := b.service(b.store, nil)
	first, second, late := b.job("first"), b.job("second"), b.job("late")
	run(t, svc.RunScanner)

	f1 := b.result(first, "node-1", cluster.StatusFailed, 3, "first")
	b.waitEvents(1)
	f2 := b.result(second, "node-1", cluster.StatusFailed, 3, "second")
	b.waitEvents(2)
	r1, err := b.store.RunByFireID(t.Context(), f1)
	require.NoError(t, err)
	r2, err := b.store.RunByFireID(t.Context(), f2)
	require.NoError(t, err)
	require.True(t, r1.UpdatedAt.Before(r2.UpdatedAt), "the second run finished after the first")

	// The late run: stamped when the first one was, visible only now, so it
	// sorts before the scanner's cursor (the second run).
	db, err := sql.Open("sqlite", strings.TrimPrefix(b.dsn, "sqlite://")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	lateFire := cluster.FireID(late.ID, r1.ScheduledAt)
	_, err = db.ExecContext(t.Context(), `INSERT INTO runs (fire_id, job_id, "trigger", status, node, scheduled_at,
		dispatched_at, started_at, finished_at, exit_code, output, message, created_at, updated_at)
		SELECT ?, ?, "trigger", status, node, scheduled_at, dispatched_at, started_at, finished_at, exit_code,
		'late output', message, created_at, updated_at FROM runs WHERE fire_id = ?`, lateFire, late.ID, f1)
	require.NoError(t, err)
	rl, err := b.store.RunByFireID(t.Context(), lateFire)
	require.NoError(t, err)
	require.True(t, rl.UpdatedAt.Equal(r1.UpdatedAt) && rl.ID > r2.ID)

	b.waitEvents(3)
	// One more run after it: once its event is there, passes have re-read
	// the overlap holding the three runs before it.
	f4 := b.result(first, "node-2", cluster.StatusSuccess, 0, "ok")
	evs := b.waitEvents(4)
	byFire := map[string][]store.AlertEvent{}
	for _, ev := range evs {
		byFire[ev.FireID] = append(byFire[ev.FireID], ev)
	}
	require.Len(t, evs, 4, "no event raised twice, none for nothing")
	for _, fire := range []string{f1, f2, lateFire} {
		require.Len(t, byFire[fire], 1, "fire %s", fire)
		require.Equal(t, "run.failed", byFire[fire][0].Kind, "fire %s", fire)
	}
	require.Equal(t, "late output", byFire[lateFire][0].OutputTail, "the late run's event carries its output")
	require.Equal(t, late.ID, byFire[lateFire][0].JobID)
	require.Len(t, byFire[f4], 1)
	require.Equal(t, "job.recovered", byFire[f4][0].Kind)
	require.Equal(t, "node-2", byFire[f4][0].Node, "read from the run, not from its head")
}
