package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
)

// DayLayout is the layout of a report day (a UTC calendar day).
const DayLayout = "2006-01-02"

// DailyReport is one row of the daily report: the runs of one job whose
// scheduled time falls on one UTC day.
type DailyReport struct {
	Day     string // DayLayout
	JobID   int64
	JobName string
	Group   string
	// Runs by status; Unfinished counts triggered and running runs.
	Total, Success, Failed, Timeout, Killed, Lost, Skipped, Unfinished int
	// Lateness (scheduled -> started, scheduled fires that started) and
	// duration (started -> finished) percentiles in milliseconds, over
	// LatenessCount resp. DurationCount runs (0 when there were none).
	LatenessCount, LatenessP50, LatenessP99 int64
	DurationCount, DurationP50, DurationP99 int64
	// Final: the day is over and its row no longer changes.
	Final     bool
	UpdatedAt time.Time
}

type dailyReportRow struct {
	bun.BaseModel `bun:"table:daily_reports,alias:dr"`

	Day           string    `bun:"day,pk"`
	JobID         int64     `bun:"job_id,pk"`
	JobName       string    `bun:"job_name,notnull"`
	GroupName     string    `bun:"group_name,notnull"`
	Total         int       `bun:"runs_total,notnull"`
	Success       int       `bun:"runs_success,notnull"`
	Failed        int       `bun:"runs_failed,notnull"`
	Timeout       int       `bun:"runs_timeout,notnull"`
	Killed        int       `bun:"runs_killed,notnull"`
	Lost          int       `bun:"runs_lost,notnull"`
	Skipped       int       `bun:"runs_skipped,notnull"`
	Unfinished    int       `bun:"runs_unfinished,notnull"`
	LatenessCount int64     `bun:"lateness_count,notnull"`
	LatenessP50   int64     `bun:"lateness_p50_ms,notnull"`
	LatenessP99   int64     `bun:"lateness_p99_ms,notnull"`
	DurationCount int64     `bun:"duration_count,notnull"`
	DurationP50   int64     `bun:"duration_p50_ms,notnull"`
	DurationP99   int64     `bun:"duration_p99_ms,notnull"`
	Final         bool      `bun:"final,notnull"`
	UpdatedAt     time.Time `bun:"updated_at,notnull"`
}

func (r *dailyReportRow) domain() DailyReport {
	return DailyReport{
		Day: r.Day, JobID: r.JobID, JobName: r.JobName, Group: r.GroupName,
		Total: r.Total, Success: r.Success, Failed: r.Failed, Timeout: r.Timeout, Killed: r.Killed,
		Lost: r.Lost, Skipped: r.Skipped, Unfinished: r.Unfinished,
		LatenessCount: r.LatenessCount, LatenessP50: r.LatenessP50, LatenessP99: r.LatenessP99,
		DurationCount: r.DurationCount, DurationP50: r.DurationP50, DurationP99: r.DurationP99,
		Final: r.Final, UpdatedAt: utc(r.UpdatedAt),
	}
}

// ReportRun is the part of a run the daily report reads.
type ReportRun struct {
	ID          int64      `bun:"id"`
	JobID       int64      `bun:"job_id"`
	Trigger     string     `bun:"trigger"`
	Status      string     `bun:"status"`
	ScheduledAt time.Time  `bun:"scheduled_at"`
	StartedAt   *time.Time `bun:"started_at"`
	FinishedAt  *time.Time `bun:"finished_at"`
}

// RunKey is a position in the runs ordered by (scheduled_at, id).
type RunKey struct {
	ScheduledAt time.Time
	ID          int64
}

// ReportRunsPage returns up to limit runs scheduled in [after, to) and
// after the key after (in (scheduled_at, id) order), in that order: a
// keyset page served by runs_scheduled_at_id_idx.
func (s *Store) ReportRunsPage(ctx context.Context, after RunKey, to time.Time, limit int) ([]ReportRun, error) {
	var out []ReportRun
	q := s.db.NewSelect().TableExpr("runs AS r").
		Column(reportRunColumns...)
	err := keysetAfter(q, after).Where("r.scheduled_at < ?", utc(to)).
		OrderExpr("r.scheduled_at ASC, r.id ASC").Limit(int64(limit)).Scan(ctx, &out)
	if err != nil {
		return nil, wrap(err, "read runs for the report after %s", after.ScheduledAt.Format(time.RFC3339Nano))
	}
	return out, nil
}

// reportRunColumns are the columns a ReportRun reads (never the output).
var reportRunColumns = []string{"r.id", "r.job_id", "r.trigger", "r.status", "r.scheduled_at", "r.started_at", "r.finished_at"}

// MaxRunID returns the highest run id (0 when there are no runs).
func (s *Store) MaxRunID(ctx context.Context) (int64, error) {
	var id int64
	err := s.db.NewSelect().TableExpr("runs AS r").ColumnExpr("COALESCE(MAX(r.id), 0)").Scan(ctx, &id)
	if err != nil {
		return 0, wrap(err, "highest run id")
	}
	return id, nil
}

// ReportRunsAfterID returns up to limit runs with an id above after, of
// any day, in id order (a range of the primary key): the runs inserted
// since a run id was the highest.
func (s *Store) ReportRunsAfterID(ctx context.Context, after int64, limit int) ([]ReportRun, error) {
	var out []ReportRun
	err := s.db.NewSelect().TableExpr("runs AS r").
		Column(reportRunColumns...).
		Where("r.id > ?", after).OrderExpr("r.id ASC").Limit(int64(limit)).Scan(ctx, &out)
	if err != nil {
		return nil, wrap(err, "read runs for the report after id %d", after)
	}
	return out, nil
}

// ReportRunsByID returns the runs among ids that exist, in no particular
// order, reading reportInsertBatch ids per query.
func (s *Store) ReportRunsByID(ctx context.Context, ids []int64) ([]ReportRun, error) {
	out := make([]ReportRun, 0, len(ids))
	for lo := 0; lo < len(ids); lo += reportInsertBatch {
		var page []ReportRun
		err := s.db.NewSelect().TableExpr("runs AS r").
			Column(reportRunColumns...).
			Where("r.id IN (?)", bun.List(ids[lo:min(lo+reportInsertBatch, len(ids))])).Scan(ctx, &page)
		if err != nil {
			return nil, wrap(err, "read %d runs for the report by id", len(ids))
		}
		out = append(out, page...)
	}
	return out, nil
}

// OldestRunScheduledAt returns the earliest scheduled time of any run, or
// ErrNotFound when there are no runs.
func (s *Store) OldestRunScheduledAt(ctx context.Context) (time.Time, error) {
	var rows []ReportRun
	err := s.db.NewSelect().TableExpr("runs AS r").Column("r.id", "r.scheduled_at").
		OrderExpr("r.scheduled_at ASC, r.id ASC").Limit(1).Scan(ctx, &rows)
	if err != nil {
		return time.Time{}, wrap(err, "oldest run")
	}
	if len(rows) == 0 {
		return time.Time{}, ErrNotFound
	}
	return utc(rows[0].ScheduledAt), nil
}

// JobLabel is a job's name and group.
type JobLabel struct {
	Name, Group string
}

// JobLabels returns the name and group of the jobs among ids that exist,
// reading 500 ids per query.
func (s *Store) JobLabels(ctx context.Context, ids []int64) (map[int64]JobLabel, error) {
	out := make(map[int64]JobLabel, len(ids))
	for lo := 0; lo < len(ids); lo += reportInsertBatch {
		var rows []struct {
			ID        int64  `bun:"id"`
			Name      string `bun:"name"`
			GroupName string `bun:"group_name"`
		}
		chunk := ids[lo:min(lo+reportInsertBatch, len(ids))]
		err := s.db.NewSelect().TableExpr("jobs AS j").Column("j.id", "j.name", "j.group_name").
			Where("j.id IN (?)", bun.List(chunk)).Scan(ctx, &rows)
		if err != nil {
			return nil, wrap(err, "names of %d jobs", len(chunk))
		}
		for _, r := range rows {
			out[r.ID] = JobLabel{Name: r.Name, Group: r.GroupName}
		}
	}
	return out, nil
}

// reportInsertBatch bounds the rows of one INSERT (SQLite allows 32766
// bound values; a row has 20).
const reportInsertBatch = 500

// ReplaceDailyReports replaces the rows of day with rows, all marked final
// or not, in one transaction (inserted in batches).
func (s *Store) ReplaceDailyReports(ctx context.Context, day string, rows []DailyReport, final bool) error {
	t := now()
	recs := make([]dailyReportRow, len(rows))
	for i, r := range rows {
		recs[i] = dailyReportRow{
			Day: day, JobID: r.JobID, JobName: r.JobName, GroupName: r.Group,
			Total: r.Total, Success: r.Success, Failed: r.Failed, Timeout: r.Timeout, Killed: r.Killed,
			Lost: r.Lost, Skipped: r.Skipped, Unfinished: r.Unfinished,
			LatenessCount: r.LatenessCount, LatenessP50: r.LatenessP50, LatenessP99: r.LatenessP99,
			DurationCount: r.DurationCount, DurationP50: r.DurationP50, DurationP99: r.DurationP99,
			Final: final, UpdatedAt: t,
		}
	}
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().TableExpr("daily_reports").Where("day = ?", day).Exec(ctx); err != nil {
			return err
		}
		for lo := 0; lo < len(recs); lo += reportInsertBatch {
			batch := recs[lo:min(lo+reportInsertBatch, len(recs))]
			if _, err := tx.NewInsert().Model(&batch).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(err, "store daily report of %s (%d rows)", day, len(rows))
}

// DailyReportFilter selects daily report rows; zero fields match all.
type DailyReportFilter struct {
	// Scope, when non-nil, keeps only the rows of the groups it lists.
	Scope *Scope
	// From and To bound the day, both inclusive (DayLayout; "" = open).
	From, To string
	// Group is an exact group appname.
	Group string
}

// FindDailyReports returns a page of the report rows f selects, by day,
// group and job name, and how many it selects in all.
func (s *Store) FindDailyReports(ctx context.Context, f DailyReportFilter, p Page) ([]DailyReport, int, error) {
	var rows []dailyReportRow
	q := s.db.NewSelect().Model(&rows)
	if f.From != "" {
		q = q.Where("dr.day >= ?", f.From)
	}
	if f.To != "" {
		q = q.Where("dr.day <= ?", f.To)
	}
	if f.Group != "" {
		q = q.Where("dr.group_name = ?", f.Group)
	}
	if f.Scope != nil {
		if len(f.Scope.GroupIDs) == 0 {
			q = q.Where("1 = 0")
		} else {
			q = q.Where("dr.group_name IN (SELECT sg.appname FROM job_groups AS sg WHERE sg.id IN (?))",
				bun.List(f.Scope.GroupIDs))
		}
	}
	q = q.OrderExpr("dr.day ASC, dr.group_name ASC, dr.job_name ASC, dr.job_id ASC")
	total, err := paginate(q, p).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, wrap(err, "list daily reports")
	}
	out := make([]DailyReport, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, int(total), nil
}

// keysetAfter restricts q (runs aliased r) to the runs after key in
// (scheduled_at, id) order. The plain lower bound on scheduled_at lets every
// dialect's planner start the range scan of runs_scheduled_at_id_idx there.
func keysetAfter(q *bun.SelectQuery, after RunKey) *bun.SelectQuery {
	at := utc(after.ScheduledAt)
	return q.Where("r.scheduled_at >= ?", at).
		Where("(r.scheduled_at > ? OR r.id > ?)", at, after.ID)
}

// retentionPage reads up to limit runs scheduled before cutoff and after
// the key after, in (scheduled_at, id) order, and returns the ids of the
// terminal ones and the key of the last one read. The status is checked
// here, not in SQL: a status condition can lead a planner to the status
// index and a sort of every old run instead of walking
// runs_scheduled_at_id_idx.
func (s *Store) retentionPage(ctx context.Context, cutoff time.Time, after RunKey, limit int) (int, []int64, RunKey, error) {
	var rows []ReportRun
	q := s.db.NewSelect().TableExpr("runs AS r").Column("r.id", "r.status", "r.scheduled_at")
	err := keysetAfter(q, after).Where("r.scheduled_at < ?", utc(cutoff)).
		OrderExpr("r.scheduled_at ASC, r.id ASC").Limit(int64(limit)).Scan(ctx, &rows)
	if err != nil {
		return 0, nil, after, wrap(err, "select runs before %s", cutoff.Format(time.RFC3339))
	}
	ids := make([]int64, 0, len(rows))
	for _, r := range rows {
		if cluster.Terminal(r.Status) {
			ids = append(ids, r.ID)
		}
	}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		after = RunKey{ScheduledAt: utc(last.ScheduledAt), ID: last.ID}
	}
	return len(rows), ids, after, nil
}

// DeleteRunsBefore deletes the terminal runs among the next limit runs
// scheduled before cutoff after the key after (in (scheduled_at, id)
// order): one bounded SELECT and one DELETE by id, so that no statement
// touches more than limit rows. It returns how many runs it read (stop when
// less than limit), how many it deleted, and the key to pass next time.
func (s *Store) DeleteRunsBefore(ctx context.Context, cutoff time.Time, after RunKey, limit int) (read, deleted int, next RunKey, err error) {
	read, ids, next, err := s.retentionPage(ctx, cutoff, after, limit)
	if err != nil || len(ids) == 0 {
		return read, 0, next, err
	}
	res, err := s.db.NewDelete().TableExpr("runs").Where("id IN (?)", bun.List(ids)).Exec(ctx)
	if err != nil {
		return 0, 0, after, wrap(err, "delete %d runs before %s", len(ids), cutoff.Format(time.RFC3339))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, after, wrap(err, "delete runs: rows affected")
	}
	return read, int(n), next, nil
}

// ClearOutputBefore empties the output of the terminal runs among the next
// limit runs scheduled before cutoff after the key after. It returns how
// many runs it read (stop when less than limit), how many outputs it
// emptied, and the key to pass next time.
func (s *Store) ClearOutputBefore(ctx context.Context, cutoff time.Time, after RunKey, limit int) (read, cleared int, next RunKey, err error) {
	read, ids, next, err := s.retentionPage(ctx, cutoff, after, limit)
	if err != nil || len(ids) == 0 {
		return read, 0, next, err
	}
	res, err := s.db.NewUpdate().TableExpr("runs").Set("output = ''").
		Where("id IN (?)", bun.List(ids)).Where("output <> ''").Exec(ctx)
	if err != nil {
		return 0, 0, after, wrap(err, "clear output of %d runs", len(ids))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, after, wrap(err, "clear output: rows affected")
	}
	return read, int(n), next, nil
}
