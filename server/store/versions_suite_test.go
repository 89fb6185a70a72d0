package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

// runVersionSuite covers the saved versions of jobs; runSuite calls it on
// every dialect.
func runVersionSuite(t *testing.T, newDSN func(t *testing.T) string) {
	open := func(t *testing.T) *store.Store {
		t.Helper()
		return openDSN(t, newDSN(t))
	}
	t.Run("JobVersions", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		before := time.Now().Add(-time.Second)

		j := newJob("script")
		require.NoError(t, s.CreateJobBy(ctx, j, "alice"))
		other := newJob("other")
		require.NoError(t, s.CreateJob(ctx, other))

		j.Params = json.RawMessage(`{"script":"echo two"}`)
		j.Schedule = "0 0 * * * ?"
		require.NoError(t, s.UpdateJobBy(ctx, j, "bob"))
		require.EqualValues(t, 2, j.Revision)
		j.Params = json.RawMessage(`{"script":"echo 'three' \"3\""}`)
		j.Name = "script v3"
		require.NoError(t, s.UpdateJob(ctx, j))
		require.EqualValues(t, 3, j.Revision)

		vs, total, err := s.ListJobVersions(ctx, j.ID, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 3, total)
		require.Len(t, vs, 3)
		wantRev := []int64{3, 2, 1}
		wantBy := []string{"", "bob", "alice"}
		wantScript := []string{`echo 'three' "3"`, "echo two", "echo hi"}
		wantName := []string{"script v3", "script", "script"}
		wantSchedule := []string{"0 0 * * * ?", "0 0 * * * ?", "0/10 * * * * ?"}
		for i, v := range vs {
			require.Equal(t, j.ID, v.JobID)
			require.Equal(t, wantRev[i], v.Revision)
			require.Equal(t, wantBy[i], v.SavedBy)
			require.Equal(t, wantName[i], v.Name)
			require.Equal(t, wantSchedule[i], v.Schedule)
			require.Equal(t, "cron", v.ScheduleType)
			require.Equal(t, "UTC", v.Timezone)
			require.Equal(t, "shell", v.Handler)
			var p struct{ Script string }
			require.NoError(t, json.Unmarshal(v.Params, &p), string(v.Params))
			require.Equal(t, wantScript[i], p.Script)
			require.True(t, v.SavedAt.After(before), "SavedAt set")
			require.Equal(t, time.UTC, v.SavedAt.Location())
		}
		requireTime(t, j.UpdatedAt, vs[0].SavedAt)
		requireTime(t, j.CreatedAt, vs[2].SavedAt)

		// Paging, newest first.
		page, total, err := s.ListJobVersions(ctx, j.ID, store.Page{Page: 2, PageSize: 2})
		require.NoError(t, err)
		require.Equal(t, 3, total)
		require.Len(t, page, 1)
		require.EqualValues(t, 1, page[0].Revision)

		// An update of a missing job records nothing.
		ghost := newJob("ghost")
		ghost.ID = other.ID + 1000
		require.ErrorIs(t, s.UpdateJobBy(ctx, ghost, "alice"), store.ErrNotFound)
		vs, total, err = s.ListJobVersions(ctx, ghost.ID, store.Page{})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, vs)

		// Deleting a job deletes its versions, and only its.
		require.NoError(t, s.DeleteJob(ctx, j.ID))
		vs, total, err = s.ListJobVersions(ctx, j.ID, store.Page{})
		require.NoError(t, err)
		require.Zero(t, total)
		require.Empty(t, vs)
		vs, total, err = s.ListJobVersions(ctx, other.ID, store.Page{PageSize: 10, Page: 1})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Len(t, vs, 1)
		require.EqualValues(t, 1, vs[0].Revision)
		require.Empty(t, vs[0].SavedBy)
		require.JSONEq(t, `{"script":"echo hi"}`, string(vs[0].Params))
	})

	t.Run("JobVersionsMigrationBackfill", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		dsn := newDSN(t)
		s := openDSN(t, dsn)
		j := newJob("old")
		require.NoError(t, s.CreateJobBy(ctx, j, "alice"))
		j.Params = json.RawMessage(`{"script":"echo current"}`)
		require.NoError(t, s.UpdateJobBy(ctx, j, "alice"))

		// Back to a database migrated before job_versions held anything:
		// re-running migration 3 records each job's current revision.
		require.NoError(t, s.ExecRaw(ctx, "DELETE FROM job_versions"))
		require.NoError(t, s.ExecRaw(ctx, "DELETE FROM cronix_schema_migrations WHERE version = 3"))
		require.NoError(t, s.Close())

		s2 := openDSN(t, dsn)
		got, err := s2.AppliedMigrations(ctx)
		require.NoError(t, err)
		require.Equal(t, migrationVersions(t, s2.Dialect()), got)
		vs, total, err := s2.ListJobVersions(ctx, j.ID, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.EqualValues(t, 2, vs[0].Revision)
		require.Empty(t, vs[0].SavedBy)
		require.JSONEq(t, `{"script":"echo current"}`, string(vs[0].Params))
		requireTime(t, j.UpdatedAt, vs[0].SavedAt)

		// Saving goes on from there.
		require.NoError(t, s2.UpdateJobBy(ctx, j, "bob"))
		vs, total, err = s2.ListJobVersions(ctx, j.ID, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.EqualValues(t, 3, vs[0].Revision)
		require.Equal(t, "bob", vs[0].SavedBy)
	})
}
