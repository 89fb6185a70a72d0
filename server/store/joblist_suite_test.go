package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

// runJobListSuite covers the jobs list's pages and totals: every page of
// every order is the same slice of the whole list, and a total follows
// writes made through another Store on the same database (on SQLite the
// store keeps totals between writes). runSuite calls it on every dialect.
func runJobListSuite(t *testing.T, newDSN func(t *testing.T) string) {
	t.Run("JobPagesInEveryOrder", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := openDSN(t, newDSN(t))
		for i, name := range []string{"delta", "alpha", "echo", "charlie", "bravo", "golf", "foxtrot"} {
			j := newJob(name)
			j.Group = []string{"ops", "web"}[i%2]
			require.NoError(t, s.CreateJob(ctx, j))
		}
		for _, sort := range store.JobSorts {
			for _, f := range []store.JobFilter{{Sort: sort}, {Sort: sort, Group: "ops"}, {Sort: sort, Search: "a"}} {
				requirePages(t, s, f)
			}
		}
		// The same with a page anchor every 2 jobs (on SQLite: pages past
		// the first anchors start from one).
		s.SetAnchorEvery(2)
		for _, sort := range store.JobSorts {
			for _, f := range []store.JobFilter{{Sort: sort}, {Sort: sort, Group: "ops"}, {Sort: sort, Search: "a"}} {
				requirePages(t, s, f)
			}
		}
	})

	t.Run("JobTotalsFollowAnotherWriter", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		dsn := newDSN(t)
		reader, writer := openDSN(t, dsn), openDSN(t, dsn)
		reader.SetAnchorEvery(2)
		total := func(f store.JobFilter) int {
			t.Helper()
			// The pages in id order, from anchors on SQLite, are slices
			// of the whole list as it is now.
			requirePages(t, reader, store.JobFilter{})
			requirePages(t, reader, store.JobFilter{Sort: store.SortIDDesc})
			_, n, err := reader.FindJobs(ctx, f, store.Page{Page: 1, PageSize: 2})
			require.NoError(t, err)
			return n
		}
		ops := store.JobFilter{Group: "ops"}
		orphans := store.JobFilter{Group: "orphans"}
		require.Equal(t, 0, total(ops))

		// Inserts, one and in a batch.
		j := newJob("one")
		j.Group = "ops"
		require.NoError(t, writer.CreateJob(ctx, j))
		require.Equal(t, 1, total(ops))
		batch := make([]*store.Job, 3)
		for i := range batch {
			batch[i] = newJob(fmt.Sprintf("batch-%d", i))
			batch[i].Group = "orphans"
		}
		require.NoError(t, writer.CreateJobsBy(ctx, batch, "alice"))
		require.Equal(t, 3, total(orphans))
		require.Equal(t, 4, total(store.JobFilter{}))

		// An update that moves a job between groups, and one that turns it off.
		batch[0].Group = "ops"
		require.NoError(t, writer.UpdateJob(ctx, batch[0]))
		require.Equal(t, 2, total(ops))
		require.Equal(t, 2, total(orphans))
		off := false
		require.Equal(t, 0, total(store.JobFilter{Group: "ops", Enabled: &off}))
		j.Enabled = false
		require.NoError(t, writer.UpdateJob(ctx, j))
		require.Equal(t, 1, total(store.JobFilter{Group: "ops", Enabled: &off}))

		// A delete.
		require.NoError(t, writer.DeleteJob(ctx, j.ID))
		require.Equal(t, 1, total(ops))

		// A scope names groups by id: a group created, then renamed to the
		// appname the orphans' jobs use, changes what it selects.
		g := &store.Group{AppName: "empty", Title: "empty"}
		require.NoError(t, writer.CreateGroup(ctx, g))
		scoped := store.JobFilter{Scope: &store.Scope{GroupIDs: []int64{g.ID}}}
		require.Equal(t, 0, total(scoped))
		g.AppName = "orphans"
		require.NoError(t, writer.UpdateGroup(ctx, g))
		require.Equal(t, 2, total(scoped))
	})
}

// requirePages checks that every page of f, in pages of 1 to 3 jobs,
// carries the whole list's total and that the pages together are the whole
// list in order.
func requirePages(t *testing.T, s *store.Store, f store.JobFilter) {
	t.Helper()
	ctx := testCtx(t)
	all, total, err := s.FindJobs(ctx, f, store.Page{})
	require.NoError(t, err)
	require.Len(t, all, total)
	for size := 1; size <= 3; size++ {
		var paged []store.Job
		for page := 1; ; page++ {
			got, n, err := s.FindJobs(ctx, f, store.Page{Page: page, PageSize: size})
			require.NoError(t, err)
			require.Equal(t, total, n, "%+v page %d of %d", f, page, size)
			if len(got) == 0 {
				break
			}
			require.LessOrEqual(t, len(got), size)
			paged = append(paged, got...)
		}
		require.Equal(t, names(all), names(paged), "%+v in pages of %d", f, size)
	}
}

func names(jobs []store.Job) []string {
	out := make([]string, len(jobs))
	for i := range jobs {
		out[i] = jobs[i].Name
	}
	return out
}
