package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/store"
)

const everySecond = "*/1 * * * * *"

func TestSameInstantIsOneBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.addNode("n2", "g", "cmd", "shell")
	const jobs = 300
	for i := range jobs {
		h.store.putJob(job(int64(i+1), everySecond))
	}
	h.start()
	h.waitArmed(t0.Add(time.Second))
	// Start-up placed every job: 300 configs over 2 nodes.
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == jobs }, 10*time.Second, 5*time.Millisecond)
	txnsBefore := h.txns.Load()

	h.clock.Advance(time.Second)
	h.waitArmed(t0.Add(2 * time.Second))

	runs, calls, dups := h.store.snapshot()
	require.Equal(t, 1, calls, "one InsertRuns per tick")
	require.Zero(t, dups)
	require.Len(t, runs, jobs)
	require.Equal(t, int64((jobs+dispatch.DefaultMaxOps-1)/dispatch.DefaultMaxOps), h.txns.Load()-txnsBefore,
		"dispatch should take ceil(n/128) etcd txns")
	require.Equal(t, int64(1), h.cursors.applies.Load(), "one raft entry per tick")
	require.Equal(t, int64(jobs), h.count(h.keys.RunPrefix("n1"))+h.count(h.keys.RunPrefix("n2")))

	at := t0.Add(time.Second)
	for i := range jobs {
		id := int64(i + 1)
		c, ok := h.raft.Cursor(id)
		require.True(t, ok)
		require.Equal(t, at.UnixMilli(), c)
		r := runs[cluster.FireID(id, at)]
		require.Equal(t, cluster.StatusTriggered, r.Status)
		require.Equal(t, cluster.TriggerSchedule, r.Trigger)
		require.True(t, r.ScheduledAt.Equal(at))
		// The dispatched record is self-contained.
		var d cluster.Dispatch
		require.NoError(t, json.Unmarshal(h.get(h.keys.Run(r.Node, r.FireID)), &d))
		require.Equal(t, r.FireID, d.FireID)
		require.Equal(t, h.term, d.Term)
		require.Equal(t, id, d.Job.JobID)
		require.Equal(t, "cmd", d.Job.Handler)
		require.Equal(t, 30, d.Job.TimeoutSeconds)
		require.JSONEq(t, `{"cmd":"true"}`, string(d.Job.Params))
		// The job is placed on the node its fires go to.
		require.NotNil(t, h.get(h.keys.Job(r.Node, id)))
	}
}

func TestRestartDoesNotRefire(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.store.putJob(job(2, "*/2 * * * * *"))
	h.start()
	h.step() // t0+1: job 1
	h.step() // t0+2: jobs 1 and 2
	require.NoError(t, h.stop())
	_, calls, _ := h.store.snapshot()
	require.Equal(t, 2, calls)

	// Same cursors, same time: a new loop (a new term's, reloading
	// everything) fires nothing until the next scheduled time.
	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.waitArmed(t0.Add(3 * time.Second))
	_, calls, _ = h.store.snapshot()
	require.Equal(t, 2, calls, "restart re-fired")

	// Half a second later, again: still nothing (t0+2 is at the cursor).
	require.NoError(t, h.stop())
	h.clock.Advance(500 * time.Millisecond)
	h.sched = h.newScheduler()
	h.start()
	h.waitArmed(t0.Add(3 * time.Second))
	h.clock.Advance(500 * time.Millisecond)
	h.waitArmed(t0.Add(4 * time.Second))
	h.step() // t0+4

	runs, calls, dups := h.store.snapshot()
	require.Zero(t, dups, "a fire id was recorded twice")
	require.Equal(t, 4, calls)
	want := []string{
		cluster.FireID(1, t0.Add(1*time.Second)), cluster.FireID(1, t0.Add(2*time.Second)),
		cluster.FireID(2, t0.Add(2*time.Second)), cluster.FireID(1, t0.Add(3*time.Second)),
		cluster.FireID(1, t0.Add(4*time.Second)), cluster.FireID(2, t0.Add(4*time.Second)),
	}
	require.Len(t, runs, len(want))
	for _, id := range want {
		require.Contains(t, runs, id)
	}
	require.Equal(t, int64(len(want)), h.count(h.keys.RunPrefix("n1")))
}

func TestMissedIntervalFiresOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))      // cursor at t0: 10 fires missed
	h.store.putJob(job(2, "0 0 * * * *"))    // hourly, cursor at 09:00: 10:00 missed
	h.store.putJob(job(3, everySecond))      // cursor at now: nothing missed
	h.store.putJob(job(4, "*/10 * * * * *")) // no cursor: first fire after now
	h.store.putJob(job(5, "0 0 0 1 1 * "))   // yearly, cursor this year: nothing missed
	require.NoError(t, h.raft.ApplyCursors(context.Background(), map[int64]int64{
		1: t0.UnixMilli(),
		2: t0.Add(-time.Hour).UnixMilli(),
		3: t0.Add(10 * time.Second).UnixMilli(),
		5: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(),
	}))
	h.clock.Advance(10*time.Second + 500*time.Millisecond) // leaderless until t0+10.5s
	h.start()
	h.waitArmed(t0.Add(11 * time.Second))

	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 1, calls)
	require.Len(t, runs, 2)
	require.Contains(t, runs, cluster.FireID(1, t0.Add(10*time.Second)), "latest missed time of job 1")
	require.Contains(t, runs, cluster.FireID(2, t0), "the missed 10:00 of job 2")
	require.Equal(t, "1", h.misfires("FIRE_ONCE_NOW"), "job 1's collapsed times; job 2 missed one time only")
	c, _ := h.raft.Cursor(1)
	require.Equal(t, t0.Add(10*time.Second).UnixMilli(), c)

	h.clock.Advance(500 * time.Millisecond) // t0+11
	h.waitArmed(t0.Add(12 * time.Second))
	runs, _, dups := h.store.snapshot()
	require.Zero(t, dups)
	require.Len(t, runs, 4)
	require.Contains(t, runs, cluster.FireID(1, t0.Add(11*time.Second)))
	require.Contains(t, runs, cluster.FireID(3, t0.Add(11*time.Second)))
}

func TestStalledLoopCollapsesMisfires(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.start()
	h.step() // t0+1
	// The loop sleeps through 20 s (e.g. the process was stopped): more than
	// the misfire threshold, so it fires once for t0+21, not 20 times.
	h.clock.Advance(20 * time.Second)
	h.waitArmed(t0.Add(22 * time.Second))
	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 2, calls)
	require.Len(t, runs, 2)
	require.Contains(t, runs, cluster.FireID(1, t0.Add(21*time.Second)))
	require.Equal(t, "1", h.misfires("FIRE_ONCE_NOW"), "the collapsed times are counted")
}

func TestSignalUpdatesJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.store.putJob(job(2, everySecond))
	h.start()
	require.Eventually(t, func() bool { return h.count(h.keys.JobPrefix("n1")) == 2 }, 10*time.Second, 5*time.Millisecond)
	h.step() // both fire at t0+1

	// Disable job 1: its heap entry and placement go away.
	j1 := job(1, everySecond)
	j1.Enabled, j1.Revision = false, 2
	h.store.putJob(j1)
	_, err := h.cli.Put(ctx, h.keys.JobSignal(1), "2")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(h.keys.Job("n1", 1)) == nil }, 10*time.Second, 5*time.Millisecond)

	// Change job 2's handler params: the placement is republished.
	j2 := job(2, everySecond)
	j2.Params, j2.Revision = json.RawMessage(`{"cmd":"false"}`), 2
	h.store.putJob(j2)
	_, err = h.cli.Put(ctx, h.keys.JobSignal(2), "2")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var jc cluster.JobConfig
		return json.Unmarshal(h.get(h.keys.Job("n1", 2)), &jc) == nil && jc.Revision == 2
	}, 10*time.Second, 5*time.Millisecond)

	h.step() // t0+2: job 2 only
	// The tick's batch may still be committing when the next timer is armed.
	require.Eventually(t, func() bool {
		runs, _, _ := h.store.snapshot()
		_, ok := runs[cluster.FireID(2, t0.Add(2*time.Second))]
		return ok
	}, 10*time.Second, 5*time.Millisecond, "job 2 fires at t0+2")
	runs, _, _ := h.store.snapshot()
	require.NotContains(t, runs, cluster.FireID(1, t0.Add(2*time.Second)))
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal(h.get(h.keys.Run("n1", cluster.FireID(2, t0.Add(2*time.Second)))), &d))
	require.JSONEq(t, `{"cmd":"false"}`, string(d.Job.Params))

	// Delete job 2 (the API removes the signal key with the job).
	h.store.deleteJob(2)
	_, err = h.cli.Delete(ctx, h.keys.JobSignal(2))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 0 }, 10*time.Second, 5*time.Millisecond)
	// Nothing is scheduled any more: the loop only waits for its relist.
	require.Eventually(t, func() bool { return !h.clock.armedAt(t0.Add(3 * time.Second)) }, 10*time.Second, time.Millisecond)
	require.True(t, h.clock.armedAt(t0.Add(DefaultRelistInterval)))

	// Re-enable job 1: it fires first after now (no catch-up of the
	// disabled period).
	j1.Enabled, j1.Revision = true, 3
	h.store.putJob(j1)
	_, err = h.cli.Put(ctx, h.keys.JobSignal(1), "3")
	require.NoError(t, err)
	h.step() // t0+3
	runs, calls, dups := h.store.snapshot()
	require.Zero(t, dups)
	require.Equal(t, 3, calls)
	require.Contains(t, runs, cluster.FireID(1, t0.Add(3*time.Second)))
	require.Len(t, runs, 4)
}

func TestOnceRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.addNode("n2", "g", "cmd")
	const yearly = "0 0 0 1 1 *"
	h.store.putJob(job(1, yearly))
	off := job(2, yearly)
	off.Enabled = false // manual runs of a disabled job still fire
	h.store.putJob(off)

	// A request present before the loop starts is handled at start.
	before, err := h.cli.Put(ctx, h.keys.Once(2), `{"node":"n2","requested_by":"alice"}`)
	require.NoError(t, err)
	h.start()
	require.Eventually(t, func() bool { return h.get(h.keys.Once(2)) == nil }, 10*time.Second, 5*time.Millisecond)

	put, err := h.cli.Put(ctx, h.keys.Once(1), `{"node":""}`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(h.keys.Once(1)) == nil }, 10*time.Second, 5*time.Millisecond)

	runs, calls, _ := h.store.snapshot()
	require.Equal(t, 2, calls)
	require.Len(t, runs, 2)
	r2 := runs[cluster.ManualFireID(2, before.Header.Revision)]
	require.Equal(t, cluster.TriggerManual, r2.Trigger)
	require.Equal(t, "n2", r2.Node)
	r1 := runs[cluster.ManualFireID(1, put.Header.Revision)]
	require.Equal(t, cluster.TriggerManual, r1.Trigger)
	require.Equal(t, cluster.StatusTriggered, r1.Status)
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal(h.get(h.keys.Run(r1.Node, r1.FireID)), &d))
	require.Equal(t, cluster.TriggerManual, d.Trigger)
	require.True(t, d.ScheduledAt.Equal(t0))
	require.Zero(t, h.cursors.applies.Load(), "manual fires do not move cursors")

	// A params override replaces the job's params in this fire's dispatch only.
	put, err = h.cli.Put(ctx, h.keys.Once(1), `{"node":"n1","params":{"argv":["echo","override"]}}`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(h.keys.Once(1)) == nil }, 10*time.Second, 5*time.Millisecond)
	runs, _, _ = h.store.snapshot()
	ro := runs[cluster.ManualFireID(1, put.Header.Revision)]
	var od cluster.Dispatch
	require.NoError(t, json.Unmarshal(h.get(h.keys.Run(ro.Node, ro.FireID)), &od))
	require.JSONEq(t, `{"argv":["echo","override"]}`, string(od.Job.Params))
	require.NotEqual(t, string(od.Job.Params), string(d.Job.Params), "the scheduled config keeps the job's params")

	// A request naming a node that is not live fails the run, visibly.
	put, err = h.cli.Put(ctx, h.keys.Once(1), `{"node":"gone"}`)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(h.keys.Once(1)) == nil }, 10*time.Second, 5*time.Millisecond)
	runs, _, _ = h.store.snapshot()
	r := runs[cluster.ManualFireID(1, put.Header.Revision)]
	require.Equal(t, cluster.StatusFailed, r.Status)
	require.Contains(t, r.Message, "gone is not live")
	require.Equal(t, int64(3), h.count(h.keys.RunPrefix("n1"))+h.count(h.keys.RunPrefix("n2")))
}

func TestNoEligibleNodeFailsRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "shell") // right group, wrong handler
	h.addNode("n2", "other", "cmd")
	h.store.putJob(job(1, everySecond))
	h.start()
	h.step()
	runs, _, _ := h.store.snapshot()
	r := runs[cluster.FireID(1, t0.Add(time.Second))]
	require.Equal(t, cluster.StatusFailed, r.Status)
	require.Equal(t, `no live node of group "g" offers handler "cmd"`, r.Message)
	require.NotNil(t, r.FinishedAt)
	require.Zero(t, h.count(h.keys.RunPrefix("n1"))+h.count(h.keys.RunPrefix("n2")))
	c, ok := h.raft.Cursor(1)
	require.True(t, ok, "a failed fire still advances the cursor")
	require.Equal(t, t0.Add(time.Second).UnixMilli(), c)

	// A node offering the handler joins: the next fire goes to it.
	h.addNode("n3", "g", "cmd")
	require.Eventually(t, func() bool { return h.get(h.keys.Job("n3", 1)) != nil }, 10*time.Second, 5*time.Millisecond)
	h.step()
	require.Equal(t, int64(1), h.count(h.keys.RunPrefix("n3")))
}

func TestFencedDispatcherStopsLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.start()
	h.waitArmed(t0.Add(time.Second))

	// Another server claims a newer term.
	require.NoError(t, dispatch.New(h.cli, h.keys, "s2", testRing).Claim(ctx, h.term+1))
	h.clock.Advance(time.Second)
	select {
	case err := <-h.done:
		h.done <- err
		require.ErrorIs(t, err, dispatch.ErrFenced)
	case <-time.After(10 * time.Second):
		t.Fatal("fenced loop did not stop")
	}
	require.Zero(t, h.count(h.keys.RunPrefix("n1")), "a fenced leader dispatched")
	require.Zero(t, h.cursors.applies.Load(), "cursor advanced without dispatch")
	require.False(t, h.sched.Firing(), "a fenced loop reports firing")

	// A loop of the old term refuses to start at all.
	h.sched = h.newScheduler()
	err := h.sched.Run(ctx, h.term)
	require.ErrorIs(t, err, dispatch.ErrFenced)
}

// gatedJobs holds ForEnabledJobs until release is closed, after closing
// entered (once): a start-up that is still loading its jobs.
type gatedJobs struct {
	JobSource
	entered, release chan struct{}
	once             sync.Once
}

func (g *gatedJobs) ForEnabledJobs(ctx context.Context, fn func(j *store.Job) error) error {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.JobSource.ForEnabledJobs(ctx, fn)
}

// Firing (what the server's readiness check "trigger" reads) is false
// while the loop loads its jobs, true once it fires, and false again after
// Run returns.
func TestFiringOnlyAfterStartUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	gate := &gatedJobs{JobSource: h.store, entered: make(chan struct{}), release: make(chan struct{})}
	h.jobs = gate
	h.sched = h.newScheduler()
	require.False(t, h.sched.Firing(), "firing before Run")

	h.start()
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never listed its jobs")
	}
	require.False(t, h.sched.Firing(), "firing while loading its jobs")
	close(gate.release)
	h.waitArmed(t0.Add(time.Second))
	require.True(t, h.sched.Firing(), "armed for its first fire but not firing")

	require.NoError(t, h.stop())
	require.False(t, h.sched.Firing(), "firing after Run returned")
}

// 1,000 jobs every second, 5 seconds: exactly 5,000 distinct fires, in 5
// batches.
func TestThousandJobsEverySecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 3 {
		h.addNode("n"+strconv.Itoa(i), "g", "cmd")
	}
	const jobs = 1000
	for i := range jobs {
		h.store.putJob(job(int64(i+1), everySecond))
	}
	h.start()
	start := time.Now()
	for range 5 {
		h.step()
	}
	t.Logf("5 ticks of %d fires took %s", jobs, time.Since(start))
	runs, calls, dups := h.store.snapshot()
	require.Equal(t, 5, calls)
	require.Zero(t, dups)
	require.Len(t, runs, 5*jobs)
	for i := range jobs {
		for s := 1; s <= 5; s++ {
			id := cluster.FireID(int64(i+1), t0.Add(time.Duration(s)*time.Second))
			if _, ok := runs[id]; !ok {
				t.Fatalf("fire %s missing", id)
			}
		}
	}
	require.Equal(t, int64(5), h.cursors.applies.Load())
	var total int64
	for i := range 3 {
		total += h.count(h.keys.RunPrefix("n" + strconv.Itoa(i)))
	}
	require.Equal(t, int64(5*jobs), total)
}

func TestRunRefusesConcurrentRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.start()
	h.waitArmed(t0.Add(DefaultRelistInterval))
	require.ErrorIs(t, h.sched.Run(context.Background(), h.term), ErrRunning)
	require.NoError(t, h.stop())

	require.Error(t, New(Config{}).Run(context.Background(), 1))
}

// flakyDispatcher commits only the first half of the first batch it sees,
// then reports a transient (not fenced) failure.
type flakyDispatcher struct {
	Dispatcher
	mu    sync.Mutex
	calls [][]string // fire ids per Dispatch call
}

func (d *flakyDispatcher) Dispatch(ctx context.Context, term uint64, items []dispatch.DispatchItem) error {
	d.mu.Lock()
	first := len(d.calls) == 0
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.Dispatch.FireID
	}
	d.calls = append(d.calls, ids)
	d.mu.Unlock()
	if !first {
		return d.Dispatcher.Dispatch(ctx, term, items)
	}
	half := len(items) / 2
	if err := d.Dispatcher.Dispatch(ctx, term, items[:half]); err != nil {
		return err
	}
	return &dispatch.PartialError{Committed: half, Err: errors.New("etcdserver: request timed out")}
}

// A batch that fails half-way resumes where it stopped: nothing recorded
// twice, nothing dispatched twice, the cursor moves once, after dispatch.
func TestTransientFailuresResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	flaky := &flakyDispatcher{Dispatcher: h.disp}
	h.sched = New(Config{
		Jobs: h.store, Runs: h.store, Cursors: h.cursors, Dispatcher: flaky,
		Etcd: h.cli, Keys: h.keys, Clock: h.clock, Location: time.UTC, BeatInterval: -1, PlaceJobs: true,
	})
	h.addNode("n1", "g", "cmd")
	for i := range 10 {
		h.store.putJob(job(int64(i+1), everySecond))
	}
	h.store.failInserts = 1
	h.start()
	h.waitArmed(t0.Add(time.Second))
	h.clock.Advance(time.Second)

	// InsertRuns failed: retried after RetryMin.
	h.waitArmed(t0.Add(time.Second + DefaultRetryMin))
	require.Zero(t, h.cursors.applies.Load())
	h.clock.Advance(DefaultRetryMin)
	// Dispatch failed half-way: retried after twice the backoff.
	h.waitArmed(t0.Add(time.Second + 3*DefaultRetryMin))
	require.Zero(t, h.cursors.applies.Load(), "cursor advanced before dispatch succeeded")
	require.Equal(t, int64(5), h.count(h.keys.RunPrefix("n1")))
	h.clock.Advance(2 * DefaultRetryMin)
	h.waitArmed(t0.Add(2 * time.Second))

	runs, calls, dups := h.store.snapshot()
	require.Equal(t, 2, calls, "one failed and one successful InsertRuns")
	require.Zero(t, dups, "a run was recorded twice")
	require.Len(t, runs, 10)
	require.Equal(t, int64(1), h.cursors.applies.Load())
	require.Equal(t, int64(10), h.count(h.keys.RunPrefix("n1")))
	flaky.mu.Lock()
	calls2 := flaky.calls
	flaky.mu.Unlock()
	require.Len(t, calls2, 2)
	require.Len(t, calls2[0], 10)
	require.Len(t, calls2[1], 5, "the retry re-sent fires already dispatched")
	require.NotContains(t, calls2[1], calls2[0][0])

	// Back to normal: the next second fires on time.
	h.clock.Advance(time.Second - 3*DefaultRetryMin)
	h.waitArmed(t0.Add(3 * time.Second))
	runs, _, _ = h.store.snapshot()
	require.Len(t, runs, 20)
}

// A new term removes placements the previous one left for jobs deleted
// meanwhile, and keeps the others. Placements are signed over the leader's
// term (signed dispatches), so a new term re-signs the ones it keeps.
func TestStalePlacementRemovedOnStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.store.putJob(job(2, everySecond))
	h.start()
	require.Eventually(t, func() bool { return h.count(h.keys.JobPrefix("n1")) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, h.stop())

	h.store.deleteJob(2) // no signal: nobody was leading
	h.sched = h.newScheduler()
	h.term++
	h.start()
	require.Eventually(t, func() bool { return h.get(h.keys.Job("n1", 2)) == nil }, 10*time.Second, 5*time.Millisecond)
	require.NotNil(t, h.get(h.keys.Job("n1", 1)), "the placement of a job that still exists was removed")
}
