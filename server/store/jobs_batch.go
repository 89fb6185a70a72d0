package store

import (
	"context"
	"fmt"

	schema "github.com/cronix/cronix/sql"
	"github.com/uptrace/bun"
)

// MaxJobBatch is the most jobs CreateJobsBy stores in one call.
const MaxJobBatch = 1000

// versionChunk bounds the rows of one multi-row job version or audit
// insert (10 columns each: far under every dialect's bind limit).
const versionChunk = 500

// JobBatchError is CreateJobsBy failing at one job of the batch (Index,
// counting from 0); nothing of the batch is stored. Err keeps its kind
// (errors.Is(err, ErrConflict) for a name taken in the group).
type JobBatchError struct {
	Index int
	Err   error
}

func (e *JobBatchError) Error() string { return fmt.Sprintf("job %d of the batch: %v", e.Index, e.Err) }
func (e *JobBatchError) Unwrap() error { return e.Err }

// CreateJobsBy stores new jobs as CreateJobBy does (revision 1, first
// version saved by savedBy), all in one transaction: every job or none.
// IDs, revisions and timestamps are written back into the jobs. A job that
// cannot be stored fails the batch with a *JobBatchError naming it.
func (s *Store) CreateJobsBy(ctx context.Context, jobs []*Job, savedBy string) error {
	if len(jobs) == 0 {
		return nil
	}
	if len(jobs) > MaxJobBatch {
		return fmt.Errorf("store: create %d jobs: at most %d per batch", len(jobs), MaxJobBatch)
	}
	t := now()
	cols := append(append([]string{}, jobWriteColumns...), "revision", "created_at", "updated_at")
	rows := make([]jobRow, len(jobs))
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		versions := make([]jobVersionRow, len(jobs))
		for i, j := range jobs {
			rows[i] = jobRowOf(j)
			row := &rows[i]
			row.Revision, row.CreatedAt, row.UpdatedAt = 1, t, t
			q := tx.NewInsert().Model(row).Column(cols...)
			if s.dialect != schema.MySQL {
				q = q.Returning("id")
			}
			res, err := q.Exec(ctx)
			if err != nil {
				return &JobBatchError{Index: i, Err: wrap(err, "create job %q", j.Name)}
			}
			if row.ID == 0 {
				if row.ID, err = res.LastInsertId(); err != nil {
					return &JobBatchError{Index: i, Err: wrap(err, "id of job %q", j.Name)}
				}
			}
			versions[i] = jobVersionRow{JobID: row.ID, Revision: 1, Name: row.Name, ScheduleType: row.ScheduleType,
				Schedule: row.Schedule, Timezone: row.Timezone, Handler: row.Handler, Params: row.Params,
				SavedAt: t, SavedBy: savedBy}
		}
		for start := 0; start < len(versions); start += versionChunk {
			chunk := versions[start:min(start+versionChunk, len(versions))]
			if _, err := tx.NewInsert().Model(&chunk).Column(jobVersionColumns...).Exec(ctx); err != nil {
				return wrap(err, "first versions of %d jobs", len(chunk))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, j := range jobs {
		j.ID, j.Revision, j.CreatedAt, j.UpdatedAt = rows[i].ID, 1, t, t
		j.Params = []byte(rows[i].Params)
	}
	return nil
}

// InsertAudits writes audit entries in one transaction (multi-row
// inserts): the entries of one batch request.
func (s *Store) InsertAudits(ctx context.Context, entries []*AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	t := now()
	rows := make([]auditRow, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			e.At = t
		}
		rows[i] = auditRow{At: utc(e.At), UserID: e.UserID, Username: e.Username, Address: e.Address, Action: e.Action,
			ObjectType: e.ObjectType, ObjectID: e.ObjectID, Diff: string(e.Diff)}
	}
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for start := 0; start < len(rows); start += versionChunk {
			chunk := rows[start:min(start+versionChunk, len(rows))]
			if _, err := tx.NewInsert().Model(&chunk).
				Column("at", "user_id", "username", "address", "action", "object_type", "object_id", "diff").Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "insert %d audit entries", len(entries))
}

// JobsByID returns the jobs of ids that exist, in id order, read in one
// query per 500 ids.
func (s *Store) JobsByID(ctx context.Context, ids []int64) ([]Job, error) {
	var out []Job
	for start := 0; start < len(ids); start += versionChunk {
		var rows []jobRow
		chunk := ids[start:min(start+versionChunk, len(ids))]
		if err := s.db.NewSelect().Model(&rows).Where("j.id IN (?)", bun.List(chunk)).Order("j.id ASC").Scan(ctx); err != nil {
			return nil, wrap(err, "read %d jobs", len(chunk))
		}
		for i := range rows {
			out = append(out, rows[i].domain())
		}
	}
	return out, nil
}

// enabledPage is how many jobs ForEnabledJobs reads per query.
const enabledPage = 2000

// ForEnabledJobs calls fn with every enabled job in id order, reading them
// a page at a time (keyset by id), so a caller keeping a slim copy of each
// never holds every full row at once. Each page is its own query: a job
// saved meanwhile may or may not be seen. fn's error stops the walk and
// is returned.
func (s *Store) ForEnabledJobs(ctx context.Context, fn func(j *Job) error) error {
	var after int64
	rows := make([]jobRow, 0, enabledPage)
	for {
		rows = rows[:0]
		if err := s.db.NewSelect().Model(&rows).Where("j.enabled = ?", true).Where("j.id > ?", after).
			Order("j.id ASC").Limit(enabledPage).Scan(ctx); err != nil {
			return wrap(err, "list enabled jobs after %d", after)
		}
		for i := range rows {
			j := rows[i].domain()
			if err := fn(&j); err != nil {
				return err
			}
		}
		if len(rows) < enabledPage {
			return nil
		}
		after = rows[len(rows)-1].ID
	}
}
