package scheduler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// dispatchOf reads the signed dispatch record of a fire on node.
func (h *harness) dispatchOf(node, fireID string) (cluster.Dispatch, bool) {
	h.t.Helper()
	b := h.get(h.keys.Run(node, fireID))
	if b == nil {
		return cluster.Dispatch{}, false
	}
	var d cluster.Dispatch
	require.NoError(h.t, json.Unmarshal(b, &d))
	return d, true
}

var startAt = []string{cluster.FeatureStartAt}

// newAheadHarness is a harness dispatching 400ms ahead with node n1, which
// holds fires until their StartAt.
func newAheadHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.ahead = 400 * time.Millisecond
	h.sched = h.newScheduler()
	h.addNodeWith("n1", "g", "127.0.0.1:1", startAt, "cmd")
	return h
}

// newAheadMinHarness is a harness dispatching up to 1s ahead, at least
// aheadMin, with node n1 (which holds fires) and job 1 every second.
func newAheadMinHarness(t *testing.T, aheadMin time.Duration) *harness {
	t.Helper()
	h := newHarness(t)
	h.ahead, h.aheadMin = time.Second, aheadMin
	h.sched = h.newScheduler()
	h.addNodeWith("n1", "g", "127.0.0.1:1", startAt, "cmd")
	h.store.putJob(job(1, everySecond))
	return h
}

// toFirstDispatchAhead advances the clock of a started loop to the
// dispatch of the fires of t0+1s (DispatchAhead before it) and waits for
// the loop to handle it; it returns t0+1s.
func (h *harness) toFirstDispatchAhead() time.Time {
	h.t.Helper()
	at1 := t0.Add(time.Second)
	h.waitArmed(at1.Add(-h.ahead))
	h.clock.Advance(time.Second - h.ahead)
	h.waitArmed(at1.Add(time.Second - h.ahead))
	return at1
}

// With DispatchAhead, a fire is recorded, dispatched (StartAt = its time)
// and its cursor committed DispatchAhead before its time; a node without
// the feature turns it off, so it never gets a fire early.
func TestDispatchAheadOnlyToNodesThatHold(t *testing.T) {
	t.Parallel()
	h := newAheadHarness(t)
	h.store.putJob(job(1, everySecond))
	h.start()

	at1 := t0.Add(time.Second)
	h.waitArmed(at1.Add(-h.ahead)) // woken ahead of the fire
	h.clock.Advance(time.Second - h.ahead)
	h.waitArmed(at1.Add(time.Second - h.ahead))
	d, ok := h.dispatchOf("n1", cluster.FireID(1, at1))
	require.True(t, ok, "the fire of t0+1s is dispatched at t0+0.6s")
	require.True(t, d.StartAt.Equal(at1), "StartAt %s", d.StartAt)
	require.True(t, d.ScheduledAt.Equal(at1))
	require.True(t, d.DispatchedAt.Before(at1))
	runs, _, _ := h.store.snapshot()
	require.Equal(t, cluster.StatusTriggered, runs[cluster.FireID(1, at1)].Status)
	require.Eventually(t, func() bool { c, ok := h.raft.Cursor(1); return ok && c == at1.UnixMilli() },
		10*time.Second, 5*time.Millisecond, "the cursor is committed with the batch, before the fire's time")

	// A node that cannot hold joins: every fire is dispatched at its time.
	rev := h.put(h.keys.Node("n2"), mustJSON(t, cluster.NodeInfo{UUID: "n2", Group: "g", IP: "127.0.0.1", Port: 1,
		Status: NodeOnline, Plugins: []cluster.PluginInfo{{Name: "cmd", Version: "1"}}}))
	require.Eventually(t, func() bool { return h.sched.seen.nodes.Load() >= rev }, 10*time.Second, time.Millisecond)
	at2 := at1.Add(time.Second)
	h.waitArmed(at2) // no longer woken ahead
	h.clock.Advance(at2.Sub(h.clock.Now()))
	h.waitArmed(at2.Add(time.Second))
	runs, _, _ = h.store.snapshot()
	r, ok := runs[cluster.FireID(1, at2)]
	require.True(t, ok)
	d, ok = h.dispatchOf(r.Node, r.FireID)
	require.True(t, ok)
	require.True(t, d.StartAt.IsZero(), "no StartAt while a node cannot hold fires")
	require.False(t, d.DispatchedAt.Before(at2))
}

// With DispatchAheadMin, a batch goes a third of a millisecond per fire
// of the previous batch ahead, at least DispatchAheadMin and at most
// DispatchAhead; without it, always DispatchAhead; with a node that cannot
// hold, never.
func TestAheadFollowsTheBatch(t *testing.T) {
	t.Parallel()
	l := &loop{holdOK: true, cfg: Config{DispatchAhead: time.Second, DispatchAheadMin: 500 * time.Millisecond}}
	for n, want := range map[int]time.Duration{0: 500 * time.Millisecond, 1500: 500 * time.Millisecond,
		2400: 800 * time.Millisecond, 3000: time.Second, 20000: time.Second} {
		l.lastBatch = n
		require.Equal(t, want, l.ahead(), "after a batch of %d", n)
	}

	// A slow write path brings the batch forward by itself plus half of
	// the size rule's ahead, up to twice DispatchAhead; the slowest of the
	// last aheadWrites counts.
	l.lastBatch = 3000
	l.noteWrite(900 * time.Millisecond)
	require.Equal(t, 1400*time.Millisecond, l.ahead(), "write path 900ms + 500ms")
	l.noteWrite(100 * time.Millisecond)
	require.Equal(t, 1400*time.Millisecond, l.ahead(), "the slowest of the last writes counts")
	l.noteWrite(3 * time.Second)
	require.Equal(t, 2*time.Second, l.ahead(), "at most twice DispatchAhead")
	for range aheadWrites {
		l.noteWrite(100 * time.Millisecond)
	}
	require.Equal(t, time.Second, l.ahead(), "fast writes again: the size rule")
	l.cfg = Config{DispatchAhead: 4 * time.Second, DispatchAheadMin: 2 * time.Second}
	l.noteWrite(6 * time.Second)
	require.Equal(t, MaxDispatchAhead, l.ahead(), "at most MaxDispatchAhead")
	l.cfg = Config{DispatchAhead: time.Second, DispatchAheadMin: 500 * time.Millisecond}

	l.cfg.DispatchAheadMin = 0
	require.Equal(t, time.Second, l.ahead())
	l.holdOK = false
	require.Zero(t, l.ahead())
}

// The loop wakes DispatchAheadMin before a fire when its batches are small.
func TestSmallBatchesGoDispatchAheadMinAhead(t *testing.T) {
	t.Parallel()
	h := newAheadMinHarness(t, 200*time.Millisecond)
	h.store.putJob(job(2, everySecond))
	h.start()

	at1 := t0.Add(time.Second)
	h.waitArmed(at1.Add(-200 * time.Millisecond))
	h.clock.Advance(800 * time.Millisecond)
	h.waitArmed(at1.Add(800 * time.Millisecond))
	for _, j := range []int64{1, 2} {
		d, ok := h.dispatchOf("n1", cluster.FireID(j, at1))
		require.True(t, ok, "job %d's fire of t0+1s is dispatched at t0+0.8s", j)
		require.True(t, d.StartAt.Equal(at1), "StartAt %s", d.StartAt)
	}
}

// A batch whose insert took long makes the next one start earlier: by the
// write path's duration plus half of the size rule's ahead.
func TestSlowWritesBringTheTickForward(t *testing.T) {
	t.Parallel()
	h := newAheadMinHarness(t, 500*time.Millisecond)
	h.store.inserting = func() { h.clock.Advance(300 * time.Millisecond) }
	h.start()

	at1 := t0.Add(time.Second)
	h.waitArmed(at1.Add(-500 * time.Millisecond)) // one fire: the size rule's DispatchAheadMin
	h.clock.Advance(500 * time.Millisecond)       // the insert takes 300ms more
	at2 := at1.Add(time.Second)
	h.waitArmed(at2.Add(-550 * time.Millisecond)) // 300ms + 500ms/2 before t0+2s, not 500ms
	_, ok := h.dispatchOf("n1", cluster.FireID(1, at1))
	require.True(t, ok)
}

// A job disabled after its next fire was dispatched ahead gets that fire
// cancelled: a signed cancel request (kill key with Cancel) for it.
func TestDisableCancelsTheFireDispatchedAhead(t *testing.T) {
	t.Parallel()
	h := newAheadHarness(t)
	h.store.putJob(job(1, everySecond))
	h.store.putJob(job(2, everySecond))
	h.start()
	at1 := h.toFirstDispatchAhead()
	fire1 := cluster.FireID(1, at1)
	_, ok := h.dispatchOf("n1", fire1)
	require.True(t, ok)

	j1 := job(1, everySecond)
	j1.Enabled, j1.Revision = false, 2
	h.store.putJob(j1)
	h.put(h.keys.JobSignal(1), "2")
	var req cluster.KillRequest
	require.Eventually(t, func() bool {
		b := h.get(h.keys.Kill("n1", fire1))
		return b != nil && json.Unmarshal(b, &req) == nil
	}, 10*time.Second, 5*time.Millisecond, "a cancel request for the fire dispatched ahead")
	require.Equal(t, fire1, req.FireID)
	require.Contains(t, req.Cancel, "disabled")
	// Job 2's fire is left alone.
	require.Nil(t, h.get(h.keys.Kill("n1", cluster.FireID(2, at1))))
}

// A new leader after a batch dispatched ahead does not fire its times
// again: the cursor was committed with the batch.
func TestTakeoverAfterADispatchAhead(t *testing.T) {
	t.Parallel()
	h := newAheadHarness(t)
	h.store.putJob(job(1, everySecond))
	h.start()
	at1 := h.toFirstDispatchAhead()
	require.NoError(t, h.stop())

	// The next term starts before at1: its first fire is the one after it.
	h.sched = h.newScheduler()
	h.start()
	h.waitArmed(at1.Add(time.Second - h.ahead))
	runs, calls, dups := h.store.snapshot()
	require.Zero(t, dups, "no fire recorded twice")
	require.Len(t, runs, 1)
	require.Equal(t, 1, calls)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// The fires dispatched ahead are forgotten once their time has come.
func TestPruneAheadForgetsPastFires(t *testing.T) {
	t.Parallel()
	l := &loop{aheadRuns: map[int64][]aheadRef{
		1: {{node: "n1", fireID: "1-1000", at: t0}, {node: "n1", fireID: "1-2000", at: t0.Add(time.Second)}},
		2: {{node: "n1", fireID: "2-1000", at: t0}},
	}}
	l.pruneAhead(t0)
	require.Equal(t, map[int64][]aheadRef{1: {{node: "n1", fireID: "1-2000", at: t0.Add(time.Second)}}}, l.aheadRuns)
}
