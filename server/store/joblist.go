package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// jobListKeeps is what the store keeps between jobs list requests on
// SQLite and PostgreSQL, where a list page's time is stepping through
// index entries or rows: the total counts every job the filter selects,
// and a page's OFFSET steps through every one before it (at 100,000 jobs
// in one group, about 10 ms of SQLite's CPU for each, 14 and 23 ms of
// PostgreSQL's, and a list page p99 of 40-80 ms on a loaded 2-core
// machine).
//
// It keeps, per filter, the total, and on SQLite, per filter and id order,
// anchors: the id at every anchorEvery-th position, so that a page starts
// from the anchor before it and steps through fewer than anchorEvery
// entries. Each of SQLite's indexes ends with the rowid (the id), so the
// step from one anchor to the next is a range of whichever index serves
// the filter's equality (or of the table, in rowid order). PostgreSQL
// could plan that step as a sort of all the filter's jobs, for each
// anchor; there the page takes its OFFSET, from the (group_name, id)
// index for a group.
//
// Both are kept with the jobs_stamp they are valid at. Triggers move the
// stamp on every write to jobs or job_groups (sql/*/0013), by any
// connection or process, in the writing transaction, and nothing kept is
// used at another stamp. Each statement (SQLite's WAL readers,
// PostgreSQL's READ COMMITTED) reads a snapshot at least as new as every
// commit before it started, so what was read between two reads of one
// stamp value saw exactly the jobs of that stamp:
//   - a list request reads the stamp once, before anything else;
//   - a total is counted after reading the stamp it is kept with (a write
//     in between makes the count newer than the stamp, which the next read
//     of the stamp then misses);
//   - anchors, read by one statement each and only as far as a page needs,
//     are kept only when the stamp read after the last one is theirs;
//   - a page read from anchors is used only when the stamp read after it
//     is the anchors' stamp, else the page is read again with OFFSET.
type jobListKeeps struct {
	every   int // anchorEvery; set by newStore
	mu      sync.Mutex
	totals  map[string]keptTotal
	anchors map[string]keptAnchors
}

type keptTotal struct {
	stamp int64
	total int
}

type keptAnchors struct {
	stamp int64
	// ids[i] is the id at position i*anchorEvery, in the order's
	// direction, read as far as a page needed; complete once past the end.
	ids      []int64
	complete bool
}

// anchorEvery is how many jobs apart the kept page anchors are
// (jobListKeeps.every; tests set less).
const anchorEvery = 1000

// maxJobListKeeps bounds each of jobListKeeps' maps: a filter's free-text
// search makes a key of its own. When one is full, it is emptied.
const maxJobListKeeps = 256

// jobListKey names the jobs f selects; ok is false when that depends on
// more than jobs and groups (the latest run's status), which the stamp
// does not follow, or when the store keeps nothing (MySQL: no stamp).
func (s *Store) jobListKey(f JobFilter) (key string, ok bool) {
	if s.dialect == schema.MySQL || f.LastStatus != "" {
		return "", false
	}
	var b strings.Builder
	if f.Scope == nil {
		b.WriteString("*")
	} else {
		for i, id := range f.Scope.GroupIDs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(id, 10))
		}
	}
	enabled := ""
	if f.Enabled != nil {
		enabled = strconv.FormatBool(*f.Enabled)
	}
	// Quoted, so that no value's content can be read as a separator.
	for _, v := range []string{f.Group, enabled, f.Handler, f.Author, f.NameLike, f.Search, f.ScheduleType} {
		b.WriteByte('|')
		b.WriteString(strconv.Quote(v))
	}
	return b.String(), true
}

// jobsStamp reads jobs_stamp (SQLite, PostgreSQL).
func (s *Store) jobsStamp(ctx context.Context) (int64, error) {
	var stamp int64
	if err := s.db.NewSelect().TableExpr("jobs_stamp").Column("stamp").Where("id = 1").Scan(ctx, &stamp); err != nil {
		return 0, wrap(err, "read jobs stamp")
	}
	return stamp, nil
}

// keepIn stores v under key in *m, emptying *m first when it is full.
// The caller holds jobListKeeps.mu.
func keepIn[V any](m *map[string]V, key string, v V) {
	if *m == nil || len(*m) >= maxJobListKeeps {
		*m = make(map[string]V)
	}
	(*m)[key] = v
}

// countJobs returns the total of the jobs list keyed key (see jobListKey),
// kept or counted by count; stamp is jobs_stamp, read before count runs.
// Key "" is always counted.
func (s *Store) countJobs(key string, stamp int64, count func() (int, error)) (int, error) {
	if key == "" {
		return count()
	}
	k := &s.jobList
	k.mu.Lock()
	kept, hit := k.totals[key]
	k.mu.Unlock()
	if hit && kept.stamp == stamp {
		return kept.total, nil
	}
	total, err := count()
	if err != nil {
		return 0, err
	}
	k.mu.Lock()
	keepIn(&k.totals, key, keptTotal{stamp: stamp, total: total})
	k.mu.Unlock()
	return total, nil
}

// anchored reports whether page p of f is read from anchors: on SQLite, in
// id order, past the first anchor.
func (s *Store) anchored(f JobFilter, p Page) bool {
	return s.dialect == schema.SQLite && p.PageSize > 0 && p.Offset() >= s.jobList.every &&
		(f.Sort == "" || f.Sort == SortIDAsc || f.Sort == SortIDDesc)
}

// anchoredPage reads page p of the jobs list keyed key (see jobListKey) in
// id order (desc: descending) from the anchor before it, with the anchors
// of jobs_stamp stamp (read before); selectIDs is the filter's query of
// j.id. ok is false when it could not be read that way (a write moved the
// stamp meanwhile, or the page is past the last anchor); the caller then
// reads it with OFFSET.
func (s *Store) anchoredPage(ctx context.Context, key string, stamp int64, desc bool, p Page,
	selectIDs func() *bun.SelectQuery, rows *[]jobRow,
) (ok bool, err error) {
	order, cmp := "j.id ASC", ">="
	if desc {
		order, cmp = "j.id DESC", "<="
	}
	key += "|" + order
	k := &s.jobList
	k.mu.Lock()
	kept, hit := k.anchors[key]
	k.mu.Unlock()
	if !hit || kept.stamp != stamp {
		kept = keptAnchors{stamp: stamp}
	}
	every := k.every
	i := p.Offset() / every
	if i >= len(kept.ids) && !kept.complete {
		// Anchors as far as this page, from the last one kept.
		more, ok, err := s.extendAnchors(ctx, kept, i, order, cmp, every, selectIDs)
		if err != nil || !ok {
			return false, err
		}
		kept = more
		k.mu.Lock()
		keepIn(&k.anchors, key, kept)
		k.mu.Unlock()
	}
	if i >= len(kept.ids) {
		return false, nil // past the end
	}
	ids := selectIDs().Where("j.id "+cmp+" ?", kept.ids[i]).Order(order).
		Limit(int64(p.PageSize)).Offset(int64(p.Offset() - i*every))
	if err := s.db.NewSelect().Model(rows).Where("j.id IN (?)", ids).Order(order).Scan(ctx); err != nil {
		return false, err
	}
	after, err := s.jobsStamp(ctx)
	if err != nil {
		return false, err
	}
	return after == kept.stamp, nil
}

// extendAnchors returns kept with anchors up to index upTo (or to the end
// of the list, then complete), each read by one statement stepping every
// jobs from the one before. ok is false when the jobs changed meanwhile
// (the stamp moved from kept's).
func (s *Store) extendAnchors(ctx context.Context, kept keptAnchors, upTo int, order, cmp string, every int,
	selectIDs func() *bun.SelectQuery,
) (more keptAnchors, ok bool, err error) {
	more = keptAnchors{stamp: kept.stamp, ids: slices.Clone(kept.ids)}
	after := strings.TrimSuffix(cmp, "=") // the next anchor is past the last one
	for len(more.ids) <= upTo {
		q := selectIDs().Order(order).Limit(1)
		if n := len(more.ids); n > 0 {
			q = q.Where("j.id "+after+" ?", more.ids[n-1]).Offset(int64(every - 1))
		}
		var id int64
		err := q.Scan(ctx, &id)
		if errors.Is(err, sql.ErrNoRows) {
			more.complete = true
			break
		}
		if err != nil {
			return keptAnchors{}, false, wrap(err, "jobs list anchors")
		}
		more.ids = append(more.ids, id)
	}
	now, err := s.jobsStamp(ctx)
	if err != nil {
		return keptAnchors{}, false, err
	}
	return more, now == kept.stamp, nil
}
