package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cronix/cronix/cluster"
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
	ctx, s := openSQLiteFile(t)

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
	err := s.db.NewSelect().TableExpr("sqlite_temp_master").ColumnExpr("count(*)").
		Where("name = 'writer_mark'").Scan(ctx, &n)
	require.NoError(t, err)
	require.Zero(t, n, "a read on the pool is on another connection")
}

// TestSQLiteHotReadsRunOnTheWriterConnection: the reads of rows the
// writers have just written (a result batch's nodes, the alert scanner's
// run heads, the child jobs of finished runs) run on the writer connection,
// whose page cache a write does not drop (see Store.onWriter). A TEMP table
// made there shadows the main table of the same name on that connection
// only, so each read returns the TEMP table's row; on the pool it would
// return the main table's.
func TestSQLiteHotReadsRunOnTheWriterConnection(t *testing.T) {
	t.Parallel()
	ctx, s := openSQLiteFile(t)

	scheduled := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	_, err := s.InsertRuns(ctx, []Run{{FireID: "7@1796328000", JobID: 7, Node: "main-node", ScheduledAt: scheduled}})
	require.NoError(t, err)
	require.NoError(t, s.ApplyResults(ctx, []cluster.RunResult{{FireID: "7@1796328000", JobID: 7, Node: "main-node",
		Status: cluster.StatusSuccess}}))
	nodes, err := s.RunNodes(ctx, []string{"7@1796328000"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"7@1796328000": "main-node"}, nodes, "before the shadow, the main table")

	require.NoError(t, s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, q := range []string{
			`CREATE TEMP TABLE runs (id INTEGER PRIMARY KEY, fire_id TEXT, fire_key INTEGER, job_id INTEGER, "trigger" TEXT,
				status TEXT, node TEXT, scheduled_at TIMESTAMP, dispatched_at TIMESTAMP, updated_at TIMESTAMP)`,
			`INSERT INTO temp.runs SELECT id, fire_id, fire_key, job_id, "trigger", 'failed', 'writer-node', scheduled_at,
				dispatched_at, updated_at FROM main.runs`,
			`CREATE TEMP TABLE jobs (id INTEGER PRIMARY KEY, child_job_ids TEXT)`,
			`INSERT INTO temp.jobs (id, child_job_ids) VALUES (7, '8,9')`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}))

	nodes, err = s.RunNodes(ctx, []string{"7@1796328000"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"7@1796328000": "writer-node"}, nodes, "RunNodes reads on the writer connection")
	var id int64
	require.NoError(t, s.db.NewSelect().TableExpr("runs").Column("id").Scan(ctx, &id))
	heads, err := s.TerminalRunHeads(ctx, []int64{id})
	require.NoError(t, err)
	require.Len(t, heads, 1)
	require.Equal(t, cluster.StatusFailed, heads[0].Status, "TerminalRunHeads reads on the writer connection")
	children, err := s.ChildJobIDs(ctx, []int64{7})
	require.NoError(t, err)
	require.Equal(t, map[int64][]int64{7: {8, 9}}, children, "ChildJobIDs reads on the writer connection")
}

// openSQLiteFile opens a store on a new SQLite file, closed when t ends,
// with a context that ends after a minute.
func openSQLiteFile(t *testing.T) (context.Context, *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NotNil(t, s.writer)
	return ctx, s
}
