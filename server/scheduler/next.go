package scheduler

import (
	"time"

	"github.com/cronix/cronix/server/schedule"
)

// maxCatchUpSteps bounds the walk over missed fire times of one job.
const maxCatchUpSteps = 100_000

// lastDue returns the latest fire time of s in [first, now], where first
// (≤ now) is itself a fire time of s. It looks back from now over growing
// windows first, so a cursor days old on a per-second job costs a few
// dozen Next calls, not one per missed second.
func lastDue(s schedule.Schedule, first, now time.Time) time.Time {
	t := first
	for d := time.Second; ; d *= 2 {
		from := now.Add(-d)
		if !from.After(first) {
			break // the window reaches back to first: walk from there
		}
		if c := s.Next(from); !c.IsZero() && !c.After(now) {
			t = c // a fire in (from, now], after first
			break
		}
	}
	for range maxCatchUpSteps {
		n := s.Next(t)
		if n.IsZero() || n.After(now) {
			return t
		}
		t = n
	}
	return t
}

// startNext is a job's next fire when leadership starts: after its cursor,
// with every fire missed between the cursor and now collapsed into one due
// now at the latest missed time (misfire policy FIRE_ONCE_NOW); after now
// when the job has no cursor. Zero means never.
func startNext(s schedule.Schedule, cursor int64, hasCursor bool, now time.Time) time.Time {
	if !hasCursor {
		return s.Next(now)
	}
	next := s.Next(time.UnixMilli(cursor))
	if next.IsZero() || next.After(now) {
		return next
	}
	return lastDue(s, next, now)
}

// afterFire is a job's next fire after a fire at scheduled time fired: the
// first after both fired and the cursor. It may already be due.
func afterFire(s schedule.Schedule, fired time.Time, cursor int64, hasCursor bool) time.Time {
	ref := fired
	if hasCursor {
		if c := time.UnixMilli(cursor); c.After(ref) {
			ref = c
		}
	}
	return s.Next(ref)
}

// dueAt is the scheduled time to fire a due entry at now: next itself, or,
// when next is more than threshold late (the loop stalled), the latest
// fire time up to now — the missed ones in between collapse into it.
func dueAt(s schedule.Schedule, next, now time.Time, threshold time.Duration) time.Time {
	if !next.Before(now.Add(-threshold)) {
		return next
	}
	return lastDue(s, next, now)
}

// resetNext is the next fire of a job whose schedule changed or that was
// (re-)enabled: after now, and never at or before its cursor. Missed fires
// of the old schedule or of the disabled period do not fire.
func resetNext(s schedule.Schedule, cursor int64, hasCursor bool, now time.Time) time.Time {
	ref := now
	if hasCursor {
		if c := time.UnixMilli(cursor); c.After(ref) {
			ref = c
		}
	}
	return s.Next(ref)
}
