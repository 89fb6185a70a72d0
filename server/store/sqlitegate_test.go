package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
)

// TestSQLiteWritersQueueInsteadOfTimingOut: with a write transaction held
// for longer than busy_timeout, the process's other writers wait for it in
// the write gate and then all succeed; a read is not held up by it. Without
// the gate, they would poll SQLite's lock and fail with SQLITE_BUSY after
// busy_timeout (20 ms here), as job creations did under a soak's load.
func TestSQLiteWritersQueueInsteadOfTimingOut(t *testing.T) {
	t.Parallel()
	const busyTimeout = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, fmt.Sprintf("sqlite://%s?_pragma=busy_timeout(%d)",
		filepath.Join(t.TempDir(), "cronix.db"), busyTimeout.Milliseconds()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	g := s.gate
	require.NotNil(t, g, "a SQLite store has a write gate")

	first := &Job{Name: "first", Group: "default", Schedule: "@every 1m", Handler: "shell", Params: []byte(`{}`), Enabled: true}
	require.NoError(t, s.CreateJob(ctx, first))

	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE jobs SET description = 'held' WHERE id = ?", first.ID)
	require.NoError(t, err, "the holder takes SQLite's write lock")

	// Six writers: with the holder, seven of the pool's eight connections,
	// one left for the read.
	const writers = 6
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateJob(ctx, &Job{Name: fmt.Sprintf("w%d", i), Group: "default", Schedule: "@every 1m",
				Handler: "shell", Params: []byte(`{}`), Enabled: true})
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.Now().Add(time.Minute)
	for g.waiting.Load() < writers {
		select {
		case <-done:
			t.Fatalf("the writers returned while the lock was held: %v", errs)
		case <-time.After(time.Millisecond): // poll period
		}
		require.True(t, time.Now().Before(deadline), "only %d of %d writers reached the gate", g.waiting.Load(), writers)
	}
	readCtx, readCancel := context.WithTimeout(ctx, 30*time.Second)
	got, err := s.GetJob(readCtx, first.ID)
	readCancel()
	require.NoError(t, err, "a read while a writer holds the lock")
	require.Equal(t, "first", got.Name)

	// The point of the test is a lock held longer than busy_timeout: keep
	// it for ten of them with every writer queued (not a wait for an event).
	time.Sleep(10 * busyTimeout)
	require.NoError(t, tx.Commit())
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}
	require.Zero(t, g.waiting.Load())
	jobs, total, err := s.ListJobs(ctx, Page{Page: 1, PageSize: 100})
	require.NoError(t, err)
	require.Equal(t, writers+1, total, "%v", jobs)
}

func TestMayWrite(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]bool{
		"SELECT * FROM runs":                                 false,
		"  select 1":                                         false,
		"(SELECT 1) UNION (SELECT 2)":                        false,
		"EXPLAIN QUERY PLAN SELECT 1":                        false,
		"PRAGMA journal_mode":                                false,
		"PRAGMA table_info(runs)":                            true, // unsure: counted as a write
		"PRAGMA journal_mode=WAL":                            true,
		"PRAGMA wal_checkpoint(PASSIVE)":                     false, // beside writers (checkpoint.go)
		"PRAGMA wal_checkpoint(TRUNCATE)":                    true,
		"WITH x AS (SELECT 1) SELECT * FROM x":               false,
		"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x": true,
		"INSERT INTO audit (a) VALUES (1) RETURNING id":      true,
		"UPDATE runs SET status = 'x'":                       true,
		"DELETE FROM runs":                                   true,
		"CREATE TABLE t (a)":                                 true,
		"BEGIN IMMEDIATE":                                    true,
	} {
		require.Equal(t, want, mayWrite(q), q)
	}
}

// TestSQLiteTransactionsShareTheWriterConnection: the store's write
// transactions on a SQLite file run on one connection (openedDB.writer),
// so SQLite keeps its page cache between them: a TEMP table, which only
// its own connection sees, made in one transaction is there in the next,
// also when other writers took turns in between, and reads on the pool do
// not see it.
func TestSQLiteTransactionsShareTheWriterConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NotNil(t, s.writer)

	require.NoError(t, s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.ExecContext(ctx, "CREATE TEMP TABLE writer_mark (n INTEGER)")
		return err
	}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			assert.NoError(t, s.CreateJob(ctx, &Job{Name: fmt.Sprintf("j%d", i), Group: "default",
				Schedule: "@every 1m", Handler: "shell", Params: []byte(`{}`), Enabled: true}))
		})
	}
	wg.Wait()
	require.NoError(t, s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO writer_mark (n) VALUES (1)")
		return err
	}), "the next transaction runs on the connection that made the TEMP table")
	var n int
	err = s.db.NewSelect().TableExpr("sqlite_temp_master").ColumnExpr("count(*)").
		Where("name = 'writer_mark'").Scan(ctx, &n)
	require.NoError(t, err)
	require.Zero(t, n, "a read on the pool is on another connection")
}
