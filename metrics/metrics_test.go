package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

func TestNilMetricsRecordNothing(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.ObserveLateness(StageStarted, time.Second)
	m.Fired(FireDispatched, 2)
	m.Misfired(cluster.MisfireFireOnceNow, 1)
	m.ObserveDispatch(3, time.Millisecond)
	m.RunStarted("shell")
	m.RunFinished("shell", "success")
	m.SetRunSlots(8)
	m.ObserveSQL("SELECT", time.Millisecond)
	m.PluginStarted("shell")
	m.PluginCrashed("shell")
	m.AlertSent(ChannelEmail, OutcomeSent)
	require.Nil(t, m.EtcdDialOptions())
	require.NoError(t, m.Register(nil))
}

type fakeRaft struct{}

func (fakeRaft) State() string         { return "Leader" }
func (fakeRaft) Term() uint64          { return 7 }
func (fakeRaft) LeaderChanges() uint64 { return 2 }

func TestExpositionCarriesRecordedValues(t *testing.T) {
	t.Parallel()
	m := New()
	m.Fired(FireNoTarget, 2)
	m.Misfired(cluster.MisfireFireOnceNow, 3)
	m.RunStarted("shell")
	m.RunStarted("shell")
	m.RunFinished("shell", "failed")
	m.SetRunSlots(64)
	m.ObserveLateness(StageDispatched, -time.Second) // clamped to 0
	require.NoError(t, m.RegisterRaft(fakeRaft{}))

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	body := string(b)
	for _, want := range []string{
		`cronix_fires_total{outcome="no_target"} 2`,
		`cronix_fires_total{outcome="dispatched"} 0`,
		`cronix_misfires_total{policy="FIRE_ONCE_NOW"} 3`,
		`cronix_misfires_total{policy="DO_NOTHING"} 0`,
		`cronix_runs_in_flight{handler="shell"} 1`,
		`cronix_run_slots 64`,
		`cronix_runs_total{handler="shell",status="failed"} 1`,
		`cronix_schedule_lateness_seconds_bucket{stage="dispatched",le="0.001"} 1`,
		`cronix_raft_state{state="Leader"} 1`,
		`cronix_raft_state{state="Follower"} 0`,
		`cronix_raft_term 7`,
		`cronix_raft_leader_changes_total 2`,
		`cronix_alert_sends_total{channel="webhook",outcome="failed"} 0`,
	} {
		require.True(t, strings.Contains(body, want), "missing %q in:\n%s", want, body)
	}
}

func TestEtcdMethod(t *testing.T) {
	t.Parallel()
	require.Equal(t, "KV/Txn", etcdMethod("/etcdserverpb.KV/Txn"))
	require.Equal(t, "Lease/LeaseGrant", etcdMethod("/etcdserverpb.Lease/LeaseGrant"))
	require.Equal(t, "x", etcdMethod("x"))
}
