package store

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChunkRuns(t *testing.T) {
	t.Parallel()
	rows := make([]runRow, 3000)
	for i := range rows {
		rows[i].FireID = "1-" + strings.Repeat("9", 13)
	}
	big := strings.Repeat("x'\\", MaxOutputBytes/3)
	for _, i := range []int{5, 6, 7, 8, 2000} {
		rows[i].Output = big
	}
	chunks := chunkRuns(rows, maxBatchRows)
	var total int
	for _, c := range chunks {
		require.NotEmpty(t, c)
		require.LessOrEqual(t, len(c), maxBatchRows)
		size := 0
		for _, r := range c {
			size += quotedLen(r.Output)
		}
		require.LessOrEqual(t, size, maxBatchBytes, "chunk of %d rows", len(c))
		require.Same(t, &rows[total], &c[0], "chunks keep order and share the slice")
		total += len(c)
	}
	require.Equal(t, len(rows), total)
	require.Greater(t, len(chunks), 3, "split by bytes as well as by rows")

	// A single row over the byte budget still gets its own chunk.
	huge := []runRow{{Output: strings.Repeat("'", maxBatchBytes)}, {}}
	require.Len(t, chunkRuns(huge, maxBatchRows), 2)
	require.Len(t, chunkRuns([]runRow{{}}, maxBatchRows), 1)
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	s, cut := cleanText("ok", 10)
	require.Equal(t, "ok", s)
	require.False(t, cut)
	s, cut = cleanText("a\x00b\xff", 100)
	require.Equal(t, "a\uFFFDb\uFFFD", s)
	require.False(t, cut)
	s, cut = cleanText("ééé", 5) // 6 bytes
	require.Equal(t, "éé", s)
	require.True(t, cut)
}

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:///var/lib/cronix.db": "/var/lib/cronix.db?",
		"sqlite://rel/c.db":           "rel/c.db?",
		"sqlite:c.db":                 "c.db?",
		"/abs/c.db":                   "/abs/c.db?",
		"file:c.db?mode=rwc":          "file:c.db?",
	} {
		got, memory, err := sqliteDSN(in)
		require.NoError(t, err, in)
		require.False(t, memory)
		require.True(t, strings.HasPrefix(got, want), "%s -> %s", in, got)
		for _, p := range []string{"busy_timeout%285000%29", "journal_mode%28WAL%29", "foreign_keys%281%29", "temp_store%28MEMORY%29", "_txlock=immediate"} {
			require.Contains(t, got, p, in)
		}
	}
	got, _, err := sqliteDSN("c.db?_pragma=busy_timeout(100)&_txlock=deferred")
	require.NoError(t, err)
	require.NotContains(t, got, "5000", "the DSN's own pragma wins")
	require.Contains(t, got, "_txlock=deferred")

	got, memory, err := sqliteDSN(":memory:")
	require.NoError(t, err)
	require.True(t, memory)
	require.NotContains(t, got, "journal_mode")

	for _, bad := range []string{"", "sqlite://", "redis://x"} {
		_, _, err := sqliteDSN(bad)
		require.Error(t, err, bad)
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, ":memory:")
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "sqlite", s.Dialect())
	require.NoError(t, s.CreateUser(ctx, &User{Username: "a", PasswordHash: "h"}))
	n, err := s.CountUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestSQLiteTempStoreInMemory: every connection of a file database keeps its
// statement journals in memory (no temporary file per multi-row upsert),
// and a statement that fails midway is still undone alone, its transaction
// going on.
func TestSQLiteTempStoreInMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	defer s.Close()
	conns := make([]*sql.Conn, 3) // distinct pool connections, each opened with the DSN's pragmas
	for i := range conns {
		conns[i], err = s.db.DB.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
		var mode int
		require.NoError(t, conns[i].QueryRowContext(ctx, "PRAGMA temp_store").Scan(&mode))
		require.Equal(t, 2, mode, "temp_store MEMORY on connection %d", i)
	}

	tx, err := conns[0].BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)")
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (1, 'a'), (2, 'b')")
	require.NoError(t, err)
	// The third row breaks the unique constraint after two rows went in:
	// the statement journal undoes those two, not the transaction.
	_, err = tx.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (3, 'c'), (4, 'd'), (5, 'a')")
	require.Error(t, err)
	require.NoError(t, tx.Commit())
	var n int
	require.NoError(t, conns[0].QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 2, n)
}
