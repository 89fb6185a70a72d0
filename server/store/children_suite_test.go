package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

func runChildSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("ChildJobIDs", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		a, b, c := newJob("child-a"), newJob("child-b"), newJob("child-c")
		for _, j := range []*store.Job{a, b, c} {
			require.NoError(t, s.CreateJob(ctx, j))
		}
		parent := newJob("parent")
		parent.ChildJobIDs = []int64{b.ID, c.ID}
		require.NoError(t, s.CreateJob(ctx, parent))
		other := newJob("other-parent")
		other.ChildJobIDs = []int64{a.ID}
		require.NoError(t, s.CreateJob(ctx, other))

		got, err := s.ChildJobIDs(ctx, []int64{a.ID, parent.ID, b.ID, 1 << 40})
		require.NoError(t, err)
		require.Equal(t, map[int64][]int64{parent.ID: {b.ID, c.ID}}, got,
			"only the asked jobs with children; unknown ids and childless jobs are left out")

		got, err = s.ChildJobIDs(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)

		// More ids than one statement takes.
		ids := make([]int64, 0, 2500)
		for i := range int64(2500) {
			ids = append(ids, 1<<30+i)
		}
		ids = append(ids, other.ID, parent.ID)
		got, err = s.ChildJobIDs(ctx, ids)
		require.NoError(t, err)
		require.Equal(t, map[int64][]int64{parent.ID: {b.ID, c.ID}, other.ID: {a.ID}}, got)

		// A job whose children are removed has none.
		parent.ChildJobIDs = nil
		require.NoError(t, s.UpdateJob(ctx, parent))
		got, err = s.ChildJobIDs(ctx, []int64{parent.ID, other.ID})
		require.NoError(t, err)
		require.Equal(t, map[int64][]int64{other.ID: {a.ID}}, got)
	})
}

func runMigrationRerunSuite(t *testing.T, newDSN func(t *testing.T) string) {
	// A migration whose process crashed after its statements but before it
	// was recorded runs again on the next start: on MySQL, where DDL is not
	// transactional, that re-runs ALTERs that add an existing index or drop
	// a dropped one (0011), and must succeed; on SQLite 0012 rebuilds the runs
	// table it already rebuilt.
	t.Run("MigrationRerun", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		dsn := newDSN(t)
		s := openDSN(t, dsn)
		want := migrationVersions(t, s.Dialect())
		for _, v := range want {
			if v >= 11 { // 12 rebuilds SQLite's runs table from the one it left
				require.NoError(t, s.ForgetMigration(ctx, v))
			}
		}
		require.NoError(t, s.Close())
		s2 := openDSN(t, dsn)
		got, err := s2.AppliedMigrations(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}
