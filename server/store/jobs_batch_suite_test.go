package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

// runJobBatchSuite covers creating jobs in batches; runSuite calls it on
// every dialect.
func runJobBatchSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("CreateJobsBy", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		var jobs []*store.Job
		for i := range 700 { // more than one chunk of version rows
			jobs = append(jobs, newJob(fmt.Sprintf("batch-%03d", i)))
		}
		require.NoError(t, s.CreateJobsBy(ctx, jobs, "alice"))
		seen := map[int64]bool{}
		for i, j := range jobs {
			require.NotZero(t, j.ID)
			require.False(t, seen[j.ID], "ids are distinct")
			seen[j.ID] = true
			require.EqualValues(t, 1, j.Revision)
			got, err := s.GetJob(ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("batch-%03d", i), got.Name)
			if i%100 == 0 {
				vs, n, err := s.ListJobVersions(ctx, j.ID, store.Page{})
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.Equal(t, "alice", vs[0].SavedBy)
				require.Equal(t, got.Name, vs[0].Name)
			}
		}
		byID, err := s.JobsByID(ctx, []int64{jobs[699].ID, jobs[0].ID, jobs[350].ID, -1})
		require.NoError(t, err)
		require.Len(t, byID, 3, "a missing id is left out")
		require.Equal(t, []int64{jobs[0].ID, jobs[350].ID, jobs[699].ID}, []int64{byID[0].ID, byID[1].ID, byID[2].ID})
	})

	t.Run("CreateJobsByAllOrNothing", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		require.NoError(t, s.CreateJob(ctx, newJob("taken")))
		_, before, err := s.FindJobs(ctx, store.JobFilter{}, store.Page{})
		require.NoError(t, err)
		jobs := []*store.Job{newJob("new-1"), newJob("new-2"), newJob("taken"), newJob("new-3")}
		err = s.CreateJobsBy(ctx, jobs, "")
		var be *store.JobBatchError
		require.ErrorAs(t, err, &be)
		require.Equal(t, 2, be.Index, "the job whose name is taken")
		require.ErrorIs(t, err, store.ErrConflict)
		_, after, err := s.FindJobs(ctx, store.JobFilter{}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, before, after, "no job of a failed batch is stored")

		err = s.CreateJobsBy(ctx, make([]*store.Job, store.MaxJobBatch+1), "")
		require.ErrorContains(t, err, "at most")
	})

	t.Run("WithGroups", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		groupNames := func() []string {
			groups, err := s.ListGroups(ctx)
			require.NoError(t, err)
			var names []string
			for _, g := range groups {
				names = append(names, g.AppName)
			}
			return names
		}
		in := func(name, group string) *store.Job {
			j := newJob(name)
			j.Group = group
			return j
		}
		// A job stored without its group, as before groups were kept:
		// its name is taken in "orphan", which has no group row.
		require.NoError(t, s.CreateJob(ctx, in("taken", "orphan")))
		_, err := s.EnsureGroup(ctx, "kept", "Kept title")
		require.NoError(t, err)

		// A failed batch, a failed create and a failed update create no group.
		err = s.CreateJobsWithGroupsBy(ctx, []*store.Job{in("a", "fresh-1"), in("b", "orphan"), in("taken", "orphan")}, "")
		var be *store.JobBatchError
		require.ErrorAs(t, err, &be)
		require.Equal(t, 2, be.Index)
		require.ErrorIs(t, err, store.ErrConflict)
		require.ErrorIs(t, s.CreateJobWithGroupBy(ctx, in("taken", "orphan"), ""), store.ErrConflict)
		other := in("other", "kept")
		require.NoError(t, s.CreateJobWithGroupBy(ctx, other, ""))
		moved := *other
		moved.Name, moved.Group = "taken", "orphan"
		require.ErrorIs(t, s.UpdateJobWithGroupBy(ctx, &moved, ""), store.ErrConflict)
		require.Equal(t, []string{"kept"}, groupNames(), "no group of a failed save")

		// Successful saves create the missing groups, titled by their
		// appname, and leave existing ones as they are.
		require.NoError(t, s.CreateJobsWithGroupsBy(ctx,
			[]*store.Job{in("a", "fresh-2"), in("b", "fresh-1"), in("c", "fresh-2"), in("d", "kept")}, "alice"))
		require.NoError(t, s.CreateJobWithGroupBy(ctx, in("e", "fresh-3"), ""))
		moved = *other
		moved.Group = "fresh-4"
		require.NoError(t, s.UpdateJobWithGroupBy(ctx, &moved, ""))
		require.Equal(t, []string{"fresh-1", "fresh-2", "fresh-3", "fresh-4", "kept"}, groupNames())
		g, err := s.GroupByName(ctx, "fresh-2")
		require.NoError(t, err)
		require.Equal(t, "fresh-2", g.Title)
		require.Equal(t, store.AddressAuto, g.AddressType)
		g, err = s.GroupByName(ctx, "kept")
		require.NoError(t, err)
		require.Equal(t, "Kept title", g.Title)

		// The plain methods still leave groups alone.
		require.NoError(t, s.CreateJobsBy(ctx, []*store.Job{in("f", "plain")}, ""))
		_, err = s.GroupByName(ctx, "plain")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("ForEnabledJobs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		want := 0
		for b := range 3 { // more than one page
			var jobs []*store.Job
			for i := range store.MaxJobBatch {
				j := newJob(fmt.Sprintf("walk-%d-%04d", b, i))
				j.Enabled = i%10 != 0
				if j.Enabled {
					want++
				}
				jobs = append(jobs, j)
			}
			require.NoError(t, s.CreateJobsBy(ctx, jobs, ""))
		}
		var got int
		var last int64
		require.NoError(t, s.ForEnabledJobs(ctx, func(j *store.Job) error {
			require.True(t, j.Enabled)
			require.Greater(t, j.ID, last, "id order, each once")
			require.Equal(t, "0/10 * * * * ?", j.Schedule)
			last = j.ID
			got++
			return nil
		}))
		require.Equal(t, want, got)
		revs, err := s.EnabledJobRevisions(ctx)
		require.NoError(t, err)
		require.Len(t, revs, want)
		require.EqualValues(t, 1, revs[0].Revision)
		require.Equal(t, "cron", revs[0].ScheduleType)
		require.Less(t, revs[0].ID, revs[1].ID)
		stop := errors.New("stop")
		calls := 0
		require.ErrorIs(t, s.ForEnabledJobs(ctx, func(*store.Job) error { calls++; return stop }), stop)
		require.Equal(t, 1, calls)
		// A context ended during the walk (the next window is read ahead)
		// ends it with the context's error, before the last window.
		cctx, cancel := context.WithCancel(ctx)
		calls = 0
		require.ErrorIs(t, s.ForEnabledJobs(cctx, func(*store.Job) error {
			calls++
			cancel()
			return nil
		}), context.Canceled)
		require.Less(t, calls, want)
	})

	t.Run("InsertAudits", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		var es []*store.AuditEntry
		for i := range 600 {
			es = append(es, &store.AuditEntry{Username: "alice", Action: "create", ObjectType: "job",
				ObjectID: fmt.Sprint(i + 1), Diff: []byte(`{"name":"x"}`)})
		}
		require.NoError(t, s.InsertAudits(ctx, es))
		got, total, err := s.FindAudit(ctx, store.AuditFilter{Username: "alice", ObjectType: "job"}, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 600, total)
		require.Equal(t, "create", got[0].Action)
		require.JSONEq(t, `{"name":"x"}`, string(got[0].Diff))
	})
}
