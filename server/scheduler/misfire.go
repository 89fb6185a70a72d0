package scheduler

import (
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// DefaultMisfireMaxCatchUp bounds the missed fires a job fires (CATCH_UP) or
// records as skipped (DO_NOTHING) when its MisfireMaxCatchUp is 0.
const DefaultMisfireMaxCatchUp = 100

func maxCatchUp(j *jobSpec) int {
	if j.MisfireMaxCatchUp > 0 {
		return j.MisfireMaxCatchUp
	}
	return DefaultMisfireMaxCatchUp
}

// missedTimes returns the fire times of s in [first, now] (first, ≤ now,
// being itself a fire time of s), oldest first; when there are more than
// limit, only the latest limit of them, and truncated is true. It looks
// back from now over growing windows, so a days-old cursor on a per-second
// job costs about 2·limit Next calls, not one per missed second.
func missedTimes(s schedule.Schedule, first, now time.Time, limit int) (times []time.Time, truncated bool) {
	// walk collects the fire times after from (or from itself when
	// inclusive) up to now, keeping the latest limit.
	walk := func(from time.Time, inclusive bool) (ts []time.Time, n int) {
		t := from
		if !inclusive {
			t = s.Next(from)
		}
		for range maxCatchUpSteps {
			if t.IsZero() || t.After(now) {
				break
			}
			ts = append(ts, t)
			n++
			if len(ts) > 2*limit {
				ts = append(ts[:0], ts[len(ts)-limit:]...)
			}
			t = s.Next(t)
		}
		if len(ts) > limit {
			ts = ts[len(ts)-limit:]
		}
		return ts, n
	}
	for d := time.Second; ; d *= 2 {
		from := now.Add(-d)
		if !from.After(first) {
			ts, n := walk(first, true)
			return ts, n > len(ts)
		}
		if ts, n := walk(from, false); n >= limit {
			return ts, true // first, before the window, is missed too
		}
	}
}

// misfire turns the fires of e missed between first and now (the loop did
// not run, or stalled) into fires by the job's misfire policy:
//
//   - FIRE_ONCE_NOW (default): one fire at the latest missed time;
//   - CATCH_UP: every missed time, oldest first, at most MisfireMaxCatchUp
//     (0 → DefaultMisfireMaxCatchUp; beyond it the latest ones);
//   - DO_NOTHING: each missed time (at most MisfireMaxCatchUp, the latest)
//     recorded as a skipped run; only a latest time within
//     MisfireThreshold of now still fires.
//
// Every time is after the job's cursor (first is after it).
func (l *loop) misfire(e *entry, first, now time.Time) []*fire {
	j := &e.job
	switch j.MisfirePolicy {
	case cluster.MisfireCatchUp, cluster.MisfireDoNothing:
	default:
		return l.newFires(j, lastDue(e.sched, first, now), "", "", now)
	}
	times, truncated := missedTimes(e.sched, first, now, maxCatchUp(j))
	if truncated {
		l.log.Warn("more missed fires than the catch-up bound; keeping the latest",
			"job_id", j.ID, "policy", j.MisfirePolicy, "bound", maxCatchUp(j), "first_missed", first)
	}
	var fs []*fire
	if j.MisfirePolicy == cluster.MisfireCatchUp {
		for _, t := range times {
			fs = append(fs, l.newFires(j, t, "", "", now)...)
		}
		return fs
	}
	last := times[len(times)-1]
	onTime := !last.Before(now.Add(-l.cfg.MisfireThreshold))
	for i, t := range times {
		if onTime && i == len(times)-1 {
			fs = append(fs, l.newFires(j, t, "", "", now)...)
			continue
		}
		fs = append(fs, l.skippedFire(j, t, now))
	}
	return fs
}

// skippedFire records a missed fire of DO_NOTHING: a skipped run, not
// dispatched; it still advances the job's cursor.
func (l *loop) skippedFire(j *jobSpec, at, now time.Time) *fire {
	now = now.UTC()
	return &fire{run: store.Run{
		FireID:      cluster.FireID(j.ID, at),
		JobID:       j.ID,
		Trigger:     cluster.TriggerSchedule,
		Status:      cluster.StatusSkipped,
		ScheduledAt: at.UTC(),
		FinishedAt:  &now,
		Message:     "misfire: missed while no leader ran (misfire policy DO_NOTHING)",
	}}
}
