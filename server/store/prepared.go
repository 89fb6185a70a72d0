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
	bunschema "github.com/uptrace/bun/schema"
)

// Batch statements with bound values on a SQLite file.
//
// bun writes every value into a statement's text, so SQLite tokenized,
// parsed and compiled each batch of run inserts and result upserts anew:
// 17 % of the CPU of a second's 500 inserts and 500 upserts
// (BenchmarkRunBatch), and bun's formatting of the values another 9 %. On
// the writer connection of a SQLite file, a batch instead runs a statement
// with numbered placeholders, prepared once and kept (batchStmts), with
// its values bound. A column whose value is the same in every row of the
// batch (a tick's status, trigger, scheduled second and creation time; a
// report's node) is bound once and named by every row (?1 to ?18, by
// column); the others take a placeholder per row (numbered in the first
// row, anonymous ? after it, which SQLite numbers in order). The statement is thus
// one per kind, row count and set of shared columns, and a tick's batch
// finds its statement again every second while the jobs due stay the same.
// SQLite binds at most 32,766 values per statement (the compiled limit of
// modernc.org/sqlite): a larger batch, and a row with text bun would
// refuse or rewrite (a NUL byte, invalid UTF-8: none reach here after
// cleanText, but the two paths must not store different text), take bun's
// path. Both paths store the same values:
// TestPreparedBatchesStoreWhatBunStores compares them column by column.

// sqliteMaxVariables is SQLITE_MAX_VARIABLE_NUMBER of modernc.org/sqlite.
const sqliteMaxVariables = 32766

// runColumns is len(runInsertColumns), the values of a run row.
const runColumns = 18

// runValues is a run row's values in runInsertColumns' order.
type runValues [runColumns]any

// preparedKeep and preparedKeepRows bound the statements batchStmts keeps
// per kind, and their rows (the least recently used is closed first; the
// one just used is always kept, so a single batch of up to 16,374 rows
// may hold more). A prepared statement holds its compiled program, about
// a kilobyte per row: 5 MB for a tick of 5,000 runs.
const (
	preparedKeep     = 4
	preparedKeepRows = 12_000
)

// batchKind names a batch statement.
type batchKind int

const (
	insertRunsBatch   batchKind = iota // InsertRuns: ON CONFLICT DO NOTHING RETURNING fire_id
	applyResultsBatch                  // ApplyResults: the upsert of upsertResultSet
)

type batchKey struct {
	kind batchKind
	rows int
	// shared has bit c set when column c is bound once for every row.
	shared uint32
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
	// Close the least recently used of k's kind while over either bound
	// (never k itself: it is the most recent).
	for {
		count, rows := 0, 0
		for _, o := range b.order {
			if o.kind == k.kind {
				count++
				rows += o.rows
			}
		}
		if count <= 1 || (count <= preparedKeep && rows <= preparedKeepRows) {
			break
		}
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
	s.Grow(k.rows * runColumns * 8)
	var num []byte
	next := runColumns + 1 // the first per-row placeholder
	for i := range k.rows {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteByte('(')
		for c := range runColumns {
			if c > 0 {
				s.WriteString(", ")
			}
			n := c + 1
			if k.shared&(1<<c) == 0 {
				if i > 0 {
					// An anonymous ? is numbered one past the highest
					// number so far: next, after the first row. SQLite
					// looks a numbered placeholder's name up in a list
					// of them all for every value bound (modernc asks
					// for each), so numbering every row's was quadratic.
					s.WriteByte('?')
					next++
					continue
				}
				n = next
				next++
			}
			s.WriteByte('?')
			num = strconv.AppendInt(num[:0], int64(n), 10)
			s.Write(num)
		}
		s.WriteByte(')')
	}
	switch k.kind {
	case insertRunsBatch:
		s.WriteString(" ON " + b.conflict("DO NOTHING") + " RETURNING " + insertRunsReturning)
	case applyResultsBatch:
		s.WriteString(" ON " + b.conflict("DO UPDATE") + " SET " + upsertResultSet +
			" WHERE (" + resultNotTerminal + ") RETURNING " + resultsReturning)
	}
	return s.String()
}

// runBatch runs chunk as a prepared statement of kind and calls scan for
// each row it returns, when db is the writer connection of a SQLite file
// and the chunk's values fit one statement; it reports false (and does
// nothing) otherwise, for bun's path.
func (s *Store) runBatch(ctx context.Context, db bun.IDB, kind batchKind, chunk []runRow, scan func(*sql.Rows) error) (bool, error) {
	if s.stmts == nil || len(chunk) == 0 {
		return false, nil
	}
	if w, ok := db.(*bun.DB); !ok || w != s.writer {
		return false, nil
	}
	vals := make([]runValues, len(chunk))
	times := timeText{dialect: s.writer.Dialect()}
	for i := range chunk {
		if !runArgs(&vals[i], &chunk[i], &times) {
			return false, nil
		}
	}
	var shared uint32
	varying := 0
	for c := range runColumns {
		same := true
		for i := 1; i < len(vals) && same; i++ {
			same = vals[i][c] == vals[0][c]
		}
		if same {
			shared |= 1 << c
		} else {
			varying++
		}
	}
	if runColumns+len(chunk)*varying > sqliteMaxVariables {
		return false, nil
	}
	args := make([]any, runColumns, runColumns+len(chunk)*varying)
	for c := range runColumns {
		if shared&(1<<c) != 0 {
			args[c] = vals[0][c]
		}
	}
	for i := range vals {
		for c := range runColumns {
			if shared&(1<<c) == 0 {
				args = append(args, vals[i][c])
			}
		}
	}
	start := time.Now()
	st, err := s.stmts.get(ctx, batchKey{kind: kind, rows: len(chunk), shared: shared})
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

// runArgs sets v to the values of r in runInsertColumns' order, as bun's
// SQLite dialect writes them: times as UTC text with microseconds, booleans
// as 1 and 0, nil pointers as NULL. It reports false for text bun would
// refuse (a NUL byte) or rewrite (invalid UTF-8).
func runArgs(v *runValues, r *runRow, times *timeText) bool {
	for _, t := range [...]string{r.FireID, r.Trigger, r.Status, r.Node, r.Output, r.Message} {
		if strings.IndexByte(t, 0) >= 0 || !utf8.ValidString(t) {
			return false
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
	*v = runValues{
		r.FireID, r.JobID, r.Trigger, r.Status, r.Node,
		times.of(r.ScheduledAt), times.ofPtr(r.DispatchedAt), times.ofPtr(r.StartedAt), times.ofPtr(r.FinishedAt),
		exit, r.Output, truncated, r.Message,
		int64(r.Attempt), int64(r.ShardIndex), int64(r.ShardTotal),
		times.of(r.CreatedAt), times.of(r.UpdatedAt),
	}
	return true
}

// timeText writes times as bun's SQLite dialect does (its AppendTime,
// without the quotes), remembering the last few: a batch's rows share most
// of their times.
type timeText struct {
	dialect bunschema.Dialect
	at      [4]time.Time
	text    [4]string
	n       int
	buf     []byte
}

func (tt *timeText) of(t time.Time) string {
	for i := range tt.at {
		if tt.text[i] != "" && tt.at[i].Equal(t) {
			return tt.text[i]
		}
	}
	tt.buf = tt.dialect.AppendTime(tt.buf[:0], t)
	s := strings.Trim(string(tt.buf), "'")
	i := tt.n % len(tt.at)
	tt.at[i], tt.text[i] = t, s
	tt.n++
	return s
}

// ofPtr is of for an optional time (nil is NULL).
func (tt *timeText) ofPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return tt.of(*t)
}
