package alert

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// newSQLiteService is a Service on a store in a fresh SQLite file.
func newSQLiteService(t *testing.T) (*store.Store, *Service) {
	t.Helper()
	st, err := store.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	svc, err := New(Config{Store: st})
	require.NoError(t, err)
	return st, svc
}

// TestScannerForgetsMissedFiresOnceDispatched: the scanner remembers the
// fires it raised schedule.missed for only while they stay undispatched.
// Once a fire is dispatched or terminal it is forgotten after one sweep, so
// the set is bounded by the fires undispatched now, not by every fire
// raised in the term; the fires still undispatched are not raised again,
// also across a sweep of more than one page.
func TestScannerForgetsMissedFiresOnceDispatched(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, svc := newSQLiteService(t)
	j := &store.Job{Name: "orphan", Group: "default", ScheduleType: "cron", Schedule: "* * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`), Enabled: true}
	require.NoError(t, st.CreateJob(ctx, j))

	due := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fire := func(i int) store.Run {
		at := due.Add(time.Duration(i) * time.Second)
		return store.Run{FireID: cluster.FireID(j.ID, at), JobID: j.ID, Trigger: cluster.TriggerSchedule,
			Status: cluster.StatusTriggered, ScheduledAt: at}
	}
	n := scanBatch + 2 // two pages
	runs := make([]store.Run, n)
	for i := range runs {
		runs[i] = fire(i)
	}
	_, err := st.InsertRuns(ctx, runs)
	require.NoError(t, err)
	events := func() int {
		t.Helper()
		_, total, err := st.FindAlertEvents(ctx, store.AlertEventFilter{Kind: KindScheduleMissed}, store.Page{Page: 1, PageSize: 1})
		require.NoError(t, err)
		return total
	}

	sc := newScanner(svc)
	before := time.Now()
	require.NoError(t, sc.undispatched(ctx, before))
	require.Equal(t, n, events(), "every undispatched fire raised once")
	require.Len(t, sc.missed, n)

	// All but the last two get a node's report: one is running (it was
	// dispatched), the others are terminal.
	now := time.Now()
	var results []cluster.RunResult
	for i, r := range runs[:n-2] {
		res := cluster.RunResult{FireID: r.FireID, JobID: j.ID, Node: "node-1", Status: cluster.StatusSuccess,
			ScheduledAt: r.ScheduledAt, StartedAt: &now, FinishedAt: &now}
		if i == 0 {
			res.Status, res.FinishedAt = cluster.StatusRunning, nil
		}
		results = append(results, res)
	}
	require.NoError(t, st.ApplyResults(ctx, results))

	require.NoError(t, sc.undispatched(ctx, before))
	require.Equal(t, n, events(), "the fires still undispatched are not raised again")
	require.Equal(t, map[string]bool{runs[n-2].FireID: true, runs[n-1].FireID: true}, sc.missed,
		"only the fires still undispatched are remembered")

	// Another sweep keeps them (and does not raise them); a new
	// undispatched fire is raised once and joins them.
	late := fire(n)
	_, err = st.InsertRuns(ctx, []store.Run{late})
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, sc.undispatched(ctx, before))
	}
	require.Equal(t, n+1, events())
	require.Equal(t, map[string]bool{runs[n-2].FireID: true, runs[n-1].FireID: true, late.FireID: true}, sc.missed)
	require.Empty(t, sc.sweep)
}

// TestEpisodeStateLeavesLateEventsOut: a new term's scanner reads a job's
// episode state from its latest failure or recovery event, leaving out the
// failures recorded late (they are stored after the recovery that is newer
// than them, and would reopen a closed episode).
func TestEpisodeStateLeavesLateEventsOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, svc := newSQLiteService(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, ev := range []store.AlertEvent{
		{DedupeKey: "run.failed:7-1", Kind: KindRunFailed, RunID: 1, OccurredAt: at},
		{DedupeKey: "job.recovered:7-3", Kind: KindJobRecovered, RunID: 3, OccurredAt: at.Add(2 * time.Second)},
		{DedupeKey: "run.failed:7-2", Kind: KindRunFailed, RunID: 2, OccurredAt: at.Add(time.Second),
			Suppressed: true, SuppressedReason: reasonLate},
	} {
		ev.JobID = 7
		ok, err := st.InsertAlertEvent(ctx, &ev, nil)
		require.NoError(t, err)
		require.True(t, ok)
	}
	s, err := newScanner(svc).state(ctx, 7)
	require.NoError(t, err)
	require.False(t, s.failing, "the job recovered; the late failure does not reopen the episode")
	require.Equal(t, scanCursor{At: at.Add(2 * time.Second), ID: 3}, s.last)
}
