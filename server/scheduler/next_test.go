package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/schedule"
)

func mustParse(t *testing.T, expr string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(schedule.TypeCron, expr, "UTC", nil)
	require.NoError(t, err)
	return s
}

func TestStartNext(t *testing.T) {
	t.Parallel()
	now := t0.Add(500 * time.Millisecond)
	cases := []struct {
		name      string
		expr      string
		cursor    time.Time
		hasCursor bool
		want      time.Time
	}{
		{"no cursor: after now", "*/10 * * * * *", time.Time{}, false, t0.Add(10 * time.Second)},
		{"nothing missed", everySecond, t0, true, t0.Add(time.Second)},
		{"a day missed on a per-second job", everySecond, t0.Add(-24 * time.Hour), true, t0},
		{"a year missed on a per-second job", everySecond, t0.AddDate(-1, 0, 0), true, t0},
		{"hourly, one missed", "0 0 * * * *", t0.Add(-time.Hour), true, t0},
		{"daily, a week missed", "0 0 9 * * *", t0.AddDate(0, 0, -7), true, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
		{"yearly, nothing missed", "0 0 0 1 1 *", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), true,
			time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"sparse: every second of 09:00 only", "* 0 9 * * *", t0.AddDate(0, 0, -2), true,
			time.Date(2026, 3, 1, 9, 0, 59, 0, time.UTC)},
	}
	for _, c := range cases {
		s := mustParse(t, c.expr)
		start := time.Now()
		got := startNext(s, c.cursor.UnixMilli(), c.hasCursor, now)
		require.True(t, c.want.Equal(got), "%s: got %s want %s", c.name, got, c.want)
		require.Less(t, time.Since(start), time.Second, c.name)
		if c.hasCursor {
			require.True(t, got.After(c.cursor), "%s: fired at or before the cursor", c.name)
		}
	}
}

func TestDueAtAndAfterFire(t *testing.T) {
	t.Parallel()
	s := mustParse(t, everySecond)
	now := t0.Add(30 * time.Second)
	// Late by less than the threshold: fired as scheduled.
	sameTime(t, now.Add(-3*time.Second), dueAt(s, now.Add(-3*time.Second), now, 5*time.Second))
	// Later than that: collapsed to the latest due time.
	sameTime(t, now, dueAt(s, t0, now, 5*time.Second))
	// The next after a fire is after both the fire and the cursor.
	sameTime(t, t0.Add(time.Second), afterFire(s, t0, 0, false))
	sameTime(t, t0.Add(6*time.Second), afterFire(s, t0, t0.Add(5*time.Second).UnixMilli(), true))
	// A changed schedule starts after now and after the cursor.
	sameTime(t, now.Add(time.Second), resetNext(s, t0.UnixMilli(), true, now))
	sameTime(t, now.Add(11*time.Second), resetNext(s, now.Add(10*time.Second).UnixMilli(), true, now))
}

func sameTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.True(t, want.Equal(got), "got %s, want %s", got, want)
}
