package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// runAlertSuite covers the alert outbox, its deliveries, settings and the
// alert scanner's run reads; runSuite calls it on every dialect.
func runAlertSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("AlertEventDedupeAndDeliveries", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		code := 3
		ev := store.AlertEvent{DedupeKey: "run.failed:1-1", Kind: "run.failed", JobID: 7, JobName: "backup",
			Group: "default", RunID: 11, FireID: "1-1", Node: "n1", RunStatus: "failed", ExitCode: &code,
			Message: "exit status 3", OutputTail: "boom\n", OccurredAt: time.Now()}
		ok, err := s.InsertAlertEvent(ctx, &ev, []store.AlertDelivery{
			{Channel: "email", Target: "email", Recipients: []string{"a@example.com", "b@example.com"}},
			{Channel: "webhook", Target: "ops"},
		})
		require.NoError(t, err)
		require.True(t, ok)
		require.NotZero(t, ev.ID)
		require.Len(t, ev.Deliveries, 2)

		// The same key again, concurrently: nothing more is written.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				again := store.AlertEvent{DedupeKey: "run.failed:1-1", Kind: "run.failed", JobID: 7}
				ok, err := s.InsertAlertEvent(ctx, &again, []store.AlertDelivery{{Channel: "webhook", Target: "ops"}})
				require.NoError(t, err)
				require.False(t, ok)
			})
		}
		wg.Wait()
		evs, total, err := s.FindAlertEvents(ctx, store.AlertEventFilter{}, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Len(t, evs[0].Deliveries, 2)
		require.Equal(t, []string{"a@example.com", "b@example.com"}, evs[0].Deliveries[0].Recipients)
		require.Equal(t, 3, *evs[0].ExitCode)

		now := time.Now()
		due, err := s.DueAlertDeliveries(ctx, now.Add(time.Second), 10)
		require.NoError(t, err)
		require.Len(t, due, 2)

		// One claim wins; a claimed delivery is not due for others.
		d := due[1]
		wins := 0
		var mu sync.Mutex
		for range 4 {
			wg.Go(func() {
				ok, err := s.ClaimAlertDelivery(ctx, d.ID, now, now.Add(time.Minute))
				require.NoError(t, err)
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, wins)
		due, err = s.DueAlertDeliveries(ctx, now.Add(time.Second), 10)
		require.NoError(t, err)
		require.Len(t, due, 1)

		// A failed attempt releases the claim and waits; a later one sends.
		require.NoError(t, s.RecordAlertAttempt(ctx, d.ID, store.AlertAttempt{Err: "500", NextAttemptAt: now.Add(time.Hour)}))
		due, err = s.DueAlertDeliveries(ctx, now.Add(time.Minute), 10)
		require.NoError(t, err)
		require.Len(t, due, 1, "the failed one waits for its next attempt")
		due, err = s.DueAlertDeliveries(ctx, now.Add(2*time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, due, 2)
		require.NoError(t, s.RecordAlertAttempt(ctx, d.ID, store.AlertAttempt{}))
		got, err := s.GetAlertEvent(ctx, ev.ID)
		require.NoError(t, err)
		sent := got.Deliveries[1]
		require.Equal(t, store.DeliverySent, sent.Status)
		require.Equal(t, 2, sent.Attempts)
		require.Empty(t, sent.LastError)
		require.NotNil(t, sent.SentAt)

		// A final failure.
		require.NoError(t, s.RecordAlertAttempt(ctx, due[0].ID, store.AlertAttempt{Err: "refused", Final: true}))
		evs, total, err = s.FindAlertEvents(ctx, store.AlertEventFilter{Status: store.DeliveryFailed}, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "refused", evs[0].Deliveries[0].LastError)
	})

	t.Run("AlertEpisodeQueries", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		insertWhy := func(key, kind string, suppressed bool, reason string) {
			ev := store.AlertEvent{DedupeKey: key, Kind: kind, JobID: 5, Suppressed: suppressed, SuppressedReason: reason}
			ok, err := s.InsertAlertEvent(ctx, &ev, nil)
			require.NoError(t, err)
			require.True(t, ok)
		}
		insert := func(key, kind string, suppressed bool) { insertWhy(key, kind, suppressed, "") }
		_, err := s.LatestAlertEvent(ctx, 5, []string{"run.failed"}, "")
		require.ErrorIs(t, err, store.ErrNotFound)
		exists, err := s.AlertEventExists(ctx, "a")
		require.NoError(t, err)
		require.False(t, exists)
		insert("a", "run.failed", false)
		insert("b", "run.failed", true)
		insert("c", "run.timeout", true)
		exists, err = s.AlertEventExists(ctx, "a")
		require.NoError(t, err)
		require.True(t, exists)
		n, err := s.CountSuppressedAlertEvents(ctx, 5)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		last, err := s.LatestAlertEvent(ctx, 5, []string{"run.failed", "job.recovered"}, "late")
		require.NoError(t, err)
		require.Equal(t, "b", last.DedupeKey)
		insertWhy("b-late", "run.failed", true, "late")
		last, err = s.LatestAlertEvent(ctx, 5, []string{"run.failed", "job.recovered"}, "late")
		require.NoError(t, err)
		require.Equal(t, "b", last.DedupeKey, "an event suppressed for the excepted reason is left out")
		last, err = s.LatestAlertEvent(ctx, 5, []string{"run.failed", "job.recovered"}, "")
		require.NoError(t, err)
		require.Equal(t, "b-late", last.DedupeKey)
		del, err := s.LatestDeliveredAlertEvent(ctx, 5, "run.failed")
		require.NoError(t, err)
		require.Equal(t, "a", del.DedupeKey)
		insert("d", "job.recovered", false)
		n, err = s.CountSuppressedAlertEvents(ctx, 5)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("Settings", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		_, err := s.GetSetting(ctx, "alerting")
		require.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, s.PutSetting(ctx, "alerting", `{"a":1}`, "admin"))
		require.NoError(t, s.PutSetting(ctx, "alerting", `{"a":2}`, "admin"))
		v, err := s.GetSetting(ctx, "alerting")
		require.NoError(t, err)
		require.Equal(t, `{"a":2}`, v)
	})

	t.Run("TerminalRunsSince", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		j := newJob("scan")
		require.NoError(t, s.CreateJob(ctx, j))
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		for i := range 5 {
			runs = append(runs, newRun(j.ID, at.Add(time.Duration(i)*time.Second)))
		}
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)
		start := time.Now().Add(-time.Second)
		got, err := s.TerminalRunsSince(ctx, start, 0, time.Now().Add(time.Minute), 10)
		require.NoError(t, err)
		require.Empty(t, got, "triggered runs are not terminal")
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			{FireID: runs[3].FireID, Status: cluster.StatusFailed}, {FireID: runs[1].FireID, Status: cluster.StatusSuccess},
		}))
		got, err = s.TerminalRunsSince(ctx, start, 0, time.Now().Add(time.Minute), 10)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.True(t, !got[1].UpdatedAt.Before(got[0].UpdatedAt))
		after, err := s.TerminalRunsSince(ctx, got[0].UpdatedAt, got[0].ID, time.Now().Add(time.Minute), 10)
		require.NoError(t, err)
		require.Len(t, after, 1)
		require.Equal(t, got[1].ID, after[0].ID)

		// The keys are the same runs in the same order; paging after the
		// first key, and an until before the runs, narrow them.
		keys, err := s.TerminalRunKeysSince(ctx, start, 0, time.Now().Add(time.Minute), 10)
		require.NoError(t, err)
		require.Len(t, keys, 2)
		for i := range keys {
			require.Equal(t, got[i].ID, keys[i].ID)
			require.True(t, got[i].UpdatedAt.Equal(keys[i].UpdatedAt), "key %d: %s, run: %s", i, keys[i].UpdatedAt, got[i].UpdatedAt)
		}
		keys, err = s.TerminalRunKeysSince(ctx, got[0].UpdatedAt, got[0].ID, time.Now().Add(time.Minute), 10)
		require.NoError(t, err)
		require.Equal(t, []store.ScanKey{{ID: got[1].ID, UpdatedAt: got[1].UpdatedAt}}, keys)
		keys, err = s.TerminalRunKeysSince(ctx, start, 0, start, 10)
		require.NoError(t, err)
		require.Empty(t, keys)
		keys, err = s.TerminalRunKeysSince(ctx, start, 0, time.Now().Add(time.Minute), 1)
		require.NoError(t, err)
		require.Len(t, keys, 1, "limit")

		// Ids through a key: the same runs up to and including it, from
		// since on.
		ids, err := s.TerminalRunIDsThrough(ctx, start, got[1].UpdatedAt, got[1].ID)
		require.NoError(t, err)
		require.Equal(t, []int64{got[0].ID, got[1].ID}, ids)
		ids, err = s.TerminalRunIDsThrough(ctx, start, got[1].UpdatedAt, got[1].ID-1)
		require.NoError(t, err)
		require.Equal(t, []int64{got[0].ID}, ids, "the key itself is the bound")
		ids, err = s.TerminalRunIDsThrough(ctx, got[1].UpdatedAt.Add(time.Microsecond), time.Now().Add(time.Minute), 0)
		require.NoError(t, err)
		require.Empty(t, ids, "since is after both")

		// Heads: terminal runs only, in (updated_at, id) order, with the
		// columns that decide whether a run raises an alert.
		heads, err := s.TerminalRunHeads(ctx, []int64{got[1].ID, runIDOf(t, s, runs[0].FireID), got[0].ID, 1 << 40})
		require.NoError(t, err)
		require.Len(t, heads, 2, "the triggered run and the unknown id are left out")
		for i, h := range heads {
			require.Equal(t, got[i].ID, h.ID)
			require.Equal(t, got[i].FireID, h.FireID)
			require.Equal(t, j.ID, h.JobID)
			require.Equal(t, got[i].Status, h.Status)
			require.Equal(t, cluster.TriggerSchedule, h.Trigger)
			require.True(t, got[i].ScheduledAt.Equal(h.ScheduledAt))
			require.True(t, got[i].UpdatedAt.Equal(h.UpdatedAt))
		}
		none, err := s.TerminalRunHeads(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)

		und, err := s.UndispatchedRunsBefore(ctx, at.Add(3*time.Second), 0, 10)
		require.NoError(t, err)
		require.Len(t, und, 2, "runs 0 and 2 are triggered, undispatched and due before +3s")
	})
}

// runIDOf is the id of the run with fireID.
func runIDOf(t *testing.T, s *store.Store, fireID string) int64 {
	t.Helper()
	r, err := s.RunByFireID(testCtx(t), fireID)
	require.NoError(t, err)
	return r.ID
}
