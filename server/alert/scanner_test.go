package alert_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

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
	lateFire := cluster.FireID(late.ID, r1.ScheduledAt)
	rl := b.lateCopy(f1, lateFire, late.ID)
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

// lateCopy stores a copy of run from as run fire of job, with output "late
// output", stamped as from was (updated_at) but visible only now: a
// transaction that committed late. It returns the copy.
func (b *bundle) lateCopy(from, fire string, job int64) *store.Run {
	b.t.Helper()
	db, err := sql.Open("sqlite", strings.TrimPrefix(b.dsn, "sqlite://")+"?_pragma=busy_timeout(10000)")
	require.NoError(b.t, err)
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(b.t.Context(), `INSERT INTO runs (fire_id, job_id, "trigger", status, node, scheduled_at,
		dispatched_at, started_at, finished_at, exit_code, output, message, created_at, updated_at)
		SELECT ?, ?, "trigger", status, node, scheduled_at, dispatched_at, started_at, finished_at, exit_code,
		'late output', message, created_at, updated_at FROM runs WHERE fire_id = ?`, fire, job, from)
	require.NoError(b.t, err)
	r, err := b.store.RunByFireID(b.t.Context(), fire)
	require.NoError(b.t, err)
	return r
}

// byKind returns the events of kind, newest first.
func byKind(evs []store.AlertEvent, kind string) []store.AlertEvent {
	var out []store.AlertEvent
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// TestLateFailureOfAlertedEpisodeIsRecordedSuppressed: a failure whose
// result commits late, after the scanner has handled a newer failure and
// the recovery of its job, is recorded (never lost) but suppressed as
// late, without reopening the episode; a new leader's scanner raises
// nothing again, and the next failure is delivered (TestEpisodeState-
// LeavesLateEventsOut checks the state a new term loads directly).
func TestLateFailureOfAlertedEpisodeIsRecordedSuppressed(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	job := b.job("flaky")
	stop := run(t, b.service(b.store, nil).RunScanner)

	f1 := b.result(job, "node-1", cluster.StatusFailed, 3, "first")
	b.waitEvents(1)
	f2 := b.result(job, "node-1", cluster.StatusFailed, 3, "second")
	b.waitEvents(2)
	b.result(job, "node-1", cluster.StatusSuccess, 0, "ok")
	evs := b.waitEvents(3)
	require.Len(t, byKind(evs, "job.recovered"), 1)

	r1, err := b.store.RunByFireID(t.Context(), f1)
	require.NoError(t, err)
	lateFire := cluster.FireID(job.ID, r1.ScheduledAt.Add(-time.Hour))
	b.lateCopy(f2, lateFire, job.ID)
	evs = b.waitEvents(4)
	require.Equal(t, lateFire, evs[0].FireID, "the late run's event is the newest")
	require.Equal(t, "run.failed", evs[0].Kind)
	require.True(t, evs[0].Suppressed, "its episode was alerted already")
	require.Equal(t, "late", evs[0].SuppressedReason)
	require.Equal(t, "late output", evs[0].OutputTail)

	// A new leader: re-reads the runs before the cursor and raises nothing
	// again; the job is recovered.
	stop()
	run(t, b.service(b.store, nil).RunScanner)
	b.offset.Store(int64(2 * time.Hour)) // past the throttle window of the first failure's delivery
	f5 := b.result(job, "node-2", cluster.StatusFailed, 3, "after the recovery")
	evs = b.waitEvents(5)
	require.Len(t, evs, 5, "nothing raised twice")
	require.Equal(t, f5, evs[0].FireID)
	require.False(t, evs[0].Suppressed, "a failure after the recovery opens a new episode")
	require.Equal(t, 1, evs[0].SuppressedCount, "the late one was suppressed since the recovery")
}
