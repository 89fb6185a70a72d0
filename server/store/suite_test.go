package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
	schema "github.com/cronix/cronix/sql"
)

// runSuite is the store's conformance suite. newDSN returns the DSN of a
// fresh, empty database for one test (and arranges its removal); every
// subtest gets its own.
func runSuite(t *testing.T, newDSN func(t *testing.T) string) {
	open := func(t *testing.T) *store.Store {
		t.Helper()
		return openDSN(t, newDSN(t))
	}
	runModelSuite(t, open)
	runVersionSuite(t, newDSN)
	runNameSuite(t, newDSN)
	runRecoverySuite(t, open)
	runAlertSuite(t, open)
	runSecuritySuite(t, open)
	runReportSuite(t, open)
	runJobBatchSuite(t, open)
	runSummarySuite(t, open)
	runChildSuite(t, open)
	runJobListSuite(t, newDSN)
	runMigrationRerunSuite(t, newDSN)

	t.Run("Migrations", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		dsn := newDSN(t)
		want := migrationVersions(t, openDSN(t, dsn).Dialect())

		// Two processes starting at once on an empty database.
		var wg sync.WaitGroup
		stores := make([]*store.Store, 2)
		errs := make([]error, 2)
		for i := range stores {
			wg.Go(func() { stores[i], errs[i] = store.Open(ctx, dsn) })
		}
		wg.Wait()
		for i := range stores {
			require.NoError(t, errs[i])
			t.Cleanup(func() { _ = stores[i].Close() })
		}

		s := stores[0]
		require.NoError(t, s.CreateUser(ctx, &store.User{Username: "alice", PasswordHash: "h", Role: store.RoleAdmin}))
		got, err := s.AppliedMigrations(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)

		// Re-opening is a no-op: nothing re-applied, data kept.
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		s2 := openDSN(t, dsn)
		got, err = s2.AppliedMigrations(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)
		n, err := s2.CountUsers(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})

	t.Run("Users", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)

		n, err := s.CountUsers(ctx)
		require.NoError(t, err)
		require.Zero(t, n)

		before := time.Now().Add(-time.Second)
		u := &store.User{Username: "alice", PasswordHash: "$2a$hash", Role: store.RoleAdmin}
		require.NoError(t, s.CreateUser(ctx, u))
		require.NotZero(t, u.ID)
		require.True(t, u.CreatedAt.After(before), "CreatedAt set")
		require.Equal(t, time.UTC, u.CreatedAt.Location())
		require.Equal(t, u.CreatedAt, u.UpdatedAt)

		got, err := s.UserByName(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, u, got)

		err = s.CreateUser(ctx, &store.User{Username: "alice", PasswordHash: "x", Role: store.RoleViewer})
		require.ErrorIs(t, err, store.ErrConflict)

		bob := &store.User{Username: "bob", PasswordHash: "x"}
		require.NoError(t, s.CreateUser(ctx, bob))
		require.Equal(t, store.RoleViewer, bob.Role, "role defaults to viewer")
		require.Greater(t, bob.ID, u.ID)

		_, err = s.UserByName(ctx, "carol")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = s.UserByName(ctx, "ALICE")
		require.ErrorIs(t, err, store.ErrNotFound, "user names are case-sensitive on every dialect")

		n, err = s.CountUsers(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})

	t.Run("Access", func(t *testing.T) {
		t.Parallel()
		runAccessSuite(t, open)
	})

	t.Run("Groups", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)

		groups, err := s.ListGroups(ctx)
		require.NoError(t, err)
		require.Empty(t, groups)

		g, err := s.EnsureGroup(ctx, "payments", "Payments")
		require.NoError(t, err)
		require.NotZero(t, g.ID)
		require.Equal(t, "payments", g.AppName)
		require.Equal(t, "Payments", g.Title)

		again, err := s.EnsureGroup(ctx, "payments", "Other title")
		require.NoError(t, err)
		require.Equal(t, g, again, "an existing group is returned unchanged")

		// Racing creators all get the one group.
		var wg sync.WaitGroup
		ids := make([]int64, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Go(func() {
				g, err := s.EnsureGroup(ctx, "billing", "Billing")
				errs[i] = err
				if err == nil {
					ids[i] = g.ID
				}
			})
		}
		wg.Wait()
		for i := range ids {
			require.NoError(t, errs[i])
			require.Equal(t, ids[0], ids[i])
		}

		_, err = s.EnsureGroup(ctx, "accounts", "")
		require.NoError(t, err)
		groups, err = s.ListGroups(ctx)
		require.NoError(t, err)
		var names []string
		for _, g := range groups {
			names = append(names, g.AppName)
		}
		require.Equal(t, []string{"accounts", "billing", "payments"}, names)
	})

	t.Run("Jobs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)

		j := newJob("backup")
		j.Params = nil
		require.NoError(t, s.CreateJob(ctx, j))
		require.NotZero(t, j.ID)
		require.EqualValues(t, 1, j.Revision)
		require.False(t, j.CreatedAt.IsZero())
		require.JSONEq(t, "{}", string(j.Params), "nil params are stored as {}")

		got, err := s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, j, got)

		_, err = s.GetJob(ctx, j.ID+1000)
		require.ErrorIs(t, err, store.ErrNotFound)

		// Update overwrites every field and bumps the revision.
		upd := *got
		upd.Name = "backup-v2"
		upd.Group = "ops"
		upd.Schedule = "0 */5 * * * ?"
		upd.Timezone = "Asia/Shanghai"
		upd.Handler = "http"
		upd.Params = json.RawMessage(`{"url":"http://x/'quoted'\\path"}`)
		upd.TimeoutSeconds = 90
		upd.Enabled = false
		upd.Description = "it's the \"new\" one"
		upd.Author = "bob"
		upd.Revision = 99           // ignored: the store counts revisions
		upd.CreatedAt = time.Time{} // ignored: written back from the row
		require.NoError(t, s.UpdateJob(ctx, &upd))
		require.EqualValues(t, 2, upd.Revision)
		require.Equal(t, j.CreatedAt, upd.CreatedAt)
		require.False(t, upd.UpdatedAt.Before(j.UpdatedAt))

		got, err = s.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, &upd, got)

		require.NoError(t, s.UpdateJob(ctx, &upd))
		require.EqualValues(t, 3, upd.Revision)

		missing := newJob("ghost")
		missing.ID = j.ID + 1000
		require.ErrorIs(t, s.UpdateJob(ctx, missing), store.ErrNotFound)

		require.NoError(t, s.DeleteJob(ctx, j.ID))
		_, err = s.GetJob(ctx, j.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.ErrorIs(t, s.DeleteJob(ctx, j.ID), store.ErrNotFound)
	})

	t.Run("ListJobs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)

		jobs, total, err := s.ListJobs(ctx, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, jobs)

		var ids []int64
		for i := range 7 {
			j := newJob(fmt.Sprintf("job-%d", i))
			j.Enabled = i%2 == 0
			require.NoError(t, s.CreateJob(ctx, j))
			ids = append(ids, j.ID)
		}
		var seen []int64
		for page, want := range []int{3, 3, 1, 0} {
			jobs, total, err := s.ListJobs(ctx, store.Page{Page: page + 1, PageSize: 3})
			require.NoError(t, err)
			require.Equal(t, 7, total)
			require.Len(t, jobs, want, "page %d", page+1)
			for _, j := range jobs {
				seen = append(seen, j.ID)
			}
		}
		require.Equal(t, ids, seen, "ordered by id, no row twice")

		all, total, err := s.ListJobs(ctx, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 7, total)
		require.Len(t, all, 7, "PageSize 0 lists every job")

		enabled, err := s.EnabledJobs(ctx)
		require.NoError(t, err)
		require.Len(t, enabled, 4)
		for i, j := range enabled {
			require.True(t, j.Enabled)
			require.Equal(t, ids[2*i], j.ID)
		}
	})

	t.Run("DeleteJobRemovesRuns", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		keep, drop := newJob("keep"), newJob("drop")
		require.NoError(t, s.CreateJob(ctx, keep))
		require.NoError(t, s.CreateJob(ctx, drop))
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		for i := range 5 {
			runs = append(runs, newRun(keep.ID, base.Add(time.Duration(i)*time.Minute)))
			runs = append(runs, newRun(drop.ID, base.Add(time.Duration(i)*time.Minute)))
		}
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)

		require.NoError(t, s.DeleteJob(ctx, drop.ID))
		_, total, err := s.ListRuns(ctx, drop.ID, store.Page{})
		require.NoError(t, err)
		require.Zero(t, total)
		_, err = s.RunByFireID(ctx, cluster.FireID(drop.ID, base))
		require.ErrorIs(t, err, store.ErrNotFound)
		_, total, err = s.ListRuns(ctx, keep.ID, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 5, total)
	})

	t.Run("InsertRunsIdempotent", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)

		inserted, err := s.InsertRuns(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, inserted)

		base := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
		dispatched := base.Add(3 * time.Millisecond)
		a, b := newRun(1, base), newRun(1, base.Add(time.Second))
		a.DispatchedAt = &dispatched
		a.Node = "node-a"
		inserted, err = s.InsertRuns(ctx, []store.Run{a, b, a})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a.FireID, b.FireID}, inserted, "a fire id repeated in a batch is inserted once")

		got, err := s.RunByFireID(ctx, a.FireID)
		require.NoError(t, err)
		require.NotZero(t, got.ID)
		require.Equal(t, a.FireID, got.FireID)
		require.EqualValues(t, 1, got.JobID)
		require.Equal(t, cluster.TriggerSchedule, got.Trigger)
		require.Equal(t, cluster.StatusTriggered, got.Status)
		require.Equal(t, "node-a", got.Node)
		requireTime(t, base, got.ScheduledAt)
		requireTimePtr(t, dispatched, got.DispatchedAt)
		require.Nil(t, got.StartedAt)
		require.Nil(t, got.FinishedAt)
		require.Nil(t, got.ExitCode)
		require.False(t, got.CreatedAt.IsZero())

		byID, err := s.GetRun(ctx, got.ID)
		require.NoError(t, err)
		require.Equal(t, got, byID)
		_, err = s.GetRun(ctx, got.ID+100000)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = s.RunByFireID(ctx, "1-404")
		require.ErrorIs(t, err, store.ErrNotFound)

		// Replaying the batch (a new leader re-fires) changes nothing.
		c := newRun(1, base.Add(2*time.Second))
		replay := a
		replay.Status = cluster.StatusSkipped
		replay.Node = "node-b"
		inserted, err = s.InsertRuns(ctx, []store.Run{replay, b, c})
		require.NoError(t, err)
		require.Equal(t, []string{c.FireID}, inserted)
		again, err := s.RunByFireID(ctx, a.FireID)
		require.NoError(t, err)
		require.Equal(t, got, again)

		inserted, err = s.InsertRuns(ctx, []store.Run{a, b, c})
		require.NoError(t, err)
		require.Empty(t, inserted)

		_, err = s.InsertRuns(ctx, []store.Run{{JobID: 1, Status: cluster.StatusTriggered}})
		require.Error(t, err, "a run needs a fire id")

		d := newRun(1, base.Add(3*time.Second))
		d.Status, d.Trigger = "", ""
		inserted, err = s.InsertRuns(ctx, []store.Run{d})
		require.NoError(t, err)
		require.Equal(t, []string{d.FireID}, inserted)
		got, err = s.RunByFireID(ctx, d.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusTriggered, got.Status, "status defaults to triggered")
		require.Equal(t, cluster.TriggerSchedule, got.Trigger, "trigger defaults to schedule")
	})

	t.Run("RunningThenSuccess", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2030, 2, 3, 4, 5, 6, 0, time.UTC)
		run := newRun(7, sched)
		_, err := s.InsertRuns(ctx, []store.Run{run})
		require.NoError(t, err)

		started := sched.Add(20 * time.Millisecond)
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{
			FireID: run.FireID, JobID: 7, Trigger: cluster.TriggerSchedule, Node: "n1",
			Status: cluster.StatusRunning, ScheduledAt: sched, StartedAt: &started,
		}}))
		got, err := s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusRunning, got.Status)
		require.Equal(t, "n1", got.Node)
		requireTimePtr(t, started, got.StartedAt)
		require.Nil(t, got.FinishedAt)

		// A stray "triggered" report does not move the run back.
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{
			FireID: run.FireID, JobID: 7, Status: cluster.StatusTriggered, ScheduledAt: sched,
		}}))
		got, err = s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusRunning, got.Status)

		finished := started.Add(1500 * time.Millisecond)
		zero := 0
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{
			FireID: run.FireID, JobID: 7, Trigger: cluster.TriggerSchedule, Node: "",
			Status: cluster.StatusSuccess, ScheduledAt: sched, FinishedAt: &finished,
			ExitCode: &zero, Output: "done\n", Message: "ok",
		}}))
		got, err = s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusSuccess, got.Status)
		require.Equal(t, "n1", got.Node, "a blank node keeps the known one")
		requireTimePtr(t, started, got.StartedAt)
		requireTimePtr(t, finished, got.FinishedAt)
		require.Equal(t, &zero, got.ExitCode)
		require.Equal(t, "done\n", got.Output)
		require.Equal(t, "ok", got.Message)
		require.False(t, got.UpdatedAt.Before(got.CreatedAt))
	})

	t.Run("TerminalNotOverwritten", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2030, 2, 3, 4, 5, 6, 0, time.UTC)
		run := newRun(8, sched)
		_, err := s.InsertRuns(ctx, []store.Run{run})
		require.NoError(t, err)

		one := 1
		failed := cluster.RunResult{
			FireID: run.FireID, JobID: 8, Node: "n1", Status: cluster.StatusFailed,
			ScheduledAt: sched, ExitCode: &one, Output: "boom", Message: "exit 1",
		}
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{failed}))
		want, err := s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusFailed, want.Status)

		zero := 0
		started := sched.Add(time.Second)
		for _, late := range []cluster.RunResult{
			{FireID: run.FireID, JobID: 8, Node: "n2", Status: cluster.StatusRunning, ScheduledAt: sched, StartedAt: &started},
			{FireID: run.FireID, JobID: 8, Node: "n2", Status: cluster.StatusSuccess, ScheduledAt: sched, ExitCode: &zero, Output: "fine"},
			{FireID: run.FireID, JobID: 8, Node: "n2", Status: cluster.StatusLost, ScheduledAt: sched, Message: "lease expired"},
			failed, // a duplicate report
		} {
			require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{late}))
			got, err := s.RunByFireID(ctx, run.FireID)
			require.NoError(t, err)
			require.Equal(t, want, got, "after a late %s report", late.Status)
		}

		// InsertRuns of the same fire leaves it alone too.
		inserted, err := s.InsertRuns(ctx, []store.Run{run})
		require.NoError(t, err)
		require.Empty(t, inserted)
		got, err := s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})

	t.Run("ResultBeforeInsert", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
		fire := cluster.FireID(42, sched)
		finished := sched.Add(time.Second)
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{
			FireID: fire, Trigger: cluster.TriggerManual, Node: "n1",
			Status: cluster.StatusSuccess, ScheduledAt: sched, FinishedAt: &finished, Output: "early",
		}}))
		got, err := s.RunByFireID(ctx, fire)
		require.NoError(t, err)
		require.EqualValues(t, 42, got.JobID, "job id taken from the fire id when the report has none")
		require.Equal(t, cluster.TriggerManual, got.Trigger)
		require.Equal(t, cluster.StatusSuccess, got.Status)
		require.Equal(t, "early", got.Output)
		requireTime(t, sched, got.ScheduledAt)

		// The leader's insert arriving later does not claim or change it.
		run := newRun(42, sched)
		inserted, err := s.InsertRuns(ctx, []store.Run{run})
		require.NoError(t, err)
		require.Empty(t, inserted)
		again, err := s.RunByFireID(ctx, fire)
		require.NoError(t, err)
		require.Equal(t, got, again)

		// A running report for an unknown fire inserts it as running.
		other := cluster.FireID(42, sched.Add(time.Minute))
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{
			FireID: other, JobID: 42, Node: "n1", Status: cluster.StatusRunning, ScheduledAt: sched.Add(time.Minute),
		}}))
		got, err = s.RunByFireID(ctx, other)
		require.NoError(t, err)
		require.Equal(t, cluster.StatusRunning, got.Status)
	})

	t.Run("ResultsDeduplicatedInBatch", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2030, 4, 1, 0, 0, 0, 0, time.UTC)
		f1, f2, f3 := cluster.FireID(5, sched), cluster.FireID(5, sched.Add(time.Second)), cluster.FireID(5, sched.Add(2*time.Second))
		res := func(fire, status, out string) cluster.RunResult {
			return cluster.RunResult{FireID: fire, JobID: 5, Status: status, ScheduledAt: sched, Output: out}
		}
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			res(f1, cluster.StatusRunning, "r1"), res(f1, cluster.StatusSuccess, "s1"), res(f1, cluster.StatusRunning, "r2"),
			res(f2, cluster.StatusTimeout, "t2"), res(f2, cluster.StatusSuccess, "s2"),
			res(f3, cluster.StatusRunning, "a"), res(f3, cluster.StatusRunning, "b"),
		}))
		for fire, want := range map[string][2]string{
			f1: {cluster.StatusSuccess, "s1"},
			f2: {cluster.StatusTimeout, "t2"},
			f3: {cluster.StatusRunning, "b"},
		} {
			got, err := s.RunByFireID(ctx, fire)
			require.NoError(t, err)
			require.Equal(t, want[0], got.Status, fire)
			require.Equal(t, want[1], got.Output, fire)
		}
		require.Error(t, s.ApplyResults(ctx, []cluster.RunResult{{FireID: f1}}), "a result needs a status")
	})

	t.Run("ListRuns", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		base := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
		var runs []store.Run
		for i := range 9 {
			runs = append(runs, newRun(3, base.Add(time.Duration(i%3)*time.Hour+time.Duration(i)*time.Millisecond)))
		}
		// Two runs of one instant (two targets): ordered by id.
		tie1, tie2 := newRun(3, base.Add(10*time.Hour)), newRun(3, base.Add(10*time.Hour))
		tie1.FireID, tie2.FireID = tie1.FireID+"-0", tie2.FireID+"-1"
		runs = append(runs, tie1, tie2, newRun(4, base))
		_, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)

		all, total, err := s.ListRuns(ctx, 3, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 11, total)
		require.Len(t, all, 11)
		for i := 1; i < len(all); i++ {
			prev, cur := all[i-1], all[i]
			require.False(t, cur.ScheduledAt.After(prev.ScheduledAt), "newest scheduled first")
			if cur.ScheduledAt.Equal(prev.ScheduledAt) {
				require.Less(t, cur.ID, prev.ID, "ties by id, newest first")
			}
		}
		require.Equal(t, []string{tie2.FireID, tie1.FireID}, []string{all[0].FireID, all[1].FireID})

		var paged []store.Run
		for page := 1; page <= 3; page++ {
			runs, total, err := s.ListRuns(ctx, 3, store.Page{Page: page, PageSize: 4})
			require.NoError(t, err)
			require.Equal(t, 11, total)
			paged = append(paged, runs...)
		}
		require.Equal(t, all, paged)

		none, total, err := s.ListRuns(ctx, 99, store.Page{Page: 1, PageSize: 4})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, none)
	})

	t.Run("LargeBatches", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		const n = 3000
		big := map[int]string{
			10:   bigOutput(store.MaxOutputBytes, 'a'),
			1500: bigOutput(store.MaxOutputBytes, 'b'),
			2999: bigOutput(store.MaxOutputBytes, 'c'),
		}
		base := time.Date(2030, 7, 1, 0, 0, 0, 0, time.UTC)
		runs := make([]store.Run, n)
		for i := range runs {
			runs[i] = newRun(int64(1+i%3), base.Add(time.Duration(i)*time.Millisecond))
			runs[i].Output = big[i]
		}
		inserted, err := s.InsertRuns(ctx, runs)
		require.NoError(t, err)
		require.Len(t, inserted, n)
		for i, out := range big {
			got, err := s.RunByFireID(ctx, runs[i].FireID)
			require.NoError(t, err)
			require.Equal(t, len(out), len(got.Output))
			require.True(t, out == got.Output, "1 MiB output of run %d stored intact", i)
			require.False(t, got.OutputTruncated)
		}

		results := make([]cluster.RunResult, n)
		zero := 0
		for i := range results {
			results[i] = cluster.RunResult{
				FireID: runs[i].FireID, JobID: runs[i].JobID, Trigger: cluster.TriggerSchedule, Node: "n1",
				Status: cluster.StatusSuccess, ScheduledAt: runs[i].ScheduledAt, ExitCode: &zero,
				Output: strings.ToUpper(big[i]),
			}
		}
		require.NoError(t, s.ApplyResults(ctx, results))
		for _, i := range []int{0, 10, 1500, 2998, 2999} {
			got, err := s.RunByFireID(ctx, runs[i].FireID)
			require.NoError(t, err)
			require.Equal(t, cluster.StatusSuccess, got.Status)
			require.True(t, results[i].Output == got.Output, "output of run %d", i)
		}
		for job := int64(1); job <= 3; job++ {
			_, total, err := s.ListRuns(ctx, job, store.Page{Page: 1, PageSize: 1})
			require.NoError(t, err)
			require.Equal(t, n/3, total)
		}
		require.NoError(t, s.ApplyResults(ctx, results), "replaying the whole batch is harmless")
	})

	t.Run("OutputCleaned", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		sched := time.Date(2030, 8, 1, 0, 0, 0, 0, time.UTC)
		long := strings.Repeat("é", store.MaxOutputBytes) // 2 bytes each
		weird := "nul\x00byte, bad utf-8 \xff\xfe, quote ' and backslash \\ and 中文"
		require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{
			{FireID: "9-1", JobID: 9, Status: cluster.StatusFailed, ScheduledAt: sched, Output: long},
			{FireID: "9-2", JobID: 9, Status: cluster.StatusFailed, ScheduledAt: sched, Output: weird, Message: weird},
		}))
		got, err := s.RunByFireID(ctx, "9-1")
		require.NoError(t, err)
		require.True(t, got.OutputTruncated)
		require.LessOrEqual(t, len(got.Output), store.MaxOutputBytes)
		require.Greater(t, len(got.Output), store.MaxOutputBytes-4)
		require.True(t, strings.Trim(got.Output, "é") == "", "cut on a character boundary")

		got, err = s.RunByFireID(ctx, "9-2")
		require.NoError(t, err)
		want := "nul\uFFFDbyte, bad utf-8 \uFFFD, quote ' and backslash \\ and 中文"
		require.Equal(t, want, got.Output)
		require.Equal(t, want, got.Message)
		require.False(t, got.OutputTruncated)
	})

	t.Run("TimesAreUTC", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		shanghai := time.FixedZone("CST", 8*3600)
		sched := time.Date(2030, 12, 31, 23, 59, 59, 123456789, shanghai)
		run := newRun(11, sched)
		_, err := s.InsertRuns(ctx, []store.Run{run})
		require.NoError(t, err)
		got, err := s.RunByFireID(ctx, run.FireID)
		require.NoError(t, err)
		require.Equal(t, time.UTC, got.ScheduledAt.Location())
		require.True(t, got.ScheduledAt.Equal(sched.Truncate(time.Microsecond)), "got %s", got.ScheduledAt)
	})

	t.Run("ConcurrentWriters", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		base := time.Date(2030, 9, 1, 0, 0, 0, 0, time.UTC)
		mk := func(from, to int) []store.Run {
			var runs []store.Run
			for i := from; i < to; i++ {
				runs = append(runs, newRun(1, base.Add(time.Duration(i)*time.Second)))
			}
			return runs
		}
		for round := range 3 {
			off := round * 10000
			// Overlapping batches, listed in opposite orders.
			a, b := mk(off, off+1500), mk(off+500, off+2000)
			for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
			var wg sync.WaitGroup
			var insA, insB []string
			var errA, errB error
			wg.Go(func() { insA, errA = s.InsertRuns(ctx, a) })
			wg.Go(func() { insB, errB = s.InsertRuns(ctx, b) })
			wg.Wait()
			require.NoError(t, errA)
			require.NoError(t, errB)
			union := make(map[string]int)
			for _, f := range append(insA, insB...) {
				union[f]++
			}
			require.Len(t, union, 2000, "every fire inserted")
			for f, c := range union {
				require.Equal(t, 1, c, "fire %s claimed by both writers", f)
			}

			// Overlapping result batches: one reports success, the other running.
			res := func(runs []store.Run, status string) []cluster.RunResult {
				out := make([]cluster.RunResult, len(runs))
				for i, r := range runs {
					out[i] = cluster.RunResult{FireID: r.FireID, JobID: 1, Status: status, ScheduledAt: r.ScheduledAt, Node: "n"}
				}
				return out
			}
			wg.Go(func() { errA = s.ApplyResults(ctx, res(a, cluster.StatusSuccess)) })
			wg.Go(func() { errB = s.ApplyResults(ctx, res(b, cluster.StatusRunning)) })
			wg.Wait()
			require.NoError(t, errA)
			require.NoError(t, errB)
			for _, r := range a {
				if r.FireID != a[0].FireID && r.FireID != a[len(a)-1].FireID {
					continue
				}
				got, err := s.RunByFireID(ctx, r.FireID)
				require.NoError(t, err)
				require.Equal(t, cluster.StatusSuccess, got.Status)
			}
		}
		_, total, err := s.ListRuns(ctx, 1, store.Page{Page: 1, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, 6000, total)
		// Every fire of batch a ends successful whatever the interleaving:
		// success is terminal and running never overwrites it.
		runs, _, err := s.ListRuns(ctx, 1, store.Page{})
		require.NoError(t, err)
		for _, r := range runs {
			i := int(r.ScheduledAt.Sub(base)/time.Second) % 10000
			if i < 1500 {
				require.Equal(t, cluster.StatusSuccess, r.Status, r.FireID)
			} else {
				require.Equal(t, cluster.StatusRunning, r.Status, r.FireID)
			}
		}
	})
}

func openDSN(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(testCtx(t), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func migrationVersions(t *testing.T, dialect string) []int64 {
	migs, err := schema.Load(dialect)
	require.NoError(t, err)
	var v []int64
	for _, m := range migs {
		v = append(v, m.Version)
	}
	return v
}

func newJob(name string) *store.Job {
	return &store.Job{
		Name:           name,
		Group:          "default",
		ScheduleType:   "cron",
		Schedule:       "0/10 * * * * ?",
		Timezone:       "UTC",
		Handler:        "shell",
		Params:         json.RawMessage(`{"script":"echo hi"}`),
		TimeoutSeconds: 30,
		Enabled:        true,
		Description:    "a job",
		Author:         "alice",
	}
}

func newRun(jobID int64, scheduled time.Time) store.Run {
	return store.Run{
		FireID:      cluster.FireID(jobID, scheduled),
		JobID:       jobID,
		Trigger:     cluster.TriggerSchedule,
		Status:      cluster.StatusTriggered,
		ScheduledAt: scheduled,
	}
}

// bigOutput is n bytes of text with the characters SQL escaping cares about.
func bigOutput(n int, fill byte) string {
	if n == 0 {
		return ""
	}
	b := []byte(strings.Repeat(string(fill)+"'\\\"\n", n/5+1))[:n]
	return string(b)
}

func requireTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.True(t, want.Equal(got), "want %s, got %s", want, got)
	require.Equal(t, time.UTC, got.Location())
}

func requireTimePtr(t *testing.T, want time.Time, got *time.Time) {
	t.Helper()
	require.NotNil(t, got, "want %s, got nil", want)
	requireTime(t, want, *got)
}
