package store

import (
	"context"
	"time"
)

// CountRunsByJobStatus counts the runs scheduled in [from, to) by job and
// status with one direct GROUP BY over the runs table: what the daily
// report is checked against (tests only).
func (s *Store) CountRunsByJobStatus(ctx context.Context, from, to time.Time) (map[int64]map[string]int, error) {
	var rows []struct {
		JobID  int64  `bun:"job_id"`
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	err := s.db.NewSelect().TableExpr("runs AS r").ColumnExpr("r.job_id, r.status, COUNT(*) AS n").
		Where("r.scheduled_at >= ?", utc(from)).Where("r.scheduled_at < ?", utc(to)).
		GroupExpr("r.job_id, r.status").Scan(ctx, &rows)
	out := map[int64]map[string]int{}
	for _, r := range rows {
		if out[r.JobID] == nil {
			out[r.JobID] = map[string]int{}
		}
		out[r.JobID][r.Status] = r.N
	}
	return out, err
}

// CountRunsSQL counts the runs matching a WHERE clause (tests only).
func (s *Store) CountRunsSQL(ctx context.Context, where string, args ...any) (int, error) {
	n, err := s.db.NewSelect().TableExpr("runs AS r").Where(where, args...).Count(ctx)
	return int(n), err
}
