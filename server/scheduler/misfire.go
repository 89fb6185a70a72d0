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
// Every time is after the job's cursor (first is after it). changed
// reports whether the policy did anything but fire first once: it
// collapsed, caught up or skipped missed times (misfireTally).
func (l *loop) misfire(e *entry, first, now time.Time) (fs []*fire, changed bool) {
	j := &e.job
	switch j.MisfirePolicy {
	case cluster.MisfireCatchUp, cluster.MisfireDoNothing:
	default:
		last := lastDue(e.sched, first, now)
		return l.newFires(j, last, "", "", now), !last.Equal(first)
	}
	times, truncated := missedTimes(e.sched, first, now, maxCatchUp(j))
	if truncated {
		l.log.Warn("more missed fires than the catch-up bound; keeping the latest",
			"job_id", j.ID, "policy", j.MisfirePolicy, "bound", maxCatchUp(j), "first_missed", first)
	}
	if j.MisfirePolicy == cluster.MisfireCatchUp {
		for _, t := range times {
			fs = append(fs, l.newFires(j, t, "", "", now)...)
		}
		return fs, len(times) > 1 || truncated
	}
	last := times[len(times)-1]
	onTime := !last.Before(now.Add(-l.cfg.MisfireThreshold))
	for i, t := range times {
		if onTime && i == len(times)-1 {
			fs = append(fs, l.newFires(j, t, "", "", now)...)
			continue
		}
		fs = append(fs, l.skippedFire(j, t, now))
		changed = true
	}
	return fs, changed
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

// misfireTally counts one tick's jobs whose missed fires their misfire
// policy changed (misfire), so the tick reports them once (a metric per
// policy and one log line) however many jobs a stall made late:
// FIRE_ONCE_NOW in particular leaves no run for the times it collapses,
// and without this a second the leader reached too late would vanish
// without a trace.
type misfireTally struct {
	onceNow, catchUp, doNothing int
	oldest                      time.Time // the earliest first missed time
	jobID                       int64     // a job with that time
}

func (t *misfireTally) add(policy string, jobID int64, first time.Time) {
	switch policy {
	case cluster.MisfireCatchUp:
		t.catchUp++
	case cluster.MisfireDoNothing:
		t.doNothing++
	default:
		t.onceNow++
	}
	if t.oldest.IsZero() || first.Before(t.oldest) {
		t.oldest, t.jobID = first, jobID
	}
}

// report counts the tally in the metrics and logs it (nothing when empty).
func (t *misfireTally) report(l *loop, now time.Time) {
	if t.oldest.IsZero() {
		return
	}
	l.cfg.Metrics.Misfired(cluster.MisfireFireOnceNow, t.onceNow)
	l.cfg.Metrics.Misfired(cluster.MisfireCatchUp, t.catchUp)
	l.cfg.Metrics.Misfired(cluster.MisfireDoNothing, t.doNothing)
	l.log.Warn("missed fires went to their jobs' misfire policy (FIRE_ONCE_NOW: fired once at the latest "+
		"missed time, the earlier ones neither fired nor recorded; CATCH_UP: fired each; DO_NOTHING: recorded skipped)",
		"fire_once_now_jobs", t.onceNow, "catch_up_jobs", t.catchUp, "do_nothing_jobs", t.doNothing,
		"oldest_missed", t.oldest.UTC(), "late_by", now.Sub(t.oldest).Round(time.Millisecond),
		"job_id", t.jobID, "threshold", l.cfg.MisfireThreshold)
}
