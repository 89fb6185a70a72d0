package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// runSummarySuite covers the dashboard's counts and the job list's last
// runs; runSuite calls it on every dialect.
func runSummarySuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("SummaryCountsAndLastRuns", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		billing := &store.Group{AppName: "billing"}
		ops := &store.Group{AppName: "ops"}
		require.NoError(t, s.CreateGroup(ctx, billing))
		require.NoError(t, s.CreateGroup(ctx, ops))
		mk := func(name, group string, enabled bool) *store.Job {
			j := &store.Job{Name: name, Group: group, ScheduleType: "cron", Schedule: "* * * * *", Handler: "shell", Enabled: enabled}
			require.NoError(t, s.CreateJob(ctx, j))
			return j
		}
		a, b, c, never := mk("a", "billing", true), mk("b", "billing", false), mk("c", "ops", true), mk("never", "ops", true)

		day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
		run := func(j *store.Job, at time.Time, status string, finished bool) cluster.RunResult {
			r := cluster.RunResult{FireID: cluster.FireID(j.ID, at), JobID: j.ID, Trigger: cluster.TriggerSchedule,
				Node: "n1", Status: status, ScheduledAt: at}
			if finished {
				started, fin := at.Add(time.Millisecond), at.Add(time.Second)
				r.StartedAt, r.FinishedAt = &started, &fin
			}
			return r
		}
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			run(a, day.Add(-time.Microsecond), cluster.StatusFailed, true), // the day before
			run(a, day, cluster.StatusSuccess, true),
			run(a, day.Add(time.Hour), cluster.StatusTimeout, true), // a's latest
			run(b, day.Add(2*time.Hour), cluster.StatusSuccess, true),
			run(b, day.Add(time.Hour), cluster.StatusFailed, true), // inserted later, scheduled earlier
			run(c, day.Add(3*time.Hour), cluster.StatusRunning, false),
			run(c, day.Add(24*time.Hour), cluster.StatusLost, true), // the day after
		}))

		jobs, err := s.CountJobs(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, store.JobCounts{Enabled: 3, Disabled: 1}, jobs)
		jobs, err = s.CountJobs(ctx, &store.Scope{GroupIDs: []int64{billing.ID}})
		require.NoError(t, err)
		require.Equal(t, store.JobCounts{Enabled: 1, Disabled: 1}, jobs)
		jobs, err = s.CountJobs(ctx, &store.Scope{})
		require.NoError(t, err)
		require.Equal(t, store.JobCounts{}, jobs, "an empty scope sees nothing")

		byStatus, err := s.CountRunsByStatus(ctx, store.RunFilter{From: day, To: day.Add(24 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, map[string]int{"success": 2, "timeout": 1, "failed": 1, "running": 1}, byStatus)
		byStatus, err = s.CountRunsByStatus(ctx, store.RunFilter{Scope: &store.Scope{GroupIDs: []int64{ops.ID}}, From: day})
		require.NoError(t, err)
		require.Equal(t, map[string]int{"running": 1, "lost": 1}, byStatus)
		byStatus, err = s.CountRunsByStatus(ctx, store.RunFilter{JobID: a.ID})
		require.NoError(t, err)
		require.Equal(t, map[string]int{"failed": 1, "success": 1, "timeout": 1}, byStatus)

		last, err := s.LastRuns(ctx, []int64{a.ID, b.ID, c.ID, never.ID, 999999})
		require.NoError(t, err)
		require.Len(t, last, 3, "jobs that never ran, or do not exist, have no entry")
		require.Equal(t, cluster.StatusTimeout, last[a.ID].Status)
		require.True(t, last[a.ID].ScheduledAt.Equal(day.Add(time.Hour)))
		require.NotNil(t, last[a.ID].FinishedAt)
		require.True(t, last[a.ID].FinishedAt.Equal(day.Add(time.Hour+time.Second)))
		require.Equal(t, cluster.StatusSuccess, last[b.ID].Status, "the latest by scheduled time, not by insertion")
		require.Equal(t, cluster.StatusLost, last[c.ID].Status)
		require.Equal(t, c.ID, last[c.ID].JobID)
		// The same run the job's run list shows first.
		runs, _, err := s.ListRuns(ctx, b.ID, store.Page{Page: 1, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, runs[0].ID, last[b.ID].ID)

		none, err := s.LastRuns(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	})
}
