// Package store is Cronix's SQL record (bun): users, API tokens, groups,
// jobs and runs, on SQLite, PostgreSQL and MySQL/MariaDB. Schema migrations
// live in the top-level sql/ directory and are applied by Open.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/cronix/cronix/cluster"
)

var errTODO = errors.New("store: not implemented yet")

// Store is the SQL record. It is safe for concurrent use.
type Store struct{}

// Open connects to dsn and applies pending migrations. DSN forms:
//
//	sqlite:///abs/path/cronix.db   or a bare file path (SQLite)
//	postgres://user@host:5432/db?sslmode=disable
//	mysql://user:pass@tcp(host:3306)/db?parseTime=true   (go-sql-driver DSN after "mysql://")
func Open(ctx context.Context, dsn string) (*Store, error) { return nil, errTODO }

// Close closes the database.
func (s *Store) Close() error { return nil }

// Dialect is "sqlite", "postgres" or "mysql".
func (s *Store) Dialect() string { return "" }

// --- users and tokens

// CreateUser inserts u (ID, CreatedAt, UpdatedAt are set). ErrConflict if the name exists.
func (s *Store) CreateUser(ctx context.Context, u *User) error { return errTODO }

// UserByName returns the user or ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (*User, error) { return nil, errTODO }

// CountUsers returns the number of users.
func (s *Store) CountUsers(ctx context.Context) (int, error) { return 0, errTODO }

// CreateToken stores an API session token by its SHA-256 hash (hex).
func (s *Store) CreateToken(ctx context.Context, userID int64, tokenHash string, expiresAt time.Time) error {
	return errTODO
}

// UserByToken returns the user owning an unexpired token hash, or ErrNotFound.
func (s *Store) UserByToken(ctx context.Context, tokenHash string, now time.Time) (*User, error) {
	return nil, errTODO
}

// --- groups

// EnsureGroup creates the group if no group has this appname; it returns the stored group.
func (s *Store) EnsureGroup(ctx context.Context, appName, title string) (*Group, error) {
	return nil, errTODO
}

// ListGroups returns every group ordered by appname.
func (s *Store) ListGroups(ctx context.Context) ([]Group, error) { return nil, errTODO }

// --- jobs

// CreateJob inserts j (sets ID, Revision=1, CreatedAt, UpdatedAt).
func (s *Store) CreateJob(ctx context.Context, j *Job) error { return errTODO }

// GetJob returns the job or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id int64) (*Job, error) { return nil, errTODO }

// UpdateJob overwrites the job's fields, bumps Revision and UpdatedAt (written back into j). ErrNotFound if absent.
func (s *Store) UpdateJob(ctx context.Context, j *Job) error { return errTODO }

// DeleteJob deletes the job and its runs. ErrNotFound if absent.
func (s *Store) DeleteJob(ctx context.Context, id int64) error { return errTODO }

// ListJobs returns a page of jobs ordered by id, and the total count.
func (s *Store) ListJobs(ctx context.Context, p Page) ([]Job, int, error) { return nil, 0, errTODO }

// EnabledJobs returns every enabled job.
func (s *Store) EnabledJobs(ctx context.Context) ([]Job, error) { return nil, errTODO }

// --- runs

// InsertRuns records fires in one batch (status as given, usually triggered).
// A run whose FireID already exists is left untouched. It returns the fire
// ids that were newly inserted.
func (s *Store) InsertRuns(ctx context.Context, runs []Run) (inserted []string, err error) {
	return nil, errTODO
}

// ApplyResults stores node reports in batches, idempotently by fire id: a run
// already in a terminal status is never changed; a result for an unknown
// fire id inserts the run; "running" never overwrites a terminal status.
func (s *Store) ApplyResults(ctx context.Context, results []cluster.RunResult) error { return errTODO }

// GetRun returns a run or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (*Run, error) { return nil, errTODO }

// RunByFireID returns a run or ErrNotFound.
func (s *Store) RunByFireID(ctx context.Context, fireID string) (*Run, error) { return nil, errTODO }

// ListRuns returns a page of a job's runs, newest scheduled first, and the total.
func (s *Store) ListRuns(ctx context.Context, jobID int64, p Page) ([]Run, int, error) {
	return nil, 0, errTODO
}
