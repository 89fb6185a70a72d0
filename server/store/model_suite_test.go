package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// runModelSuite covers the full job model, filters, group CRUD and
// finished-run reporting; runSuite calls it on every dialect.
func runModelSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("JobModelFields", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		j := newJob("full")
		j.RouteStrategy = cluster.RouteShardingBroadcast
		j.BlockStrategy = cluster.BlockCoverEarly
		j.MisfirePolicy = cluster.MisfireCatchUp
		j.MisfireMaxCatchUp = 250
		j.RetryCount = 3
		j.RetryIntervalSeconds = 45
		j.AlarmEmails = []string{"ops@example.com", "dev@example.org"}
		j.ChildJobIDs = []int64{12, 7}
		j.NodeUUID = "node-123"
		require.NoError(t, s.CreateJob(ctx, j))
		got, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, j, got)

		upd := *got
		upd.RouteStrategy = cluster.RouteRound
		upd.BlockStrategy = cluster.BlockDiscardLater
		upd.MisfirePolicy = cluster.MisfireDoNothing
		upd.MisfireMaxCatchUp = 0
		upd.RetryCount = 0
		upd.RetryIntervalSeconds = 0
		upd.AlarmEmails = nil
		upd.ChildJobIDs = []int64{9}
		upd.NodeUUID = ""
		require.NoError(t, s.UpdateJob(ctx, &upd))
		got, err = s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, &upd, got)
	})

	t.Run("FindJobs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		mk := func(name, group, handler, author string, enabled bool) *store.Job {
			j := newJob(name)
			j.Group, j.Handler, j.Author, j.Enabled = group, handler, author, enabled
			require.NoError(t, s.CreateJob(ctx, j))
			return j
		}
		a := mk("Nightly_Backup", "ops", "shell", "alice", true)
		b := mk("report 100%", "ops", "http", "bob", false)
		c := mk("cleanup", "web", "shell", "alice", true)
		d := mk("backup-web", "web", "cmd", "carol", true)
		// Touch a so that it is the most recently updated.
		require.NoError(t, s.UpdateJob(ctx, a))

		ids := func(f store.JobFilter) []int64 {
			t.Helper()
			jobs, total, err := s.FindJobs(ctx, f, store.Page{})
			require.NoError(t, err)
			require.Len(t, jobs, total)
			out := []int64{}
			for _, j := range jobs {
				out = append(out, j.ID)
			}
			return out
		}
		yes, no := true, false
		require.Equal(t, []int64{a.ID, b.ID, c.ID, d.ID}, ids(store.JobFilter{}))
		require.Equal(t, []int64{a.ID, b.ID}, ids(store.JobFilter{Group: "ops"}))
		require.Equal(t, []int64{b.ID}, ids(store.JobFilter{Enabled: &no}))
		require.Equal(t, []int64{a.ID, c.ID, d.ID}, ids(store.JobFilter{Enabled: &yes}))
		require.Equal(t, []int64{a.ID, c.ID}, ids(store.JobFilter{Handler: "shell"}))
		require.Equal(t, []int64{c.ID}, ids(store.JobFilter{Author: "alice", Group: "web"}))
		require.Equal(t, []int64{a.ID, d.ID}, ids(store.JobFilter{NameLike: "BACKUP"}), "name match is case-insensitive")
		require.Equal(t, []int64{b.ID}, ids(store.JobFilter{NameLike: "100%"}), "% is literal")
		require.Equal(t, []int64{a.ID}, ids(store.JobFilter{NameLike: "y_b"}), "_ is literal")
		require.Empty(t, ids(store.JobFilter{NameLike: "y%b"}))
		require.Equal(t, []int64{d.ID, c.ID, b.ID, a.ID}, ids(store.JobFilter{Sort: store.SortIDDesc}))
		require.Equal(t, []int64{a.ID, d.ID, c.ID, b.ID}, ids(store.JobFilter{Sort: store.SortNameAsc}))
		require.Equal(t, a.ID, ids(store.JobFilter{Sort: store.SortUpdatedAtDesc})[0])

		jobs, total, err := s.FindJobs(ctx, store.JobFilter{Handler: "shell"}, store.Page{Page: 2, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Len(t, jobs, 1)
		require.Equal(t, c.ID, jobs[0].ID)

		// Search: name or description.
		c.Description = "Removes OLD backups of 100% of hosts"
		require.NoError(t, s.UpdateJob(ctx, c))
		require.Equal(t, []int64{a.ID, c.ID, d.ID}, ids(store.JobFilter{Search: "backup"}), "name or description, case-insensitive")
		require.Equal(t, []int64{c.ID}, ids(store.JobFilter{Search: "old b"}))
		require.Equal(t, []int64{b.ID, c.ID}, ids(store.JobFilter{Search: "100%"}), "% is literal")
		require.Equal(t, []int64{a.ID, c.ID}, ids(store.JobFilter{Search: "backup", Handler: "shell"}))
		require.Empty(t, ids(store.JobFilter{Search: "100_"}), "_ is literal")

		_, _, err = s.FindJobs(ctx, store.JobFilter{Sort: "drop table"}, store.Page{})
		require.Error(t, err)
	})

	t.Run("FindJobsByScheduleTypeAndLastStatus", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		mk := func(name, scheduleType, schedule string) *store.Job {
			j := newJob(name)
			j.ScheduleType, j.Schedule = scheduleType, schedule
			require.NoError(t, s.CreateJob(ctx, j))
			return j
		}
		a := mk("a", "cron", "0/10 * * * * ?")
		b := mk("b", "fixed_rate", "30s")
		c := mk("c", "cron", "0 0 * * * ?")
		d := mk("d", "none", "")
		e := mk("e", "fixed_rate", "1m")

		base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		run := func(fire string, jobID int64, at time.Time, status string) store.Run {
			return store.Run{FireID: fire, JobID: jobID, Trigger: cluster.TriggerSchedule, Status: status, ScheduledAt: at}
		}
		// a: failed, then succeeded: its last status is success.
		// b: succeeded, then failed (inserted first but scheduled later).
		// c: one run still running.
		// d: never ran.
		// e: two shard runs of one fire: the later-inserted one decides.
		_, err := s.InsertRuns(ctx, []store.Run{
			run("b-2", b.ID, base.Add(2*time.Minute), cluster.StatusFailed),
			run("a-1", a.ID, base, cluster.StatusFailed),
			run("a-2", a.ID, base.Add(time.Minute), cluster.StatusSuccess),
			run("b-1", b.ID, base.Add(time.Minute), cluster.StatusSuccess),
			run("c-1", c.ID, base, cluster.StatusRunning),
			run("e-1#0", e.ID, base, cluster.StatusSuccess),
		})
		require.NoError(t, err)
		_, err = s.InsertRuns(ctx, []store.Run{run("e-1#1", e.ID, base, cluster.StatusTimeout)})
		require.NoError(t, err)

		ids := func(f store.JobFilter) []int64 {
			t.Helper()
			jobs, total, err := s.FindJobs(ctx, f, store.Page{})
			require.NoError(t, err)
			require.Len(t, jobs, total)
			out := []int64{}
			for _, j := range jobs {
				out = append(out, j.ID)
			}
			return out
		}
		require.Equal(t, []int64{a.ID, c.ID}, ids(store.JobFilter{ScheduleType: "cron"}))
		require.Equal(t, []int64{b.ID, e.ID}, ids(store.JobFilter{ScheduleType: "fixed_rate"}))
		require.Equal(t, []int64{d.ID}, ids(store.JobFilter{ScheduleType: "none"}))
		require.Empty(t, ids(store.JobFilter{ScheduleType: "once"}))

		require.Equal(t, []int64{a.ID}, ids(store.JobFilter{LastStatus: cluster.StatusSuccess}))
		require.Equal(t, []int64{b.ID}, ids(store.JobFilter{LastStatus: cluster.StatusFailed}), "the latest by scheduled time, not by insertion")
		require.Equal(t, []int64{c.ID}, ids(store.JobFilter{LastStatus: cluster.StatusRunning}))
		require.Equal(t, []int64{e.ID}, ids(store.JobFilter{LastStatus: cluster.StatusTimeout}), "ties on scheduled time break by run id")
		require.Equal(t, []int64{d.ID}, ids(store.JobFilter{LastStatus: store.LastStatusNone}))
		require.Empty(t, ids(store.JobFilter{LastStatus: cluster.StatusLost}))

		// The filter follows the runs: a's newest run fails.
		_, err = s.InsertRuns(ctx, []store.Run{run("a-3", a.ID, base.Add(3*time.Minute), cluster.StatusFailed)})
		require.NoError(t, err)
		require.Equal(t, []int64{a.ID, b.ID}, ids(store.JobFilter{LastStatus: cluster.StatusFailed}))
		require.Empty(t, ids(store.JobFilter{LastStatus: cluster.StatusSuccess}))

		// Combined with the other filters, sort and paging.
		require.Equal(t, []int64{b.ID, a.ID}, ids(store.JobFilter{LastStatus: cluster.StatusFailed, Sort: store.SortIDDesc}))
		require.Equal(t, []int64{a.ID}, ids(store.JobFilter{LastStatus: cluster.StatusFailed, ScheduleType: "cron"}))
		jobs, total, err := s.FindJobs(ctx, store.JobFilter{LastStatus: cluster.StatusFailed}, store.Page{Page: 2, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Len(t, jobs, 1)
		require.Equal(t, b.ID, jobs[0].ID)
	})

	t.Run("FindRunsAndRunFields", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		for i := range 6 {
			r := newRun(int64(1+i%2), base.Add(time.Duration(i)*time.Hour))
			r.Node = fmt.Sprintf("n%d", i%3)
			r.ShardIndex, r.ShardTotal = i%3, 3
			runs = append(runs, r)
		}
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)
		got, err := s.RunByFireID(ctx, runs[5].FireID)
		require.NoError(t, err)
		require.Equal(t, 2, got.ShardIndex)
		require.Equal(t, 3, got.ShardTotal)

		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			{FireID: runs[0].FireID, JobID: 1, Status: cluster.StatusFailed, ScheduledAt: runs[0].ScheduledAt, Attempt: 3},
			{FireID: runs[1].FireID, JobID: 2, Status: cluster.StatusRunning, ScheduledAt: runs[1].ScheduledAt, Attempt: 2},
		}))
		got, err = s.RunByFireID(ctx, runs[0].FireID)
		require.NoError(t, err)
		require.Equal(t, 3, got.Attempt)
		require.Equal(t, 0, got.ShardIndex, "a result keeps the shard position")
		require.Equal(t, 3, got.ShardTotal)
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			{FireID: runs[1].FireID, JobID: 2, Status: cluster.StatusSuccess, ScheduledAt: runs[1].ScheduledAt},
		}))
		got, err = s.RunByFireID(ctx, runs[1].FireID)
		require.NoError(t, err)
		require.Equal(t, 2, got.Attempt, "a report without attempt keeps the known one")

		fires := func(f store.RunFilter) []string {
			t.Helper()
			rs, total, err := s.FindRuns(ctx, f, store.Page{})
			require.NoError(t, err)
			require.Len(t, rs, total)
			out := []string{}
			for _, r := range rs {
				out = append(out, r.FireID)
			}
			return out
		}
		f := func(i ...int) []string {
			out := []string{}
			for _, x := range i {
				out = append(out, runs[x].FireID)
			}
			return out
		}
		require.Equal(t, f(5, 4, 3, 2, 1, 0), fires(store.RunFilter{}))
		require.Equal(t, f(4, 2, 0), fires(store.RunFilter{JobID: 1}))
		require.Equal(t, f(0), fires(store.RunFilter{Status: cluster.StatusFailed}))
		require.Equal(t, f(4, 1), fires(store.RunFilter{Node: "n1"}))
		require.Equal(t, f(3, 2), fires(store.RunFilter{From: base.Add(2 * time.Hour), To: base.Add(4 * time.Hour)}))
		require.Equal(t, f(4, 2), fires(store.RunFilter{JobID: 1, From: base.Add(time.Hour).In(time.FixedZone("x", 3600))}))
		require.Equal(t, f(5, 3), fires(store.RunFilter{JobID: 2, Status: cluster.StatusTriggered, To: base.Add(6 * time.Hour)}))
		require.Empty(t, fires(store.RunFilter{JobID: 99}))
	})

	t.Run("ApplyResultsFinished", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC)
		a, b, c := newRun(1, sched), newRun(1, sched.Add(time.Second)), newRun(2, sched)
		_, err := s.InsertRuns(ctx, []store.Run{a, b, c})
		require.NoError(t, err)
		res := func(r store.Run, status string) cluster.RunResult {
			return cluster.RunResult{FireID: r.FireID, JobID: r.JobID, Status: status, ScheduledAt: r.ScheduledAt}
		}
		unknown := cluster.RunResult{FireID: cluster.FireID(3, sched), JobID: 3, Status: cluster.StatusSuccess, ScheduledAt: sched}
		fin, err := s.ApplyResultsFinished(ctx, []cluster.RunResult{
			res(a, cluster.StatusRunning), res(a, cluster.StatusSuccess), res(b, cluster.StatusRunning),
			res(c, cluster.StatusFailed), unknown,
		})
		require.NoError(t, err)
		require.ElementsMatch(t, []store.Finished{
			{FireID: a.FireID, JobID: 1, Status: cluster.StatusSuccess},
			{FireID: c.FireID, JobID: 2, Status: cluster.StatusFailed},
			{FireID: unknown.FireID, JobID: 3, Status: cluster.StatusSuccess},
		}, fin)

		// Replays finish nothing again; b finishes once.
		fin, err = s.ApplyResultsFinished(ctx, []cluster.RunResult{
			res(a, cluster.StatusSuccess), res(c, cluster.StatusSuccess), unknown, res(b, cluster.StatusSuccess),
		})
		require.NoError(t, err)
		require.Equal(t, []store.Finished{{FireID: b.FireID, JobID: 1, Status: cluster.StatusSuccess}}, fin)

		// Racing duplicate reports: each run is reported finished exactly once.
		var runs []store.Run
		for i := range 50 {
			runs = append(runs, newRun(4, sched.Add(time.Duration(i)*time.Second)))
		}
		_, err = s.InsertRuns(ctx, runs[:25]) // the rest are unknown when reported
		require.NoError(t, err)
		batch := make([]cluster.RunResult, len(runs))
		for i, r := range runs {
			batch[i] = res(r, cluster.StatusSuccess)
		}
		var wg sync.WaitGroup
		got := make([][]store.Finished, 4)
		errs := make([]error, 4)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = s.ApplyResultsFinished(ctx, batch) })
		}
		wg.Wait()
		count := map[string]int{}
		for i := range got {
			require.NoError(t, errs[i])
			for _, f := range got[i] {
				count[f.FireID]++
			}
		}
		require.Len(t, count, len(runs))
		for fire, n := range count {
			require.Equal(t, 1, n, "fire %s reported finished %d times", fire, n)
		}
	})

	t.Run("GroupCRUD", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		g := &store.Group{AppName: "payments", Title: "Payments"}
		require.NoError(t, s.CreateGroup(ctx, g))
		require.NotZero(t, g.ID)
		require.Equal(t, store.AddressAuto, g.AddressType)
		got, err := s.GetGroup(ctx, g.ID)
		require.NoError(t, err)
		require.Equal(t, g, got)
		require.ErrorIs(t, s.CreateGroup(ctx, &store.Group{AppName: "payments"}), store.ErrConflict)

		m := &store.Group{AppName: "batch", Title: "Batch", AddressType: store.AddressManual, Addresses: []string{"n2", "n1"}}
		require.NoError(t, s.CreateGroup(ctx, m))
		got, err = s.GroupByName(ctx, "batch")
		require.NoError(t, err)
		require.Equal(t, m, got)

		upd := *m
		upd.Title, upd.AddressType, upd.Addresses = "Batch jobs", store.AddressAuto, nil
		upd.AppName = "batch-2"
		require.NoError(t, s.UpdateGroup(ctx, &upd))
		got, err = s.GetGroup(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, &upd, got)
		upd.AppName = "payments"
		require.ErrorIs(t, s.UpdateGroup(ctx, &upd), store.ErrConflict, "appname taken")
		require.ErrorIs(t, s.UpdateGroup(ctx, &store.Group{ID: m.ID + 1000, AppName: "x"}), store.ErrNotFound)

		groups, total, err := s.FindGroups(ctx, store.GroupFilter{Title: "BATCH"}, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "batch-2", groups[0].AppName)
		_, total, err = s.FindGroups(ctx, store.GroupFilter{AppName: "pay"}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)

		// A group with jobs can neither be deleted nor renamed.
		j := newJob("uses-payments")
		j.Group = "payments"
		require.NoError(t, s.CreateJob(ctx, j))
		require.ErrorIs(t, s.DeleteGroup(ctx, g.ID), store.ErrConflict)
		ren := *g
		ren.AppName = "payments-v2"
		require.ErrorIs(t, s.UpdateGroup(ctx, &ren), store.ErrConflict)
		ren.AppName, ren.Title = "payments", "Renamed title only"
		require.NoError(t, s.UpdateGroup(ctx, &ren))

		require.NoError(t, s.DeleteJob(ctx, j.ID))
		require.NoError(t, s.DeleteGroup(ctx, g.ID))
		_, err = s.GetGroup(ctx, g.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, s.DeleteGroup(ctx, g.ID), store.ErrNotFound)
	})
}
