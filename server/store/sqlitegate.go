package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SQLite lets one connection write at a time. Left to itself, a connection
// that finds the write lock taken polls for it (busy_timeout: sleeps of 1 to
// 100 ms) and gives up with SQLITE_BUSY after the timeout. That is not
// fair: under a steady stream of writers (the leader's run inserts and
// results every second, eight API clients creating jobs) one writer can
// lose every poll for 5 s and fail, and a writer that finds the lock free
// right after a poll still sleeps out its interval.
//
// The writers of one process therefore queue on a writeGate first, in
// arrival order, and reach SQLite's lock one at a time: a write
// transaction holds the gate from BEGIN to COMMIT or ROLLBACK, a write
// outside a transaction for its statement (until its rows are closed).
// Reads on the pool never wait for it (WAL); the few hot reads that run on
// the writer connection (Store.onWriter) take it like a write. Other processes on the same file (HA
// replicas sharing SQLite) still meet this one through busy_timeout.

// writeGateWait bounds how long a writer waits for the gate, so that a
// writer that can never get it (one holding a transaction and writing
// outside it on another connection) fails with an error instead of
// hanging. The transactions ahead of a writer are short; this is minutes
// of them.
const writeGateWait = 2 * time.Minute

// errWriteGateTimeout is returned when a writer waited writeGateWait.
var errWriteGateTimeout = errors.New("database is locked: waited " + writeGateWait.String() + " for this process's other SQLite writers")

// writeGate is a FIFO lock: blocked channel senders are served in order.
type writeGate struct {
	ch      chan struct{}
	waiting atomic.Int64 // writers blocked in acquire (for tests)
}

func newWriteGate() *writeGate { return &writeGate{ch: make(chan struct{}, 1)} }

// A nil gate is one its users hold already (the writer connection's, see
// openedDB.writer): acquire and release do nothing.
func (g *writeGate) acquire(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g.ch <- struct{}{}:
		return nil
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	t := time.NewTimer(writeGateWait)
	defer t.Stop()
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the SQLite write lock: %w", ctx.Err())
	case <-t.C:
		return errWriteGateTimeout
	}
}

func (g *writeGate) release() {
	if g != nil {
		<-g.ch
	}
}

// gatedConnector opens SQLite connections whose writes pass the gate.
type gatedConnector struct {
	drv  driver.Driver
	dsn  string
	gate *writeGate
}

func (c *gatedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("store: the sqlite driver's connection (%T) lacks the context methods", conn)
	}
	return &gatedConn{sqliteConn: inner, gate: c.gate}, nil
}

func (c *gatedConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is what the store needs of a modernc.org/sqlite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// gatedConn is one connection; database/sql uses a connection from one
// goroutine at a time, so inTx needs no lock.
type gatedConn struct {
	sqliteConn
	gate *writeGate
	inTx bool
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.sqliteConn.BeginTx(ctx, opts)
	}
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	tx, err := c.sqliteConn.BeginTx(ctx, opts)
	if err != nil {
		c.gate.release()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{tx: tx, c: c}, nil
}

// gated runs a statement outside a transaction: through the gate when it
// may write.
func (c *gatedConn) gated(ctx context.Context, query string) (release func(), err error) {
	if c.inTx || !mayWrite(query) {
		return func() {}, nil
	}
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	return sync.OnceFunc(c.gate.release), nil
}

func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	release, err := c.gated(ctx, query)
	if err != nil {
		return nil, err
	}
	defer release()
	return c.sqliteConn.ExecContext(ctx, query, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	release, err := c.gated(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := c.sqliteConn.QueryContext(ctx, query, args)
	if err != nil {
		release()
		return nil, err
	}
	// An INSERT … RETURNING holds SQLite's write lock until its statement
	// is reset: keep the gate until the rows are closed.
	return &gatedRows{Rows: rows, release: release}, nil
}

func (c *gatedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	inner, ok := st.(sqliteStmt)
	if !ok {
		_ = st.Close()
		return nil, fmt.Errorf("store: the sqlite driver's statement (%T) lacks the context methods", st)
	}
	return &gatedStmt{sqliteStmt: inner, c: c, query: query}, nil
}

// gatedTx releases the gate when its transaction ends.
type gatedTx struct {
	tx   driver.Tx
	c    *gatedConn
	once sync.Once
}

func (t *gatedTx) Commit() error {
	defer t.end()
	return t.tx.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.end()
	return t.tx.Rollback()
}

func (t *gatedTx) end() {
	t.once.Do(func() {
		t.c.inTx = false
		t.c.gate.release()
	})
}

// gatedRows releases the gate of a writing query when closed.
type gatedRows struct {
	driver.Rows
	release func()
}

func (r *gatedRows) Close() error {
	defer r.release()
	return r.Rows.Close()
}

// sqliteStmt is what the store needs of a modernc.org/sqlite statement.
type sqliteStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// gatedStmt is a prepared statement of a gatedConn.
type gatedStmt struct {
	sqliteStmt
	c     *gatedConn
	query string
}

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	release, err := s.c.gated(ctx, s.query)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.sqliteStmt.ExecContext(ctx, args)
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	release, err := s.c.gated(ctx, s.query)
	if err != nil {
		return nil, err
	}
	rows, err := s.sqliteStmt.QueryContext(ctx, args)
	if err != nil {
		release()
		return nil, err
	}
	return &gatedRows{Rows: rows, release: release}, nil
}

// mayWrite reports whether a statement run outside a transaction may take
// SQLite's write lock: anything but a plain SELECT, EXPLAIN or read-only
// PRAGMA query (a PRAGMA that sets a value, a WITH … INSERT, DDL and
// BEGIN count as writes; when unsure, it is one).
func mayWrite(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	word := q
	if i := strings.IndexAny(q, " \t\r\n("); i >= 0 {
		word = q[:i]
	}
	switch strings.ToUpper(word) {
	case "SELECT", "EXPLAIN", "VALUES":
		return false
	case "PRAGMA":
		if strings.EqualFold(strings.TrimSpace(q), passiveCheckpoint) {
			return false // a passive checkpoint never takes the write lock (checkpoint.go)
		}
		return strings.Contains(q, "=") || strings.Contains(q, "(")
	case "WITH":
		u := strings.ToUpper(q)
		for _, w := range []string{"INSERT", "UPDATE", "DELETE", "REPLACE"} {
			if strings.Contains(u, w) {
				return true
			}
		}
		return false
	}
	return true
}
