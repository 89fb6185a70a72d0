package store

import (
	"context"

	"github.com/uptrace/bun"
)

// maxChildLookup bounds the ids of one ChildJobIDs statement.
const maxChildLookup = 1000

// ChildJobIDs returns the child job ids of those of jobIDs that have any,
// by parent id: one statement per maxChildLookup ids, reading only the
// jobs with a non-empty child list (almost no job has one). Jobs that do
// not exist and jobs without children are not in the map. It runs after
// every result batch, on the writer connection of a SQLite file (onWriter).
func (s *Store) ChildJobIDs(ctx context.Context, jobIDs []int64) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	for len(jobIDs) > 0 {
		n := min(len(jobIDs), maxChildLookup)
		var rows []struct {
			ID       int64  `bun:"id"`
			Children string `bun:"child_job_ids"`
		}
		err := s.onWriter(ctx, func(db bun.IDB) error {
			return db.NewSelect().TableExpr("jobs AS j").Column("j.id", "j.child_job_ids").
				Where("j.id IN (?)", bun.List(jobIDs[:n])).
				Where("j.child_job_ids <> ''").
				Scan(ctx, &rows)
		})
		if err != nil {
			return nil, wrap(err, "child jobs of %d jobs", n)
		}
		for _, r := range rows {
			if ids := splitIDs(r.Children); len(ids) > 0 {
				out[r.ID] = ids
			}
		}
		jobIDs = jobIDs[n:]
	}
	return out, nil
}
