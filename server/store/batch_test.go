package store

import (
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
	chunks := chunkRuns(rows)
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
	require.Len(t, chunkRuns(huge), 2)
	require.Len(t, chunkRuns([]runRow{{}}), 1)
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
		for _, p := range []string{"busy_timeout%285000%29", "journal_mode%28WAL%29", "foreign_keys%281%29", "_txlock=immediate"} {
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
