package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// dispatchAhead puts a fire dispatched ahead: StartAt (= its scheduled
// time) is at.
func (b *bundle) dispatchAhead(t *testing.T, fireID, handler string, at time.Time) {
	t.Helper()
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal([]byte(dispatchValue(t, fireID, handler, "", 0)), &d))
	d.ScheduledAt, d.StartAt = at.UTC(), at.UTC()
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
