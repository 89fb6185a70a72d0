package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/uptrace/bun/driver/pgdriver"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// MySQL server error numbers the store branches on.
const (
	mysqlDupFieldName    = 1060
	mysqlDupKeyName      = 1061
	mysqlDupEntry        = 1062
	mysqlCantDropKey     = 1091
	mysqlLockWaitTimeout = 1205
	mysqlDeadlock        = 1213
)

// isUniqueViolation reports whether err is a unique or primary key
// violation on any dialect.
func isUniqueViolation(err error) bool {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return pgErr.Field('C') == "23505"
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == mysqlDupEntry
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		switch liteErr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return true
		}
	}
	return false
}

// isSQLiteBusy reports whether err is SQLite's SQLITE_BUSY (any extended
// code).
func isSQLiteBusy(err error) bool {
	var liteErr *sqlite.Error
	return errors.As(err, &liteErr) && liteErr.Code()&0xff == sqlite3.SQLITE_BUSY
}

// isRetryable reports whether a transaction failed only because it lost a
// race with another one (deadlock, serialization failure) and may simply
// be run again.
func isRetryable(err error) bool {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		switch pgErr.Field('C') {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
		return false
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == mysqlDeadlock || myErr.Number == mysqlLockWaitTimeout
	}
	return false
}

// wrap adds what was being done to err and maps driver errors to the
// sentinel errors callers branch on.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict):
		return fmt.Errorf("store: %s: %w", what, err)
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	case isUniqueViolation(err):
		return fmt.Errorf("store: %s: %w: %w", what, ErrConflict, err)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// isAlreadyApplied reports whether a MySQL DDL statement failed only because
// the column or index it adds exists, or the one it drops does not: the
// statement ran before (MySQL DDL is not transactional, so a crashed
// migration may be re-run). On SQLite, which has no ADD COLUMN IF NOT
// EXISTS, the one such case is a column that exists: its migrations are
// transactional, so that is a migration applied but not recorded, as by a
// restored bookkeeping table.
func isAlreadyApplied(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == mysqlDupFieldName || myErr.Number == mysqlDupKeyName || myErr.Number == mysqlCantDropKey
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_ERROR && strings.Contains(liteErr.Error(), "duplicate column name")
	}
	return false
}
