package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// JobCounts are how many jobs are enabled and disabled.
type JobCounts struct {
	Enabled  int
	Disabled int
}

// CountJobs counts the jobs of sc's groups (all jobs when sc is nil),
// enabled and disabled, in one query.
func (s *Store) CountJobs(ctx context.Context, sc *Scope) (JobCounts, error) {
	var rows []struct {
		Enabled bool `bun:"enabled"`
		N       int  `bun:"n"`
	}
	q := s.db.NewSelect().Model((*jobRow)(nil)).ColumnExpr("j.enabled AS enabled").ColumnExpr("COUNT(*) AS n").Group("j.enabled")
	if err := scopeJobsWhere(q, sc).Scan(ctx, &rows); err != nil {
		return JobCounts{}, wrap(err, "count jobs")
	}
	var c JobCounts
	for _, r := range rows {
		if r.Enabled {
			c.Enabled += r.N
		} else {
			c.Disabled += r.N
		}
	}
	return c, nil
}

// CountRunsByStatus counts the runs f selects (its Scope, JobID, Node and
// From/To; not its Status) by status, in one query. Statuses without runs
// are absent from the map.
func (s *Store) CountRunsByStatus(ctx context.Context, f RunFilter) (map[string]int, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	q := s.db.NewSelect().Model((*runRow)(nil)).ColumnExpr("r.status AS status").ColumnExpr("COUNT(*) AS n").Group("r.status")
	q = runFilterWhere(q, f)
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, wrap(err, "count runs by status")
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] += r.N
	}
	return out, nil
}

// LastRun is the latest run of a job (by scheduled time, then id: the run
// the job's run list shows first), without its output.
type LastRun struct {
	ID          int64
	JobID       int64
	Status      string
	ScheduledAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
}

// LastRuns returns the latest run of each of jobIDs that has run, keyed by
// job id, in one query: one index probe per job into
// runs (job_id, scheduled_at), the same order FindRuns and
// JobFilter.LastStatus use.
func (s *Store) LastRuns(ctx context.Context, jobIDs []int64) (map[int64]LastRun, error) {
	out := make(map[int64]LastRun, len(jobIDs))
	if len(jobIDs) == 0 {
		return out, nil
	}
	var rows []runRow
	err := s.db.NewSelect().Model(&rows).
		Column("r.id", "r.job_id", "r.status", "r.scheduled_at", "r.started_at", "r.finished_at").
		Where("r.id IN (SELECT (SELECT lr.id FROM runs AS lr WHERE lr.job_id = j.id"+
			" ORDER BY lr.scheduled_at DESC, lr.id DESC LIMIT 1) FROM jobs AS j WHERE j.id IN (?))", bun.List(jobIDs)).
		Scan(ctx)
	if err != nil {
		return nil, wrap(err, "last runs")
	}
	for _, r := range rows {
		out[r.JobID] = LastRun{ID: r.ID, JobID: r.JobID, Status: r.Status, ScheduledAt: r.ScheduledAt.UTC(),
			StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt)}
	}
	return out, nil
}
