package agent

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
)

// dispatchAhead puts a fire dispatched ahead: StartAt (= its scheduled
// time) is at.
func (b *bundle) dispatchAhead(t *testing.T, fireID, handler string, at time.Time) {
	t.Helper()
	b.dispatchAheadJob(t, fireID, handler, at, nil)
}

// dispatchAheadJob is dispatchAhead with the job config adjusted by mutate.
func (b *bundle) dispatchAheadJob(t *testing.T, fireID, handler string, at time.Time, mutate func(*cluster.JobConfig)) {
	t.Helper()
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal([]byte(dispatchValue(t, fireID, handler, "", 0)), &d))
	d.ScheduledAt, d.StartAt = at.UTC(), at.UTC()
	if mutate != nil {
		mutate(&d.Job)
	}
	v, err := json.Marshal(d)
	require.NoError(t, err)
	key := b.cfg.Keys.Run(b.cfg.UUID, fireID)
	_, err = b.etcd.Put(t.Context(), key, seal(t, key, string(v)))
	require.NoError(t, err)
}

// waitHeld waits until the agent holds n fires.
func (b *bundle) waitHeld(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.agent.hold.count() == n }, waitFor, time.Millisecond,
		"%d fires held", n)
}

func TestNodeAdvertisesStartAt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	info, _, ok := b.nodeInfo(t)
	require.True(t, ok)
	require.True(t, info.HasFeature(cluster.FeatureStartAt))
}

// A fire dispatched ahead is held, unstarted, until its StartAt, then run.
func TestHeldUntilStartAt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	at := time.Now().Add(400 * time.Millisecond)
	b.dispatchAhead(t, "31-1000", "echo", at)
	b.dispatch(t, "32-1000", "echo", "", 0) // no StartAt: at once
	b.waitHeld(t, 1)
	if time.Now().Before(at) {
		require.Zero(t, b.runner.Calls("31-1000"), "not started before its StartAt")
	}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "32-1000").Status)
	res := b.waitFinal(t, "31-1000")
	require.Equal(t, cluster.StatusSuccess, res.Status)
	_, times := b.runner.callInfo("31-1000")
	require.Len(t, times, 1)
	require.False(t, times[0].Before(at), "started %s before StartAt %s", times[0], at)
	require.False(t, res.StartedAt.Before(at))
	require.Zero(t, b.agent.hold.count())
}

// A cancel request for a held fire drops it: reported skipped with the
// request's message, never run; a kill request reports it killed.
func TestCancelAndKillOfHeldFires(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	at := time.Now().Add(time.Second)
	b.dispatchAhead(t, "33-1000", "echo", at)
	b.dispatchAhead(t, "34-1000", "echo", at)
	b.waitHeld(t, 2)
	cancelKey := b.cfg.Keys.Kill(b.cfg.UUID, "33-1000")
	_, err := b.etcd.Put(t.Context(), cancelKey, seal(t, cancelKey, `{"fire_id":"33-1000","cancel":"job 33 was disabled"}`))
	require.NoError(t, err)
	killKey := b.cfg.Keys.Kill(b.cfg.UUID, "34-1000")
	_, err = b.etcd.Put(t.Context(), killKey, seal(t, killKey, `{"fire_id":"34-1000"}`))
	require.NoError(t, err)

	res := b.waitFinal(t, "33-1000")
	require.Equal(t, cluster.StatusSkipped, res.Status)
	require.Equal(t, "job 33 was disabled", res.Message)
	require.Zero(t, res.Attempt)
	res = b.waitFinal(t, "34-1000")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Zero(t, b.runner.Calls("33-1000"))
	require.Zero(t, b.runner.Calls("34-1000"))
}

// A cancel request for a fire already running leaves it alone.
func TestCancelLeavesARunningFireAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	b.dispatch(t, "35-1000", "sleep", "", 0)
	require.Eventually(t, func() bool { return b.runner.Calls("35-1000") == 1 }, waitFor, tick)
	require.False(t, b.agent.cancelUnstarted("35-1000", "too late"), "a running fire is not cancelled")
	_, ok := b.srv.final("35-1000")
	require.False(t, ok)
	require.True(t, b.agent.kill("35-1000", killByRequest, true))
	require.Equal(t, cluster.StatusKilled, b.waitFinal(t, "35-1000").Status)
}

// Stop drops held fires without running them; their run keys stay, and
// the next process holds and runs them at their time.
func TestHeldFiresSurviveARestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	at := time.Now().Add(1500 * time.Millisecond)
	b.dispatchAhead(t, "36-1000", "echo", at)
	b.waitHeld(t, 1)
	b.agent.Stop()
	require.True(t, b.runKeyExists(t, "36-1000"))
	require.Zero(t, b.runner.Calls("36-1000"))
	_, ok := b.srv.final("36-1000")
	require.False(t, ok)

	b.agent = b.newAgent(t)
	b.start(t)
	res := b.waitFinal(t, "36-1000")
	require.Equal(t, cluster.StatusSuccess, res.Status)
	_, times := b.runner.callInfo("36-1000")
	require.Len(t, times, 1)
	require.False(t, times[0].Before(at))
}

// holdingRunner is a testRunner that waits for Request.StartAt itself, as
// a plugin built with the Go SDK does; it records each first request.
type holdingRunner struct {
	*testRunner
	mu     sync.Mutex
	handed map[string]time.Time // fire → when Run was called
	starts map[string]time.Time // fire → Request.StartAt
}

func (r *holdingRunner) HoldsStartAt(string) bool { return true }

func (r *holdingRunner) Run(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	r.mu.Lock()
	r.handed[req.FireID], r.starts[req.FireID] = time.Now(), req.StartAt
	r.mu.Unlock()
	if d := time.Until(req.StartAt); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1}, ctx.Err()
		}
	}
	return r.testRunner.Run(ctx, handler, req, out)
}

// holdingAgent replaces b's agent with one whose Runner holds StartAt.
func (b *bundle) holdingAgent(t *testing.T) *holdingRunner {
	t.Helper()
	run := &holdingRunner{testRunner: b.runner, handed: map[string]time.Time{}, starts: map[string]time.Time{}}
	a, err := New(b.cfg, b.etcd, run)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	b.agent.Stop()
	b.agent = a
	b.start(t)
	return run
}

// With a Runner that holds StartAt, a fire of an idle job dispatched ahead
// is handed over before its time (batchLead of one fire, never more than
// idleLead) with StartAt set, and reported started at it.
func TestHandedOverAheadToARunnerThatHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.holdingAgent(t)

	at := time.Now().Add(time.Second).Truncate(time.Millisecond)
	b.dispatchAhead(t, "37-1000", "echo", at)
	res := b.waitFinal(t, "37-1000")
	require.Equal(t, cluster.StatusSuccess, res.Status)
	run.mu.Lock()
	handed, startAt := run.handed["37-1000"], run.starts["37-1000"]
	run.mu.Unlock()
	_, times := b.runner.callInfo("37-1000")
	require.False(t, times[0].Before(at), "the handler started at StartAt")
	require.False(t, handed.Before(at.Add(-batchLead(1))), "not earlier than batchLead of one fire")
	// The release is a timer: on a loaded machine it can come after the
	// start time, and then the fire is simply handed over at once.
	if handed.Before(at) {
		require.True(t, startAt.Equal(at), "Request.StartAt %s, handed %s, at %s", startAt, handed, at)
		require.True(t, res.StartedAt.Equal(at), "started_at is the start time: %s", res.StartedAt)
	} else {
		require.True(t, startAt.IsZero())
	}
}

// The release time from the hold: at StartAt for a Runner that does not
// hold StartAt for the handler; for one that does, idleLead early, and
// then batchLead early for an idle job (startLead plus leadPerFire for
// each fire due at the same time), startLead early for a busy one.
func TestReleaseAtDependsOnTheRunnerTheJobAndTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	at := time.Now().Add(time.Hour)
	d := cluster.Dispatch{StartAt: at, Job: cluster.JobConfig{JobID: 7, Handler: "echo"}}
	idle := func(int64) bool { return false }
	busy := func(id int64) bool { return id == 7 }
	fires := func(n int) func(time.Time) int { return func(time.Time) int { return n } }
	early := at.Add(-time.Minute)
	require.True(t, b.agent.releaseAt(&d, early, fires(1), busy).Equal(at), "plain runner: at StartAt")
	held, err := New(b.cfg, b.etcd, &holdingRunner{testRunner: b.runner})
	require.NoError(t, err)
	require.True(t, held.releaseAt(&d, early, fires(1), busy).Equal(at.Add(-idleLead)), "holding runner: first idleLead early")
	first := at.Add(-idleLead)
	require.True(t, held.releaseAt(&d, first, fires(1), idle).Equal(at.Add(-startLead-leadPerFire)), "idle job, alone: about startLead early")
	require.True(t, held.releaseAt(&d, first, fires(1000), idle).Equal(at.Add(-startLead-1000*leadPerFire)), "idle job, 1,000 due: earlier")
	require.True(t, held.releaseAt(&d, first, fires(100000), idle).Equal(first), "idle job, a huge batch: now (idleLead)")
	require.True(t, held.releaseAt(&d, first, fires(100000), busy).Equal(at.Add(-startLead)), "busy job: startLead early")
	late := at.Add(-startLead / 2)
	require.True(t, held.releaseAt(&d, late, fires(1), busy).Equal(late), "past startLead: now")
	require.Equal(t, idleLead, batchLead(1<<30))
	require.Equal(t, startLead, batchLead(0))
}

// A large batch that arrives after its idleLead time is released at once,
// although it is verified and held 64 fires (intakeChunk) at a time: the
// count is the fires delivered for its instant (noteArrivals), not the
// chunk's. The same chunk alone is held until batchLead of 64.
func TestLateLargeBatchIsReleasedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a, err := New(b.cfg, b.etcd, &holdingRunner{testRunner: b.runner})
	require.NoError(t, err)
	// Within idleLead of the start time, well before batchLead of a chunk.
	at := time.Now().Add(idleLead - 10*time.Millisecond).Truncate(time.Millisecond)
	const batch = 3000
	kvs := make([]*mvccpb.KeyValue, batch)
	chunk := make([]opened, intakeChunk)
	for i := range kvs {
		id := cluster.FireID(int64(i+1), at)
		kvs[i] = &mvccpb.KeyValue{Key: []byte(b.cfg.Keys.Run(b.cfg.UUID, id))}
		if i < intakeChunk {
			chunk[i] = opened{kv: kvs[i], d: cluster.Dispatch{FireID: id, ScheduledAt: at, StartAt: at,
				Job: cluster.JobConfig{JobID: int64(i + 1), Handler: "echo"}}}
		}
	}
	require.Empty(t, a.holdEarly(chunk), "a chunk alone waits for batchLead(64)")
	require.Equal(t, intakeChunk, a.hold.count())

	a2, err := New(b.cfg, b.etcd, &holdingRunner{testRunner: b.runner})
	require.NoError(t, err)
	a2.hold.noteArrivals(kvs, time.Now())
	require.Len(t, a2.hold.held, 0)
	require.Len(t, a2.holdEarly(chunk), intakeChunk, "a chunk of 3,000 delivered fires goes at once")
	require.Zero(t, a2.hold.count())

	// Manual fires and malformed keys are not counted; old instants are
	// forgotten when a new one comes.
	a2.hold.noteArrivals([]*mvccpb.KeyValue{
		{Key: []byte(b.cfg.Keys.Run(b.cfg.UUID, cluster.ManualFireID(1, 9)))},
		{Key: []byte("junk")},
		{Key: []byte(b.cfg.Keys.Run(b.cfg.UUID, cluster.FireID(1, at.Add(2*arrivedKeep))))},
	}, at.Add(2*arrivedKeep))
	require.Equal(t, map[int64]int{at.Add(2 * arrivedKeep).UnixMilli(): 1}, a2.hold.arrived)
}

// A fire of a job that is busy when its idleLead time comes goes back to
// the hold until its startLead time: its block strategy (here COVER_EARLY,
// which kills the running fire) is applied no earlier than it was before
// idleLead existed.
func TestBusyJobIsReleasedStartLeadAhead(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.holdingAgent(t)
	b.dispatchJob(t, "38-1000", "sleep", "", block(cluster.BlockCoverEarly))
	b.running(t, "38-1000")
	at := time.Now().Add(time.Second).Truncate(time.Millisecond)
	b.dispatchAheadJob(t, "38-2000", "echo", at, block(cluster.BlockCoverEarly))
	covered := b.waitFinal(t, "38-1000")
	require.Equal(t, cluster.StatusKilled, covered.Status)
	require.NotNil(t, covered.FinishedAt)
	require.False(t, covered.FinishedAt.Before(at.Add(-startLead)),
		"covered at %s, %s before the new fire's time", covered.FinishedAt, at.Sub(*covered.FinishedAt))
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "38-2000").Status)
}
