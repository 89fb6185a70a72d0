package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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
	return s.createJobs(ctx, jobs, savedBy, false)
}

// CreateJobsWithGroupsBy is CreateJobsBy that also creates, in the same
// transaction, every group the jobs name that does not exist yet (as
// EnsureGroup does, titled by its appname): a batch that fails leaves no
// new group behind either.
func (s *Store) CreateJobsWithGroupsBy(ctx context.Context, jobs []*Job, savedBy string) error {
	return s.createJobs(ctx, jobs, savedBy, true)
}

func (s *Store) createJobs(ctx context.Context, jobs []*Job, savedBy string, withGroups bool) error {
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
		if withGroups {
			if err := s.ensureJobGroups(ctx, tx, jobs, t); err != nil {
				return err
			}
		}
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

// scheduleColumns are the columns of a job that firing it needs: what
// ForEnabledJobs reads (not the description, author, alert addresses,
// child jobs or timestamps, which the trigger loop never uses).
var scheduleColumns = []string{
	"j.id", "j.name", "j.group_name", "j.schedule_type", "j.schedule", "j.timezone", "j.handler", "j.params",
	"j.timeout_seconds", "j.enabled", "j.route_strategy", "j.block_strategy", "j.misfire_policy",
	"j.misfire_max_catch_up", "j.retry_count", "j.retry_interval_seconds", "j.node_uuid", "j.revision",
}

// ForEnabledJobs calls fn with every enabled job in id order, reading them
// a window of ids at a time, so a caller keeping a slim copy of each never
// holds every full row at once. Only the columns firing needs are read
// (scheduleColumns): the other fields of the jobs fn sees are zero. Each
// window is its own query over a primary key range, with no ORDER BY or
// LIMIT (the page is sorted here): its plan cannot turn into a sort of
// every enabled job, which PostgreSQL chose for each page of "enabled AND
// id > ? ORDER BY id LIMIT n" with the statistics of a freshly filled
// table (2 s for 100,000 jobs instead of 0.3 s). The window adapts to the
// density of the ids. Jobs created after the walk began may or may not
// be seen. fn's error stops the walk and is returned, as does the end of
// ctx (fn may still see the rest of the window it was given).
func (s *Store) ForEnabledJobs(ctx context.Context, fn func(j *Job) error) error {
	var maxID int64
	if err := s.db.NewSelect().Model((*jobRow)(nil)).ColumnExpr("COALESCE(MAX(j.id), 0)").Scan(ctx, &maxID); err != nil {
		return wrap(err, "read the largest job id")
	}
	// The next window is read while fn takes the jobs of this one, so a
	// new leader's start-up overlaps the reads with parsing the schedules
	// (100,000 jobs on PostgreSQL, read and parsed: 660-765 ms serially,
	// 470-585 ms overlapped).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []jobRow, 1)
	read := make(chan error, 1)
	go func() {
		defer close(pages)
		read <- s.enabledWindows(ctx, maxID, pages)
	}()
	stop := func(err error) error {
		cancel()
		<-read // the reader sees the cancel (it never blocks on a full pages) and ends
		return err
	}
	for rows := range pages {
		if err := ctx.Err(); err != nil {
			return stop(err)
		}
		for i := range rows {
			j := rows[i].domain()
			if err := fn(&j); err != nil {
				return stop(err)
			}
		}
	}
	return <-read
}

// enabledWindows sends the enabled jobs with ids up to maxID to pages, one
// window of ids at a time in id order (see ForEnabledJobs), until ctx ends.
func (s *Store) enabledWindows(ctx context.Context, maxID int64, pages chan<- []jobRow) error {
	width := int64(enabledPage)
	for after := int64(0); after < maxID; {
		rows := make([]jobRow, 0, enabledPage)
		upto := min(after+width, maxID)
		if err := s.db.NewSelect().Model(&rows).Column(scheduleColumns...).
			Where("j.id > ?", after).Where("j.id <= ?", upto).Scan(ctx); err != nil {
			return wrap(err, "list enabled jobs %d..%d", after+1, upto)
		}
		slices.SortFunc(rows, func(a, b jobRow) int { return cmp.Compare(a.ID, b.ID) })
		n := len(rows)
		rows = slices.DeleteFunc(rows, func(r jobRow) bool { return !r.Enabled })
		select {
		case pages <- rows:
		case <-ctx.Done():
			return ctx.Err()
		}
		after = upto
		switch {
		case n < enabledPage/2 && width < 1<<40:
			width *= 2 // sparse ids: wider windows
		case n > 2*enabledPage && width > 1:
			width /= 2
		}
	}
	return nil
}

// JobRevision is a job's id, revision and schedule type: what the leader
// compares to its own copy to find changed jobs.
type JobRevision struct {
	ID           int64  `bun:"id"`
	Revision     int64  `bun:"revision"`
	ScheduleType string `bun:"schedule_type"`
}

// EnabledJobRevisions returns the id, revision and schedule type of every
// enabled job in id order: three columns, so relisting 100,000 jobs does
// not read 100,000 full rows.
func (s *Store) EnabledJobRevisions(ctx context.Context) ([]JobRevision, error) {
	var out []JobRevision
	if err := s.db.NewSelect().Model((*jobRow)(nil)).Column("j.id", "j.revision", "j.schedule_type").
		Where("j.enabled = ?", true).Order("j.id ASC").Scan(ctx, &out); err != nil {
		return nil, wrap(err, "list enabled job revisions")
	}
	return out, nil
}
