package store_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
	schema "github.com/cronix/cronix/sql"
)

// runNameSuite checks that job names are unique within a group (migration
// 4), under concurrency too, and that the migration renames duplicates a
// database already holds.
func runNameSuite(t *testing.T, newDSN func(t *testing.T) string) {
	t.Run("JobNamesUniquePerGroup", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := openDSN(t, newDSN(t))

		a := newJob("backup")
		require.NoError(t, s.CreateJob(ctx, a))
		err := s.CreateJob(ctx, newJob("backup"))
		require.ErrorIs(t, err, store.ErrConflict)

		// The same name in another group, and another name in the same group, are fine.
		other := newJob("backup")
		other.Group = "ops"
		require.NoError(t, s.CreateJob(ctx, other))
		b := newJob("Backup")
		require.NoError(t, s.CreateJob(ctx, b), "names compare case-sensitively on every dialect")

		// Renaming onto a taken name conflicts and changes nothing.
		b.Name = "backup"
		require.ErrorIs(t, s.UpdateJob(ctx, b), store.ErrConflict)
		got, err := s.GetJob(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, "Backup", got.Name)
		require.EqualValues(t, 1, got.Revision)
		// Moving into a group where the name is taken conflicts too.
		other.Group = "default"
		require.ErrorIs(t, s.UpdateJob(ctx, other), store.ErrConflict)
		// Saving a job under its own name is not a conflict.
		require.NoError(t, s.UpdateJob(ctx, a))
		_, total, err := s.FindJobs(ctx, store.JobFilter{}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 3, total)
	})

	t.Run("HandlerCatalog", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := openDSN(t, newDSN(t))
		hs, err := s.HandlerCatalog(ctx)
		require.NoError(t, err)
		require.Empty(t, hs)
		require.NoError(t, s.UpsertHandlerCatalog(ctx, []store.CatalogHandler{
			{Name: "shell", Version: "1.0.0", Description: "runs a script", ParamsSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "legacy", Version: "0.1"},
		}))
		require.NoError(t, s.UpsertHandlerCatalog(ctx, []store.CatalogHandler{
			{Name: "shell", Version: "1.1.0", Description: "runs a script, again", ParamsSchema: json.RawMessage(`{"type":"object","required":["script"]}`)},
		}))
		hs, err = s.HandlerCatalog(ctx)
		require.NoError(t, err)
		require.Len(t, hs, 2)
		require.Equal(t, "legacy", hs[0].Name)
		require.Nil(t, hs[0].ParamsSchema)
		require.Equal(t, "shell", hs[1].Name)
		require.Equal(t, "1.1.0", hs[1].Version)
		require.Equal(t, "runs a script, again", hs[1].Description)
		require.JSONEq(t, `{"type":"object","required":["script"]}`, string(hs[1].ParamsSchema))
		require.False(t, hs[1].UpdatedAt.IsZero())
	})

	t.Run("JobNamesUniqueUnderConcurrentCreates", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := openDSN(t, newDSN(t))
		const n = 20
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = s.CreateJob(ctx, newJob("race")) })
		}
		wg.Wait()
		created := 0
		for _, err := range errs {
			if err == nil {
				created++
				continue
			}
			require.ErrorIs(t, err, store.ErrConflict, "every loser is a conflict, not another failure")
		}
		require.Equal(t, 1, created)
		jobs, total, err := s.FindJobs(ctx, store.JobFilter{}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "race", jobs[0].Name)
	})

	t.Run("UniqueNamesMigrationRenamesDuplicates", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		dsn := newDSN(t)
		s := openDSN(t, dsn)

		// Back to a database from before migration 4, holding duplicates.
		drop := "DROP INDEX jobs_group_name_name_key"
		if s.Dialect() == schema.MySQL {
			drop = "ALTER TABLE jobs DROP INDEX jobs_group_name_name_key"
		}
		require.NoError(t, s.ExecRaw(ctx, drop))
		require.NoError(t, s.ExecRaw(ctx, "DELETE FROM cronix_schema_migrations WHERE version = 4"))
		var dups []*store.Job
		for range 3 {
			j := newJob("nightly")
			require.NoError(t, s.CreateJob(ctx, j))
			dups = append(dups, j)
		}
		elsewhere := newJob("nightly")
		elsewhere.Group = "ops"
		require.NoError(t, s.CreateJob(ctx, elsewhere))
		require.NoError(t, s.Close())

		s2 := openDSN(t, dsn)
		got, err := s2.AppliedMigrations(ctx)
		require.NoError(t, err)
		require.Equal(t, migrationVersions(t, s2.Dialect()), got)
		want := map[int64]string{
			dups[0].ID:   "nightly",
			dups[1].ID:   "nightly (" + strconv.FormatInt(dups[1].ID, 10) + ")",
			dups[2].ID:   "nightly (" + strconv.FormatInt(dups[2].ID, 10) + ")",
			elsewhere.ID: "nightly",
		}
		for id, name := range want {
			j, err := s2.GetJob(ctx, id)
			require.NoError(t, err)
			require.Equal(t, name, j.Name, "job %d", id)
		}
		err = s2.CreateJob(ctx, newJob("nightly"))
		require.True(t, errors.Is(err, store.ErrConflict), "the index is back: %v", err)
	})
}
