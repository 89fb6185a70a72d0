package store

import (
	"context"
	"fmt"
	"sort"

	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
)

// maxIDsPerStatement bounds the fire ids listed in one IN (...) clause.
const maxIDsPerStatement = 1000

// RunsByFireIDs returns the runs recorded under the given fire ids, in fire
// id order; ids without a run are left out. It reads with one statement per
// 1000 ids (100 fire keys on SQLite: fireIDBatches); the trigger loop calls
// it for replayed fires, which are rare.
func (s *Store) RunsByFireIDs(ctx context.Context, fireIDs []string) ([]Run, error) {
	var out []Run
	for _, b := range s.fireIDBatches("r.", fireIDs, maxIDsPerStatement) {
		var rows []runRow
		if err := s.db.NewSelect().Model(&rows).Where(b.where, b.args...).Scan(ctx); err != nil {
			return nil, wrap(err, "runs by %d fire ids", len(b.ids))
		}
		for i := range rows {
			out = append(out, rows[i].domain())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FireID < out[j].FireID })
	return out, nil
}

// ActiveRunsNotOn returns at most limit runs that are not finished
// (triggered or running), are assigned to a node, and whose node is not
// one of liveNodes, oldest id first, only those with an id above afterID
// (keyset paging: pass the last id returned to read on). The lost-run
// monitor calls it with the nodes holding a registration key; the status
// index bounds the scan to unfinished runs.
func (s *Store) ActiveRunsNotOn(ctx context.Context, liveNodes []string, afterID int64, limit int) ([]Run, error) {
	if limit <= 0 {
		limit = maxIDsPerStatement
	}
	var rows []runRow
	q := s.db.NewSelect().Model(&rows).
		Where("r.status IN (?)", bun.List([]string{cluster.StatusTriggered, cluster.StatusRunning})).
		Where("r.node <> ''").
		Where("r.id > ?", afterID)
	if live := uniqueSorted(liveNodes); len(live) > 0 {
		q = q.Where("r.node NOT IN (?)", bun.List(live))
	}
	if err := q.Order("r.id ASC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, wrap(err, "list unfinished runs of nodes not live")
	}
	out := make([]Run, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// MarkLost moves the runs with the given fire ids that are not finished to
// status lost, with message msg and finished_at now; a terminal run is never
// changed. It returns how many runs it changed. One statement per batch of
// fireIDBatches (1000 ids), all in one transaction.
func (s *Store) MarkLost(ctx context.Context, fireIDs []string, msg string) (int, error) {
	batches := s.fireIDBatches("", fireIDs, maxIDsPerStatement)
	if len(batches) == 0 {
		return 0, nil
	}
	message, _ := cleanText(msg, maxMessageBytes)
	t := now()
	changed := 0
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		changed = 0
		for _, b := range batches {
			res, err := tx.NewUpdate().Model((*runRow)(nil)).
				Set("status = ?", cluster.StatusLost).
				Set("message = ?", message).
				Set("finished_at = ?", t).
				Set("updated_at = ?", t).
				Where(b.where, b.args...).
				Where("status NOT IN (" + terminalList + ")").
				Exec(ctx)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("rows affected: %w", err)
			}
			changed += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, wrap(err, "mark %d runs lost", len(fireIDs))
	}
	return changed, nil
}

func uniqueSorted(in []string) []string {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
