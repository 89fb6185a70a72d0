package store_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// TestFireIDLookupsPlan: on SQLite every read by fire id searches the
// time-ordered unique index (fire_key, fire_id) of migration 12, so a tick's
// inserts and its lookups touch the index's last pages, not one page per job.
func TestFireIDLookupsPlan(t *testing.T) {
	t.Parallel()
	s := openDSN(t, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ids := []string{cluster.FireID(7, at), cluster.FireID(8, at), cluster.FireID(7, at.Add(time.Second)), cluster.ManualFireID(9, 42)}
	one, many, err := s.ExplainRunsByFireIDs(testCtx(t), ids)
	require.NoError(t, err)
	require.Equal(t, []string{"SEARCH r USING INDEX runs_fire_key_fire_id_key (fire_key=? AND fire_id=?)"}, one)
	require.Equal(t, "MULTI-INDEX OR", many[0], "plan %q", many)
	for _, step := range many[1:] {
		if strings.HasPrefix(step, "SEARCH") {
			require.Equal(t, "SEARCH r USING INDEX runs_fire_key_fire_id_key (fire_key=? AND fire_id=?)", step)
		}
	}
}

// TestFireIDChunks: a statement's fire ids are grouped by fire key, at most
// maxIDs of them and at most 100 keys (SQLite's expression depth), each id
// once.
func TestFireIDChunks(t *testing.T) {
	t.Parallel()
	s := openDSN(t, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for sec := range 250 {
		for job := range 3 {
			ids = append(ids, cluster.FireID(int64(job+1), at.Add(time.Duration(sec)*time.Second)))
		}
	}
	ids = append(ids, ids[0], cluster.ManualFireID(1, 5), "nodash")
	// 752 distinct ids in 252 keys: the 100-key bound splits them, not maxIDs ...
	chunks := s.FireIDChunks(ids, 1000)
	require.Len(t, chunks[0], 300, "100 keys of 3 ids")
	// ... and a maxIDs of 200 splits them within a key's ids too.
	chunks = append(chunks, s.FireIDChunks(ids, 200)...)
	var all []string
	for _, c := range chunks {
		require.LessOrEqual(t, len(c), 300)
		keys := map[string]bool{}
		for i, id := range c {
			k := id[strings.IndexByte(id, '-')+1:]
			if i > 0 && k != c[i-1][strings.IndexByte(c[i-1], '-')+1:] {
				require.False(t, keys[k], "key %s comes back within a chunk", k)
			}
			keys[k] = true
		}
		require.LessOrEqual(t, len(keys), 100)
		all = append(all, c...)
	}
	want := slices.Compact(slices.Sorted(slices.Values(ids)))
	require.ElementsMatch(t, append(slices.Clone(want), want...), all, "each id once per split")
}

// TestMigrationTwelveKeepsRuns: a database of schema 11 holding runs
// upgrades with every run, its id and the AUTOINCREMENT counter (a deleted
// last id is never reused), and fire ids stay unique.
func TestMigrationTwelveKeepsRuns(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "cronix.db")
	old, err := store.OpenAtVersion(ctx, dsn, 11)
	require.NoError(t, err)
	got, err := old.AppliedMigrations(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(11), got[len(got)-1])
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{cluster.FireID(5, at), cluster.ShardFireID(5, at, 1), cluster.ManualFireID(6, 77)} {
		require.NoError(t, old.ExecRaw(ctx, `INSERT INTO runs (fire_id, job_id, status, node, scheduled_at, created_at, updated_at, output, attempt)
			VALUES (?, ?, ?, 'n1', ?, ?, ?, ?, 1)`, id, 5+i/2, cluster.StatusSuccess, at, at, at, fmt.Sprintf("out %d", i)))
	}
	require.NoError(t, old.ExecRaw(ctx, `INSERT INTO runs (fire_id, job_id, status, scheduled_at, created_at, updated_at)
		VALUES ('9-1', 9, 'triggered', ?, ?, ?)`, at, at, at))
	require.NoError(t, old.ExecRaw(ctx, `DELETE FROM runs WHERE fire_id = '9-1'`)) // id 4: the counter stays at 4
	require.NoError(t, old.Close())

	s := openDSN(t, dsn)
	got, err = s.AppliedMigrations(ctx)
	require.NoError(t, err)
	require.Equal(t, migrationVersions(t, s.Dialect()), got)
	for i, id := range []string{cluster.FireID(5, at), cluster.ShardFireID(5, at, 1), cluster.ManualFireID(6, 77)} {
		r, err := s.RunByFireID(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, int64(i+1), r.ID, id)
		require.Equal(t, fmt.Sprintf("out %d", i), r.Output)
		require.Equal(t, "n1", r.Node)
		require.Equal(t, cluster.StatusSuccess, r.Status)
	}
	fresh := newRun(5, at.Add(time.Second))
	inserted, err := s.InsertRuns(ctx, []store.Run{fresh})
	require.NoError(t, err)
	require.Equal(t, []string{fresh.FireID}, inserted)
	r, err := s.RunByFireID(ctx, fresh.FireID)
	require.NoError(t, err)
	require.Equal(t, int64(5), r.ID, "id 4 was used before the upgrade")
	inserted, err = s.InsertRuns(ctx, []store.Run{newRun(5, at)})
	require.NoError(t, err)
	require.Empty(t, inserted, "the old fire id is still taken")
	runs, err := s.RunsByFireIDs(ctx, []string{cluster.ManualFireID(6, 77), fresh.FireID, cluster.FireID(5, at)})
	require.NoError(t, err)
	require.Len(t, runs, 3)
}
