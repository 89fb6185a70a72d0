package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	schema "github.com/cronix/cronix/sql"
)

// sqlitePragmas are added to a SQLite DSN unless it sets them itself:
// wait instead of failing while another connection writes, WAL so readers
// never block the writer, enforced foreign keys, and temporary files in
// memory. The last is for the statement journal: every multi-row upsert of
// a transaction (InsertRuns, ApplyResultsFinished) keeps the pages it
// changes in one so that the statement alone can be undone, and in a file
// that was an open(2), a write(2) per page and an unlink per statement. It
// is only read to undo a failed statement of a live connection; the commit
// and its durability are the WAL's, unchanged. A commit checkpoints only
// past walFallbackPages: the store's checkpointer does it beside the
// writers (checkpoint.go).
var sqlitePragmas = []struct{ name, value string }{
	{"busy_timeout", "busy_timeout(5000)"},
	{"journal_mode", "journal_mode(WAL)"},
	{"foreign_keys", "foreign_keys(1)"},
	{"temp_store", "temp_store(MEMORY)"},
	{"wal_autocheckpoint", fmt.Sprintf("wal_autocheckpoint(%d)", walFallbackPages)},
}

// openedDB is a database the store opened.
type openedDB struct {
	db      *bun.DB
	dialect string
	// gate is the write gate of a SQLite database's connections (nil
	// otherwise).
	gate *writeGate
	// writer, for a SQLite file, is the one connection the store's
	// transactions (inTx) write on, taking the gate before they ask for it
	// (nil otherwise: they use db). SQLite drops a connection's whole page
	// cache when it begins a transaction after another connection wrote;
	// transactions that took turns on the pool's connections then read
	// every page they touched from the file again (at 3,000 fires per
	// second, about a third of the run inserts' and results' time, rising
	// with the size of the runs table). On one connection, each keeps the
	// pages the previous one used.
	writer *bun.DB
}

// openDB turns a Cronix DSN into a bun.DB and names its dialect. It pings
// the server first: bun's MySQL dialect queries the server version while
// being built, without a context.
func openDB(ctx context.Context, dsn string) (*openedDB, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		connector, err := newPGConnector(dsn)
		if err != nil {
			return nil, err
		}
		sqldb := sql.OpenDB(connector)
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(8)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		if err := sqldb.PingContext(ctx); err != nil {
			_ = sqldb.Close()
			return nil, fmt.Errorf("store: connect to postgres: %w", err)
		}
		return &openedDB{db: bun.NewDB(sqldb, pgdialect.New()), dialect: schema.Postgres}, nil

	case strings.HasPrefix(dsn, "mysql://"):
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return nil, fmt.Errorf("store: parse mysql dsn: %w", err)
		}
		// Times are written as UTC wall clock into DATETIME and must come
		// back as UTC time.Time.
		cfg.ParseTime = true
		cfg.Loc = time.UTC
		// bun escapes backslashes in string literals, which a server
		// running with NO_BACKSLASH_ESCAPES would store doubled: drop that
		// mode for the session unless the DSN sets sql_mode itself.
		if _, ok := cfg.Params["sql_mode"]; !ok {
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params["sql_mode"] = "(SELECT REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', ''))"
		}
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("store: mysql connector: %w", err)
		}
		sqldb := sql.OpenDB(connector)
		sqldb.SetMaxOpenConns(32)
		sqldb.SetMaxIdleConns(8)
		sqldb.SetConnMaxLifetime(time.Hour)
		if err := sqldb.PingContext(ctx); err != nil {
			_ = sqldb.Close()
			return nil, fmt.Errorf("store: connect to mysql: %w", err)
		}
		return &openedDB{db: bun.NewDB(sqldb, mysqldialect.New(mysqldialect.WithTimeLocation("UTC"))), dialect: schema.MySQL}, nil

	default:
		path, memory, err := sqliteDSN(dsn)
		if err != nil {
			return nil, err
		}
		probe, err := sql.Open("sqlite", path)
		if err != nil {
			return nil, fmt.Errorf("store: open sqlite: %w", err)
		}
		drv := probe.Driver()
		_ = probe.Close() // it opened no connection: only its driver is used
		// Writers of this process queue for SQLite's one write lock in
		// order (sqlitegate.go) instead of polling for it.
		gate := newWriteGate()
		sqldb := sql.OpenDB(&gatedConnector{drv: drv, dsn: path, gate: gate})
		if memory {
			// Every connection to ":memory:" is its own database: keep one.
			sqldb.SetMaxOpenConns(1)
			sqldb.SetMaxIdleConns(1)
			sqldb.SetConnMaxIdleTime(0)
			sqldb.SetConnMaxLifetime(0)
		} else {
			// Writers queue on the gate, then take SQLite's lock (BEGIN
			// IMMEDIATE; busy_timeout against other processes); WAL lets
			// readers run beside them.
			sqldb.SetMaxOpenConns(8)
			sqldb.SetMaxIdleConns(8)
		}
		db := &openedDB{db: bun.NewDB(sqldb, sqlitedialect.New()), dialect: schema.SQLite, gate: gate}
		if !memory {
			// The store's transactions write on one connection of their
			// own (see openedDB.writer), holding the gate while they use it.
			w := sql.OpenDB(&gatedConnector{drv: drv, dsn: path})
			w.SetMaxOpenConns(1)
			w.SetMaxIdleConns(1)
			w.SetConnMaxIdleTime(0)
			w.SetConnMaxLifetime(0)
			db.writer = bun.NewDB(w, sqlitedialect.New())
		}
		return db, nil
	}
}

// newPGConnector wraps pgdriver.NewConnector, which panics on a DSN it
// cannot parse, into an error.
func newPGConnector(dsn string) (c *pgdriver.Connector, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: parse postgres dsn: %v", r)
		}
	}()
	return pgdriver.NewConnector(pgdriver.WithDSN(dsn)), nil
}

// sqliteDSN returns the modernc.org/sqlite DSN for a Cronix SQLite DSN:
// "sqlite:///abs/path.db", "sqlite://rel/path.db", "sqlite:path.db",
// "file:path.db" or a bare path, each optionally followed by "?" and driver
// parameters. It adds the default pragmas and _txlock=immediate so that a
// transaction takes the write lock up front (waiting up to busy_timeout)
// instead of failing with SQLITE_BUSY when it later tries to write.
func sqliteDSN(dsn string) (string, bool, error) {
	rest := dsn
	switch {
	case strings.HasPrefix(rest, "sqlite://"):
		rest = strings.TrimPrefix(rest, "sqlite://")
	case strings.HasPrefix(rest, "sqlite3://"):
		rest = strings.TrimPrefix(rest, "sqlite3://")
	case strings.HasPrefix(rest, "sqlite:"):
		rest = strings.TrimPrefix(rest, "sqlite:")
	}
	path, rawQuery, _ := strings.Cut(rest, "?")
	if strings.Contains(path, "://") && !strings.HasPrefix(path, "file:") {
		return "", false, fmt.Errorf("store: unsupported dsn scheme in %q (want sqlite://, postgres:// or mysql://)", dsn)
	}
	if path == "" {
		return "", false, fmt.Errorf("store: empty sqlite path in dsn %q", dsn)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", false, fmt.Errorf("store: parse sqlite dsn parameters: %w", err)
	}
	memory := path == ":memory:" || strings.Contains(path, "mode=memory")
	have := strings.ToLower(strings.Join(q["_pragma"], ","))
	for _, p := range sqlitePragmas {
		if memory && (p.name == "journal_mode" || p.name == "wal_autocheckpoint") {
			continue
		}
		if !strings.Contains(have, p.name) {
			q.Add("_pragma", p.value)
		}
	}
	if q.Get("_txlock") == "" {
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode(), memory, nil
}
