package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// migrationsTable records applied migrations by version.
const migrationsTable = "cronix_schema_migrations"

// migrateLockWait bounds how long Open waits for another process that is
// migrating the same database.
const migrateLockWait = 60 * time.Second

// migrate applies the pending migrations of the store's dialect. It is
// idempotent and safe when several processes open the same database at
// once: they serialize on a lock (SQLite's write lock, a PostgreSQL
// advisory lock per schema, a MySQL named lock per database) and the later
// ones find nothing to do. On SQLite and PostgreSQL all pending migrations
// apply in one transaction; MySQL cannot roll back DDL, so there each
// migration is recorded right after it applies and migrations are written
// to be re-runnable.
func (s *Store) migrate(ctx context.Context) error {
	migs, err := schema.Load(s.dialect)
	if err != nil {
		return fmt.Errorf("store: load migrations: %w", err)
	}
	switch s.dialect {
	case schema.MySQL:
		return s.migrateMySQL(ctx, migs)
	default:
		return s.migrateTx(ctx, migs)
	}
}

// migrateTx runs every pending migration in one transaction (SQLite,
// PostgreSQL: DDL is transactional there).
func (s *Store) migrateTx(ctx context.Context, migs []schema.Migration) error {
	// On SQLite BeginTx issues BEGIN IMMEDIATE (_txlock=immediate), which
	// takes the database write lock before anything is read.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect == schema.Postgres {
		// One lock per schema, so databases sharing a server (tests with a
		// schema each) do not wait for one another.
		if _, err := tx.ExecContext(ctx,
			"SELECT pg_advisory_xact_lock(hashtext(coalesce(current_schema(), '') || '/cronix_migrate'))"); err != nil {
			return fmt.Errorf("store: migrate: lock: %w", err)
		}
	}
	if err := applyPending(ctx, tx, s.dialect, migs); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: migrate: commit: %w", err)
	}
	return nil
}

// migrateMySQL holds a named lock for the database on one connection while
// it applies the pending migrations, each recorded as soon as it is done.
func (s *Store) migrateMySQL(ctx context.Context, migs []schema.Migration) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: connect: %w", err)
	}
	defer conn.Close()
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return fmt.Errorf("store: migrate: current database: %w", err)
	}
	if !dbName.Valid || dbName.String == "" {
		return fmt.Errorf("store: migrate: the mysql dsn names no database")
	}
	// Lock names are limited to 64 characters: hash the database name.
	sum := sha256.Sum256([]byte(dbName.String))
	lockName := "cronix_migrate_" + hex.EncodeToString(sum[:16])
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lockName, int(migrateLockWait/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("store: migrate: lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("store: migrate: another process held the migration lock for %s", migrateLockWait)
	}
	defer func() {
		// Released even if ctx is done; the connection closing would too.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lockName)
	}()
	return applyPending(ctx, conn, s.dialect, migs)
}

// applyPending creates the bookkeeping table if needed and applies the
// migrations it does not list, in version order.
func applyPending(ctx context.Context, db bun.IConn, dialect string, migs []schema.Migration) error {
	if _, err := db.ExecContext(ctx, createMigrationsTable(dialect)); err != nil {
		return fmt.Errorf("store: migrate: create %s: %w", migrationsTable, err)
	}
	applied := make(map[int64]bool)
	rows, err := db.QueryContext(ctx, "SELECT version FROM "+migrationsTable)
	if err != nil {
		return fmt.Errorf("store: migrate: read %s: %w", migrationsTable, err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("store: migrate: read %s: %w", migrationsTable, err)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("store: migrate: read %s: %w", migrationsTable, err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: migrate: read %s: %w", migrationsTable, err)
	}
	for _, m := range migs {
		if applied[m.Version] {
			continue
		}
		for i, stmt := range m.Statements {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				if dialect != schema.Postgres && isAlreadyApplied(err) {
					continue // a re-run of a migration that crashed after this statement
				}
				return fmt.Errorf("store: migrate: %s/%s statement %d: %w", dialect, m.Name, i+1, err)
			}
		}
		if _, err := db.ExecContext(ctx,
			"INSERT INTO "+migrationsTable+" (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, utc(time.Now())); err != nil {
			return fmt.Errorf("store: migrate: record %s/%s: %w", dialect, m.Name, err)
		}
	}
	return nil
}

func createMigrationsTable(dialect string) string {
	ts := "TIMESTAMP"
	switch dialect {
	case schema.Postgres:
		ts = "TIMESTAMPTZ"
	case schema.MySQL:
		ts = "DATETIME(6)"
	}
	return "CREATE TABLE IF NOT EXISTS " + migrationsTable + " (" +
		"version BIGINT NOT NULL PRIMARY KEY, " +
		"name VARCHAR(255) NOT NULL, " +
		"applied_at " + ts + " NOT NULL)"
}
