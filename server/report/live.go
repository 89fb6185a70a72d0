package report

import (
	"context"
	"fmt"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// live is what the report keeps between the passes of one term, so that
// an open day is not read again in full every pass (at 500 runs a second
// that read grew by 30,000 runs a minute, all day).
//
// For every day from `from` on it counts the settled runs: those with an
// id up to base. A settled run that was terminal when read is folded into
// its job's aggregate and never read again; one that was not is pending,
// read again by id every pass until it is. This holds because a terminal
// run never changes (store.ApplyResults leaves it as it is), a run's day
// and job never change, and the runs of a day not final are never deleted
// (retention stops at the first open day). A pass therefore reads only
// the pending runs and the runs with an id above base, of any day; those
// above base are counted for this pass only.
//
// base moves, one pass late, to the highest run id seen when the previous
// pass began (next): on PostgreSQL and MySQL an id is taken when a row is
// inserted, so a run with a lower id than one already visible may still
// commit. Such a run that commits more than a pass later is left out of
// its open day, until the day is final and read again in full.
type live struct {
	from       time.Time // first day counted; earlier runs are ignored
	base, next int64
	days       map[time.Time]*liveDay
}

// liveDay is the settled part of one day.
type liveDay struct {
	folded  map[int64]*jobDay // job → its settled terminal runs
	pending map[int64]bool    // ids of settled runs not terminal when last read
}

// day returns the state of day, created empty.
func (l *live) day(day time.Time) *liveDay {
	d := l.days[day]
	if d == nil {
		d = &liveDay{folded: map[int64]*jobDay{}, pending: map[int64]bool{}}
		l.days[day] = d
	}
	return d
}

// dayRuns is the runs of one pass not settled, per day and job.
type dayRuns map[time.Time]map[int64]*jobDay

func (t dayRuns) add(day time.Time, r *store.ReportRun) {
	jobs := t[day]
	if jobs == nil {
		jobs = map[int64]*jobDay{}
		t[day] = jobs
	}
	jobOf(jobs, r.JobID).add(r)
}

// jobOf returns the aggregate of job in jobs, created empty.
func jobOf(jobs map[int64]*jobDay, job int64) *jobDay {
	a := jobs[job]
	if a == nil {
		a = &jobDay{}
		jobs[job] = a
	}
	return a
}

// settle counts a run read for the first time: settled (folded or pending)
// when its id is at most limit, else in this pass's runs only.
func (l *live) settle(r *store.ReportRun, limit int64, pass dayRuns) {
	day := dayStart(r.ScheduledAt)
	if day.Before(l.from) {
		return
	}
	if r.ID <= limit {
		d := l.day(day)
		if cluster.Terminal(r.Status) {
			jobOf(d.folded, r.JobID).add(r)
			return
		}
		d.pending[r.ID] = true
	}
	pass.add(day, r)
}

// recheck counts a pending run read again: folded once terminal.
func (l *live) recheck(r *store.ReportRun, pass dayRuns) {
	day := dayStart(r.ScheduledAt)
	d := l.days[day]
	if d == nil || !d.pending[r.ID] {
		return
	}
	if cluster.Terminal(r.Status) {
		delete(d.pending, r.ID)
		jobOf(d.folded, r.JobID).add(r)
		return
	}
	pass.add(day, r)
}

// finalDay forgets day and the days before it: it is final, and read in
// full.
func (l *live) finalDay(day time.Time) {
	for d := range l.days {
		if !d.After(day) {
			delete(l.days, d)
		}
	}
	if next := day.AddDate(0, 0, 1); next.After(l.from) {
		l.from = next
	}
}

// farFuture bounds the scan that builds the state: every run from its
// first day on.
const farFuture = 100 // years

// buildLive reads every run scheduled from the day from on and returns the
// state and this pass's runs not settled.
func (s *Service) buildLive(ctx context.Context, from time.Time) (*live, dayRuns, error) {
	top, err := s.cfg.Store.MaxRunID(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	l := &live{from: from, base: top, next: top, days: map[time.Time]*liveDay{}}
	pass := dayRuns{}
	after, end := store.RunKey{ScheduledAt: from}, from.AddDate(farFuture, 0, 0)
	for {
		runs, err := s.cfg.Store.ReportRunsPage(ctx, after, end, s.cfg.PageSize)
		if err != nil {
			return nil, nil, fmt.Errorf("report: from %s: %w", from.Format(store.DayLayout), err)
		}
		for i := range runs {
			l.settle(&runs[i], top, pass)
		}
		if len(runs) < s.cfg.PageSize {
			return l, pass, nil
		}
		last := runs[len(runs)-1]
		after = store.RunKey{ScheduledAt: last.ScheduledAt, ID: last.ID}
	}
}

// advance reads the pending runs and the runs above base, moves base to
// next and next to the highest id now, and returns this pass's runs not
// settled. On an error the state is partly advanced and must be dropped.
func (s *Service) advance(ctx context.Context, l *live) (dayRuns, error) {
	top, err := s.cfg.Store.MaxRunID(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	pass := dayRuns{}
	var ids []int64
	for _, d := range l.days {
		for id := range d.pending {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		runs, err := s.cfg.Store.ReportRunsByID(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		found := make(map[int64]bool, len(runs))
		for i := range runs {
			found[runs[i].ID] = true
			l.recheck(&runs[i], pass)
		}
		for _, d := range l.days {
			for id := range d.pending {
				if !found[id] {
					delete(d.pending, id) // gone: not counted, as a full read would not
				}
			}
		}
	}
	limit := l.next
	for after := l.base; ; {
		runs, err := s.cfg.Store.ReportRunsAfterID(ctx, after, s.cfg.PageSize)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		for i := range runs {
			l.settle(&runs[i], limit, pass)
		}
		if len(runs) < s.cfg.PageSize {
			break
		}
		after = runs[len(runs)-1].ID
	}
	l.base, l.next = limit, top
	return pass, nil
}

// liveReport writes the open days (not final, the last one today) from
// the state, building it when there is none or it starts after days[0].
func (s *Service) liveReport(ctx context.Context, days []time.Time) error {
	var pass dayRuns
	var err error
	if s.live == nil || days[0].Before(s.live.from) {
		s.live, pass, err = s.buildLive(ctx, days[0])
	} else {
		pass, err = s.advance(ctx, s.live)
	}
	if err != nil {
		s.live = nil
		return err
	}
	for _, day := range days {
		var folded map[int64]*jobDay
		if d := s.live.days[day]; d != nil {
			folded = d.folded
		}
		if err := s.writeDay(ctx, day, merged(folded, pass[day]), false); err != nil {
			return err
		}
	}
	return nil
}

// merged is a's and b's runs per job, without changing either.
func merged(a, b map[int64]*jobDay) map[int64]*jobDay {
	out := make(map[int64]*jobDay, max(len(a), len(b)))
	for id, x := range a {
		out[id] = x
	}
	for id, y := range b {
		if x, ok := out[id]; ok {
			out[id] = x.plus(y)
		} else {
			out[id] = y
		}
	}
	return out
}
