package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
)

// Batch statements with bound values on a SQLite file.
//
// bun writes every value into a statement's text, so SQLite tokenized,
// parsed and compiled each batch of run inserts and result upserts anew:
// 17 % of the CPU of a second's 500 inserts and 500 upserts
// (BenchmarkRunBatch), and bun's formatting of the values another 9 %. On
// the writer connection of a SQLite file, a batch of n rows instead runs a
// statement with placeholders for n rows, prepared once per n and kept
// (batchStmts), with its values bound. A tick's batch has the same size
// every second while the jobs due stay the same, so its statement is found
// again. SQLite binds at most 32,766 values per statement (the compiled
// limit of modernc.org/sqlite), 18 a run row: a larger chunk, and a row with
// text bun would refuse or rewrite (a NUL byte, invalid UTF-8: none reach
// here after cleanText, but the two paths must not store different text),
// take bun's path. Both paths store the same values:
// TestPreparedBatchesStoreWhatBunStores compares them column by column.

// sqliteMaxVariables is SQLITE_MAX_VARIABLE_NUMBER of modernc.org/sqlite.
const sqliteMaxVariables = 32766

// maxPreparedRows is the largest chunk a prepared batch statement takes.
var maxPreparedRows = sqliteMaxVariables / len(runInsertColumns)

// preparedKeep bounds the statements batchStmts keeps per kind (the least
// recently used is closed first). A prepared statement for n rows holds its
// compiled program, about a kilobyte per row.
const preparedKeep = 4

// batchKind names a batch statement.
type batchKind int

const (
	insertRunsBatch   batchKind = iota // InsertRuns: ON CONFLICT DO NOTHING RETURNING fire_id
	applyResultsBatch                  // ApplyResults: the upsert of upsertResultSet
)

type batchKey struct {
	kind batchKind
	rows int
}

// batchStmts keeps prepared batch statements of the writer connection.
// Its users hold the write gate (onWriter); mu guards the map anyway.
type batchStmts struct {
	db       *sql.DB
	conflict func(action string) string
	mu       sync.Mutex
	kept     map[batchKey]*sql.Stmt
	order    []batchKey // least recently used first
	closed   bool
}

func newBatchStmts(db *sql.DB, conflict func(action string) string) *batchStmts {
	return &batchStmts{db: db, conflict: conflict, kept: map[batchKey]*sql.Stmt{}}
}

// get returns the statement for k, preparing it when it is not kept.
func (b *batchStmts) get(ctx context.Context, k batchKey) (*sql.Stmt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, sql.ErrConnDone
	}
	if st, ok := b.kept[k]; ok {
		b.touch(k)
		return st, nil
	}
	st, err := b.db.PrepareContext(ctx, b.text(k))
	if err != nil {
		return nil, err
	}
	b.kept[k] = st
	b.order = append(b.order, k)
	kinds := 0
	for _, o := range b.order {
		if o.kind == k.kind {
			kinds++
		}
	}
	if kinds > preparedKeep {
		for i, o := range b.order {
			if o.kind == k.kind {
				_ = b.kept[o].Close()
				delete(b.kept, o)
				b.order = append(b.order[:i], b.order[i+1:]...)
				break
			}
		}
	}
	return st, nil
}

// touch moves k to the most recently used end of order.
func (b *batchStmts) touch(k batchKey) {
	for i, o := range b.order {
		if o == k {
			copy(b.order[i:], b.order[i+1:])
			b.order[len(b.order)-1] = k
			return
		}
	}
}

// close closes every kept statement; get fails afterwards.
func (b *batchStmts) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	var first error
	for k, st := range b.kept {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(b.kept, k)
	}
	b.order = nil
	return first
}

// text is the SQL of k: the statement bun builds for insertRunChunk or
// applyResultChunk, with placeholders where bun writes the values.
func (b *batchStmts) text(k batchKey) string {
	var s strings.Builder
	s.WriteString(`INSERT INTO "runs" AS "r" (`)
	for i, c := range runInsertColumns {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(strconv.Quote(c))
	}
	s.WriteString(") VALUES ")
	row := "(?" + strings.Repeat(", ?", len(runInsertColumns)-1) + ")"
	s.Grow(k.rows * (len(row) + 2))
	for i := range k.rows {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(row)
	}
	switch k.kind {
	case insertRunsBatch:
		s.WriteString(" ON " + b.conflict("DO NOTHING") + " RETURNING fire_id")
	case applyResultsBatch:
		s.WriteString(" ON " + b.conflict("DO UPDATE") + " SET " + upsertResultSet +
			" WHERE (r.status NOT IN (" + terminalList + ")) RETURNING fire_id, job_id, status")
	}
	return s.String()
}

// runBatch runs chunk as a prepared statement of kind and calls scan for
// each row it returns, when db is the writer connection of a SQLite file
// and the chunk fits one statement's values; it reports false (and does
// nothing) otherwise, for bun's path.
func (s *Store) runBatch(ctx context.Context, db bun.IDB, kind batchKind, chunk []runRow, scan func(*sql.Rows) error) (bool, error) {
	if s.stmts == nil || len(chunk) > maxPreparedRows {
		return false, nil
	}
	if w, ok := db.(*bun.DB); !ok || w != s.writer {
		return false, nil
	}
	args := make([]any, 0, len(chunk)*len(runInsertColumns))
	for i := range chunk {
		var ok bool
		if args, ok = runArgs(args, &chunk[i]); !ok {
			return false, nil
		}
	}
	start := time.Now()
	st, err := s.stmts.get(ctx, batchKey{kind: kind, rows: len(chunk)})
	if err != nil {
		return true, err
	}
	err = queryRows(ctx, st, args, scan)
	if s.observe != nil {
		s.observe("INSERT", time.Since(start))
	}
	return true, err
}

// queryRows runs st with args and calls scan for each returned row.
func queryRows(ctx context.Context, st *sql.Stmt, args []any, scan func(*sql.Rows) error) error {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// runArgs appends the values of r in runInsertColumns' order, as bun's
// SQLite dialect writes them: times as UTC text with microseconds, booleans
// as 1 and 0, nil pointers as NULL. It reports false for text bun would
// refuse (a NUL byte) or rewrite (invalid UTF-8).
func runArgs(args []any, r *runRow) ([]any, bool) {
	for _, t := range [...]string{r.FireID, r.Trigger, r.Status, r.Node, r.Output, r.Message} {
		if strings.IndexByte(t, 0) >= 0 || !utf8.ValidString(t) {
			return args, false
		}
	}
	truncated := int64(0)
	if r.OutputTruncated {
		truncated = 1
	}
	var exit any
	if r.ExitCode != nil {
		exit = int64(*r.ExitCode)
	}
	return append(args,
		r.FireID, r.JobID, r.Trigger, r.Status, r.Node,
		sqliteTime(r.ScheduledAt), sqliteTimePtr(r.DispatchedAt), sqliteTimePtr(r.StartedAt), sqliteTimePtr(r.FinishedAt),
		exit, r.Output, truncated, r.Message,
		int64(r.Attempt), int64(r.ShardIndex), int64(r.ShardTotal),
		sqliteTime(r.CreatedAt), sqliteTime(r.UpdatedAt),
	), true
}

// sqliteTime is t as bun's SQLite dialect writes it.
func sqliteTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.999999-07:00")
}

// sqliteTimePtr is sqliteTime for an optional time (nil is NULL).
func sqliteTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return sqliteTime(*t)
}
