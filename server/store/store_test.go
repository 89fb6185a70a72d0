package store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/cronix/cronix/server/store"
)

// Environment variables naming the shared servers the suite may use. Each
// test gets its own schema (PostgreSQL) or database (MySQL), dropped at
// cleanup, so parallel runs on one server do not collide.
const (
	envPostgres = "CRONIX_TEST_POSTGRES_DSN" // e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable
	envMySQL    = "CRONIX_TEST_MYSQL_DSN"    // e.g. mysql://root@tcp(127.0.0.1:3306)/test?parseTime=true
)

// TestSQLite runs the suite on SQLite files, with the default busy_timeout
// (5 s). Concurrent writers of one process queue on the store's write gate
// and never meet SQLite's busy handler: before the gate, overlapping
// 1,500- and 2,000-row batches (ConcurrentWriters) under -race on a loaded
// 2-core machine failed with SQLITE_BUSY (11 of 16 in 8 concurrent runs),
// and the suite needed a 60-s timeout.
func TestSQLite(t *testing.T) {
	t.Parallel()
	runSuite(t, func(t *testing.T) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "cronix.db")
	})
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	base := os.Getenv(envPostgres)
	if base == "" {
		t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the store suite on PostgreSQL", envPostgres)
	}
	admin := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(base)))
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.PingContext(context.Background()), "connect to %s", envPostgres)

	runSuite(t, func(t *testing.T) string {
		name := "cronix_t_" + randomHex(t)
		ctx := context.Background()
		_, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name)
		require.NoError(t, err)
		t.Cleanup(func() {
			_, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE")
			require.NoError(t, err)
		})
		u, err := url.Parse(base)
		require.NoError(t, err)
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String()
	})
}

func TestMySQL(t *testing.T) {
	t.Parallel()
	base := os.Getenv(envMySQL)
	if base == "" {
		t.Skipf("set %s (e.g. mysql://root@tcp(127.0.0.1:3306)/test?parseTime=true) to run the store suite on MySQL/MariaDB", envMySQL)
	}
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(base, "mysql://"))
	require.NoError(t, err)
	connector, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	admin := sql.OpenDB(connector)
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.PingContext(context.Background()), "connect to %s", envMySQL)

	runSuite(t, func(t *testing.T) string {
		name := "cronix_t_" + randomHex(t)
		ctx := context.Background()
		_, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4")
		require.NoError(t, err)
		t.Cleanup(func() {
			_, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name)
			require.NoError(t, err)
		})
		c := cfg.Clone()
		c.DBName = name
		return "mysql://" + c.FormatDSN()
	})
}

func randomHex(t *testing.T) string {
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

func TestOpenRejectsBadDSN(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"",
		"mongodb://localhost/x",
		"mysql://not a dsn",
		"postgres://%zz",
	} {
		s, err := store.Open(ctx, dsn)
		require.Error(t, err, dsn)
		require.Nil(t, s, dsn)
	}
}

// TestTerminalRunKeysPlan: the alert scanner's reads of run keys (and of
// the ids it re-reads in its overlap) are a range of one covering index
// with no sort (no table rows, no scan from the table's start), so a pass
// costs in proportion to the runs in its window, not to the table.
func TestTerminalRunKeysPlan(t *testing.T) {
	t.Parallel()
	s := openDSN(t, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	for name, explain := range map[string]func(context.Context) ([]string, error){
		"keys": s.ExplainTerminalRunKeys, "ids": s.ExplainTerminalRunIDs,
	} {
		plan, err := explain(testCtx(t))
		require.NoError(t, err, name)
		require.Equal(t, []string{
			"SEARCH r USING COVERING INDEX runs_updated_at_id_status_idx (updated_at>? AND updated_at<?)",
		}, plan, name)
	}
}

// TestTerminalRunHeadsPlan: the scanner's read of unseen runs looks them up
// by primary key.
func TestTerminalRunHeadsPlan(t *testing.T) {
	t.Parallel()
	s := openDSN(t, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	plan, err := s.ExplainTerminalRunHeads(testCtx(t))
	require.NoError(t, err)
	require.NotEmpty(t, plan)
	require.Equal(t, "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)", plan[0])
}

// TestConcurrentOpenOfANewSQLiteFile: replicas sharing one SQLite file
// start at once; every one of them opens and migrates it (one turning the
// new file to WAL mode must not make the others fail with SQLITE_BUSY).
// The openers are separate processes (this test binary re-run), as
// replicas are: SQLite's file locks do not contend inside one process.
func TestConcurrentOpenOfANewSQLiteFile(t *testing.T) {
	if dsn := os.Getenv("CRONIX_TEST_OPEN_DSN"); dsn != "" {
		s, err := store.Open(context.Background(), dsn)
		if err == nil {
			err = s.Close()
		}
		require.NoError(t, err)
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for round := range 4 {
		dsn := "sqlite://" + filepath.Join(t.TempDir(), fmt.Sprintf("shared-%d.db", round))
		const n = 4
		cmds := make([]*exec.Cmd, n)
		outs := make([]*bytes.Buffer, n)
		for i := range cmds {
			outs[i] = &bytes.Buffer{}
			cmds[i] = exec.Command(exe, "-test.run=^TestConcurrentOpenOfANewSQLiteFile$", "-test.count=1")
			cmds[i].Env = append(os.Environ(), "CRONIX_TEST_OPEN_DSN="+dsn)
			cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
			require.NoError(t, cmds[i].Start())
		}
		for i, c := range cmds {
			require.NoError(t, c.Wait(), "opener %d of round %d:\n%s", i, round, outs[i])
		}
	}
}
