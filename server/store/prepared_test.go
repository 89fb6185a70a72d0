package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
)

// dumpRuns is every run's columns as SQLite's quote() writes them (the
// exact text, and NULL or a number as such), by fire id.
func dumpRuns(t *testing.T, s *Store) []string {
	t.Helper()
	cols := make([]string, len(runInsertColumns))
	for i, c := range runInsertColumns {
		cols[i] = fmt.Sprintf("quote(%q)", c)
	}
	var rows []string
	err := s.db.NewRaw("SELECT "+strings.Join(cols, " || '|' || ")+" FROM runs ORDER BY fire_id").Scan(t.Context(), &rows)
	require.NoError(t, err)
	return rows
}

// batchRows is a chunk with every kind of value a run row holds.
func batchRows(n int, status string, at time.Time) []runRow {
	rows := make([]runRow, n)
	for i := range rows {
		sec := at.Add(time.Duration(i) * time.Second)
		r := runRow{
			FireID: cluster.FireID(int64(i%7+1), sec), JobID: int64(i%7 + 1), Trigger: cluster.TriggerSchedule,
			Status: status, Node: "n1", ScheduledAt: sec, Attempt: i % 3, ShardIndex: i % 2, ShardTotal: 2,
			Output: fmt.Sprintf("out %d: it's \"quoted\", ünïcode ☃\n", i), Message: "", CreatedAt: at, UpdatedAt: at,
		}
		if i%2 == 0 {
			d := sec.Add(123456 * time.Microsecond)
			r.DispatchedAt, r.StartedAt = &d, &d
			code := i - 3
			r.ExitCode = &code
		}
		if i%3 == 0 {
			f := sec.Add(time.Second)
			r.FinishedAt = &f
			r.OutputTruncated = true
			r.Message = "exit status 1"
		}
		rows[i] = r
	}
	return rows
}

// TestPreparedBatchesStoreWhatBunStores: the run inserts and result
// upserts of a SQLite file's writer connection run as prepared statements
// with bound values (prepared.go); they store exactly what bun's statements
// with the values in their text store, and return the same rows.
func TestPreparedBatchesStoreWhatBunStores(t *testing.T) {
	ctx, prepared := openSQLiteFile(t)
	_, viaBun := openSQLiteFile(t)
	require.NoError(t, viaBun.stmts.close())
	viaBun.stmts = nil

	at := time.Date(2026, 3, 1, 0, 0, 0, 654321000, time.UTC)
	run := func(s *Store, chunk func(ctx context.Context, db bun.IDB) (any, error)) any {
		var got any
		require.NoError(t, s.onWriter(ctx, func(db bun.IDB) error {
			var err error
			got, err = chunk(ctx, db)
			return err
		}))
		return got
	}
	inserts := batchRows(40, cluster.StatusTriggered, at)
	results := batchRows(60, cluster.StatusSuccess, at) // the last 20 fires are unknown until now
	for i := range results {
		r := &results[i]
		r.UpdatedAt = at.Add(time.Minute)
		switch i % 4 {
		case 0:
			r.Status = cluster.StatusRunning
		case 1:
			r.Node, r.Output, r.Attempt = "", "", 2
		case 2:
			r.Status = cluster.StatusTriggered // never moves a run back
		}
	}
	var insertedBy, changedBy []any
	for _, s := range []*Store{prepared, viaBun} {
		insertedBy = append(insertedBy, run(s, func(ctx context.Context, db bun.IDB) (any, error) {
			return s.insertRunChunk(ctx, db, inserts)
		}))
		// Again: every fire exists, nothing is inserted.
		require.Empty(t, run(s, func(ctx context.Context, db bun.IDB) (any, error) {
			return s.insertRunChunk(ctx, db, inserts)
		}))
		changedBy = append(changedBy, run(s, func(ctx context.Context, db bun.IDB) (any, error) {
			return s.applyResultChunk(ctx, db, results)
		}))
	}
	require.Len(t, insertedBy[0], len(inserts))
	require.Equal(t, insertedBy[1], insertedBy[0])
	require.Len(t, changedBy[0], len(results))
	require.Equal(t, changedBy[1], changedBy[0])
	require.Equal(t, dumpRuns(t, viaBun), dumpRuns(t, prepared))

	// The prepared store did use its statements: one per kind, size and
	// shared columns.
	require.Len(t, prepared.stmts.kept, 2)
}

// TestPreparedBatchLimits: a tick's batch binds its shared columns once, so
// thousands of runs fit one prepared statement; a chunk whose values do
// not fit takes bun's path; at most preparedKeep statements of a kind, and
// preparedKeepRows rows, are kept.
func TestPreparedBatchLimits(t *testing.T) {
	ctx, s := openSQLiteFile(t)
	require.Len(t, runInsertColumns, runColumns)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tick := func(sec time.Time, n int) []Run {
		runs := make([]Run, n)
		for i := range runs {
			runs[i] = Run{FireID: cluster.FireID(int64(i+1), sec), JobID: int64(i + 1), ScheduledAt: sec, DispatchedAt: &sec, Node: "n1"}
		}
		return runs
	}
	inserted, err := s.InsertRuns(ctx, tick(at, 5000))
	require.NoError(t, err)
	require.Len(t, inserted, 5000)
	require.Len(t, s.stmts.kept, 1, "a tick of 5,000 runs took one prepared statement")
	for k := range s.stmts.kept {
		require.Equal(t, 5000, k.rows)
	}

	// Twelve columns vary in every row here: 3,000 rows are 36,000 values.
	wide := batchRows(3000, cluster.StatusSuccess, at.Add(time.Hour))
	done, err := s.runBatch(ctx, s.writer, applyResultsBatch, wide, nil)
	require.NoError(t, err)
	require.False(t, done, "a chunk over the values limit went through a prepared statement")

	for n := 1; n <= preparedKeep+2; n++ {
		inserted, err := s.InsertRuns(ctx, tick(at.Add(time.Duration(n)*time.Minute), n))
		require.NoError(t, err)
		require.Len(t, inserted, n)
	}
	require.Len(t, s.stmts.kept, preparedKeep)
	require.Len(t, s.stmts.order, preparedKeep)
	for _, k := range s.stmts.order {
		require.Greater(t, k.rows, 2, "the least recently used statements are the ones closed")
	}

	// Rows bound what is kept as well: ticks of 7,000 and 6,000 are over it.
	for n, size := range []int{7000, 6000} {
		_, err := s.InsertRuns(ctx, tick(at.Add(time.Duration(n+1)*time.Hour), size))
		require.NoError(t, err)
	}
	require.Len(t, s.stmts.kept, 1, "statements of 13,000 rows kept")

	require.NoError(t, s.Close())
	_, err = s.stmts.get(ctx, batchKey{kind: insertRunsBatch, rows: 1})
	require.Error(t, err, "a closed store prepares nothing")
}
