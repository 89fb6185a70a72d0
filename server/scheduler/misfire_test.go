package scheduler

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/schedule"
)

func TestMisfireCatchUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	all := job(1, everySecond)
	all.MisfirePolicy = cluster.MisfireCatchUp
	bounded := job(2, everySecond)
	bounded.MisfirePolicy, bounded.MisfireMaxCatchUp = cluster.MisfireCatchUp, 3
	once := job(3, everySecond)
	once.MisfirePolicy = cluster.MisfireFireOnceNow
	h.store.putJob(all)
	h.store.putJob(bounded)
	h.store.putJob(once)
	require.NoError(t, h.raft.ApplyCursors(context.Background(), map[int64]int64{
		1: t0.UnixMilli(), 2: t0.UnixMilli(), 3: t0.UnixMilli(),
	}))
	h.clock.Advance(10*time.Second + 500*time.Millisecond) // leaderless until t0+10.5s
	h.start()
	h.waitArmed(t0.Add(11 * time.Second))

	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 1, calls, "every missed fire in one batch")
	for s := 1; s <= 10; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		require.Contains(t, runs, cluster.FireID(1, at), "CATCH_UP fires every missed time")
		require.Equal(t, cluster.StatusTriggered, runs[cluster.FireID(1, at)].Status)
		require.NotNil(t, h.get(h.keys.Run("n1", cluster.FireID(1, at))))
		if s >= 8 {
			require.Contains(t, runs, cluster.FireID(2, at), "bounded CATCH_UP fires the latest")
		} else {
			require.NotContains(t, runs, cluster.FireID(2, at))
		}
	}
	require.Contains(t, runs, cluster.FireID(3, t0.Add(10*time.Second)))
	require.Len(t, runs, 10+3+1)
	require.Equal(t, "2", h.misfires("CATCH_UP"))
	require.Equal(t, "1", h.misfires("FIRE_ONCE_NOW"))
	for _, id := range []int64{1, 2, 3} {
		c, _ := h.raft.Cursor(id)
		require.Equal(t, t0.Add(10*time.Second).UnixMilli(), c)
	}

	// Next fires on schedule; a new term re-fires nothing.
	h.clock.Advance(500 * time.Millisecond)
	h.waitArmed(t0.Add(12 * time.Second))
	require.NoError(t, h.stop())
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.waitArmed(t0.Add(12 * time.Second))
	runs, _, dups := h.store.snapshot()
	require.Zero(t, dups)
	require.Len(t, runs, 14+3)
}

func TestMisfireDoNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	hourly := job(1, "0 0 * * * *")
	hourly.MisfirePolicy, hourly.MisfireMaxCatchUp = cluster.MisfireDoNothing, 3
	h.store.putJob(hourly)
	sec := job(2, everySecond)
	sec.MisfirePolicy = cluster.MisfireDoNothing
	h.store.putJob(sec)
	require.NoError(t, h.raft.ApplyCursors(context.Background(), map[int64]int64{
		1: t0.Add(-5 * time.Hour).UnixMilli(), // 05:00 fired; 06:00 … 10:00 missed
		2: t0.UnixMilli(),
	}))
	h.clock.Advance(30 * time.Minute) // leaderless until 10:30
	h.start()
	h.waitArmed(t0.Add(30*time.Minute + time.Second))

	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 1, calls)
	for _, hr := range []int{8, 9, 10} {
		at := time.Date(2026, 3, 1, hr, 0, 0, 0, time.UTC)
		r, ok := runs[cluster.FireID(1, at)]
		require.True(t, ok, "missed %02d:00 recorded", hr)
		require.Equal(t, cluster.StatusSkipped, r.Status)
		require.Empty(t, r.Node)
		require.Nil(t, h.get(h.keys.Run("n1", r.FireID)), "a skipped fire is not dispatched")
	}
	require.NotContains(t, runs, cluster.FireID(1, t0.Add(-3*time.Hour)), "beyond the bound")
	c, _ := h.raft.Cursor(1)
	require.Equal(t, t0.UnixMilli(), c)
	// The per-second job: the 100 latest missed fires skipped, except the
	// one at now, which is on time.
	n := 0
	for id, r := range runs {
		if r.JobID == 2 {
			n++
			if r.ScheduledAt.Equal(t0.Add(30 * time.Minute)) {
				require.Equal(t, cluster.StatusTriggered, r.Status, id)
			} else {
				require.Equal(t, cluster.StatusSkipped, r.Status, id)
			}
		}
	}
	require.Equal(t, DefaultMisfireMaxCatchUp, n)
	require.Equal(t, "2", h.misfires("DO_NOTHING"))
	require.Equal(t, "0", h.misfires("FIRE_ONCE_NOW"))
	// The hourly job fires next at 11:00.
	require.True(t, h.clock.armedAt(t0.Add(30*time.Minute+time.Second)))
	h.clock.Advance(30 * time.Minute)
	require.Eventually(t, func() bool {
		runs, _, _ := h.store.snapshot()
		r, ok := runs[cluster.FireID(1, t0.Add(time.Hour))]
		return ok && r.Status == cluster.StatusTriggered
	}, 10*time.Second, time.Millisecond)
}

func TestMissedTimesBounded(t *testing.T) {
	t.Parallel()
	s := mustParse(t, everySecond)
	now := t0
	ts, trunc := missedTimes(s, t0.AddDate(0, 0, -3), now, 100)
	require.True(t, trunc)
	require.Len(t, ts, 100)
	require.True(t, ts[99].Equal(now))
	require.True(t, ts[0].Equal(now.Add(-99*time.Second)))
	ts, trunc = missedTimes(s, now.Add(-4*time.Second), now, 100)
	require.False(t, trunc)
	require.Len(t, ts, 5)
}

func TestFixedDelayNeverOverlaps(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.relist = 24 * time.Hour
	h.sched = h.newScheduler()
	h.addNode("n1", "g", "cmd")
	j := job(1, "5s")
	j.ScheduleType = schedule.TypeFixedDelay
	h.store.putJob(j)
	h.start()
	h.waitArmed(t0.Add(5 * time.Second)) // no cursor: delay after now
	h.clock.Advance(5 * time.Second)
	first := cluster.FireID(1, t0.Add(5*time.Second))
	require.Eventually(t, func() bool { return h.get(h.keys.Run("n1", first)) != nil }, 10*time.Second, time.Millisecond)

	// The run goes on for 20s: nothing fires meanwhile.
	h.clock.Advance(20 * time.Second)
	require.Never(t, func() bool {
		_, calls, _ := h.store.snapshot()
		return calls > 1
	}, 100*time.Millisecond, 5*time.Millisecond)

	// It ends at t0+25s (the node deletes its run key): next at t0+30s.
	rev := h.del(h.keys.Run("n1", first))
	h.waitSeen(seenRuns, rev)
	h.waitArmed(t0.Add(30 * time.Second))
	h.clock.Advance(5 * time.Second)
	second := cluster.FireID(1, t0.Add(30*time.Second))
	require.Eventually(t, func() bool { return h.get(h.keys.Run("n1", second)) != nil }, 10*time.Second, time.Millisecond)

	// A new term with the run still pending waits for it too.
	require.NoError(t, h.stop())
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.clock.Advance(time.Minute) // t0+90s
	require.Never(t, func() bool {
		_, calls, _ := h.store.snapshot()
		return calls > 2
	}, 100*time.Millisecond, 5*time.Millisecond)
	rev = h.del(h.keys.Run("n1", second))
	h.waitSeen(seenRuns, rev)
	h.waitArmed(t0.Add(95 * time.Second))
	h.clock.Advance(5 * time.Second)
	third := cluster.FireID(1, t0.Add(95*time.Second))
	require.Eventually(t, func() bool { return h.get(h.keys.Run("n1", third)) != nil }, 10*time.Second, time.Millisecond)
	runs, _, dups := h.store.snapshot()
	require.Zero(t, dups)
	require.Len(t, runs, 3)
}

func TestOnceAndNoneSchedules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	once := job(1, t0.Add(3*time.Second).Format(time.RFC3339))
	once.ScheduleType = schedule.TypeOnce
	h.store.putJob(once)
	none := job(2, "")
	none.ScheduleType = schedule.TypeNone
	h.store.putJob(none)
	rate := job(3, "2s")
	rate.ScheduleType = schedule.TypeFixedRate
	h.store.putJob(rate)
	h.store.putJob(job(4, everySecond)) // the metronome for h.step
	h.start()
	h.steps(5)
	runs, _, _ := h.store.snapshot()
	for id, r := range runs {
		if r.JobID == 4 {
			delete(runs, id)
		}
	}
	require.Contains(t, runs, cluster.FireID(1, t0.Add(3*time.Second)))
	require.Contains(t, runs, cluster.FireID(3, t0.Add(2*time.Second)))
	require.Contains(t, runs, cluster.FireID(3, t0.Add(4*time.Second)))
	require.Len(t, runs, 3, "once fires once, none never")

	// A new term, later: the once job stays done.
	require.NoError(t, h.stop())
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.steps(2)
	runs, _, dups := h.store.snapshot()
	require.Zero(t, dups)
	for _, r := range runs {
		if r.JobID == 1 || r.JobID == 2 {
			require.Equal(t, cluster.FireID(1, t0.Add(3*time.Second)), r.FireID)
		}
	}
}

// A batch whose commit takes a second or more logs which step held it (the
// fires due meanwhile were late); a quick one logs nothing, and a loop that
// stays slow logs once a minute.
func TestSlowCommitNamesItsStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	var inserts atomic.Int64
	h.store.inserting = func() { // under the store's lock
		if n := inserts.Add(1); n == 2 || n == 3 {
			h.clock.Advance(1500 * time.Millisecond)
		}
	}
	h.start()
	h.waitArmed(t0.Add(time.Second))
	h.clock.Advance(time.Second)
	h.waitArmed(t0.Add(2 * time.Second))
	require.NotContains(t, h.logs.String(), "commit was slow", "a quick commit")

	h.clock.Advance(time.Second)
	require.Eventually(t, func() bool { return strings.Contains(h.logs.String(), "trigger batch commit was slow") },
		10*time.Second, 5*time.Millisecond)
	require.Contains(t, h.logs.String(), "record_runs=1.5s")
	require.Contains(t, h.logs.String(), "fires=1")
	// The third insert (the fire of t0+3s, due while the second waited)
	// is slow too: within the minute, not logged again.
	h.waitArmed(t0.Add(6 * time.Second))
	require.GreaterOrEqual(t, inserts.Load(), int64(4), "the slow third insert and one after it")
	require.Equal(t, 1, strings.Count(h.logs.String(), "commit was slow"))
	require.NoError(t, h.stop())
}
