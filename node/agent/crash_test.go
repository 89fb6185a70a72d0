package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// nodePluginStatus reads the plugin's status from the node's registration
// in etcd, as servers see it.
func nodePluginStatus(t *testing.T, b *bundle, name string) (cluster.PluginStatus, bool) {
	resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.Node(b.cfg.UUID))
	if err != nil || len(resp.Kvs) == 0 {
		return cluster.PluginStatus{}, false
	}
	var n cluster.NodeInfo
	if json.Unmarshal(resp.Kvs[0].Value, &n) != nil {
		return cluster.PluginStatus{}, false
	}
	for _, st := range n.PluginStatus {
		if st.Name == name {
			return st, true
		}
	}
	return cluster.PluginStatus{}, false
}

// TestPluginCrashKeepsOutputAndRestarts is issue 14's robustness
// acceptance with a real plugin process: a handler that writes 3 lines and
// then panics in a goroutine fails its run with those 3 lines as output
// and a message saying the plugin crashed; the next fire restarts the
// plugin and succeeds. Crashing again soon after the restart is a crash
// loop: the plugin backs off, and the node's registration in etcd says so.
func TestPluginCrashKeepsOutputAndRestarts(t *testing.T) {
	t.Parallel()
	host := pluginhost.New(testLogger(), []pluginhost.Spec{{Name: "crashy", Cmd: []string{crashyBin}}},
		pluginhost.Options{CrashWindow: time.Minute, MinBackoff: time.Minute, MaxBackoff: time.Minute})
	require.NoError(t, host.Start(t.Context()))
	t.Cleanup(host.Stop)

	b := &bundle{etcd: etcdtest.Client(t), runner: newTestRunner(), srv: newResultServer(t)}
	b.cfg = Config{
		UUID: "node-crashy", Keys: cluster.NewKeys(""), LeaseTTL: 5 * time.Second,
		ServerURLs: []string{b.srv.URL}, NodeToken: "node-secret", ReportInterval: 20 * time.Millisecond,
		FlushTimeout: 2 * time.Second, Logger: testLogger(),
	}
	a, err := New(b.cfg, b.etcd, host)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	b.agent = a
	putLeader(t, b.etcd, b.cfg.Keys)
	require.NoError(t, a.Start(t.Context()))
	st, ok := nodePluginStatus(t, b, "crashy")
	require.True(t, ok, "the registration carries the plugin status")
	require.Equal(t, cluster.PluginLoaded, st.State)

	b.dispatch(t, "30-1000", "crashy", `{"mode":"crash"}`, 30)
	res := b.waitFinal(t, "30-1000")
	t.Logf("crashed run: status=%s message=%q output=%q", res.Status, res.Message, res.Output)
	require.Equal(t, cluster.StatusFailed, res.Status)
	require.Equal(t, "line 1\nline 2\nline 3\n", res.Output, "output written before the crash is kept")
	require.Contains(t, res.Message, `plugin "crashy" crashed`)
	require.Contains(t, res.Message, "panic: crashy: boom in a goroutine")
	require.Eventually(t, func() bool {
		st, _ := nodePluginStatus(t, b, "crashy")
		return st.Message != ""
	}, waitFor, tick, "the crash reaches the node's plugin status")

	b.dispatch(t, "30-2000", "crashy", `{"mode":"ok"}`, 30)
	res = b.waitFinal(t, "30-2000")
	require.Equal(t, cluster.StatusSuccess, res.Status, "message %q", res.Message)
	require.Equal(t, "fine\n", res.Output)
	require.Eventually(t, func() bool {
		st, _ := nodePluginStatus(t, b, "crashy")
		return st.State == cluster.PluginLoaded && st.Restarts == 1
	}, waitFor, tick, "the restart is counted")

	// A second crash within the crash window of the restart: crash loop.
	b.dispatch(t, "30-3000", "crashy", `{"mode":"crash"}`, 30)
	res = b.waitFinal(t, "30-3000")
	require.Contains(t, res.Message, `plugin "crashy" crashed`)
	b.dispatch(t, "30-4000", "crashy", `{"mode":"ok"}`, 30)
	res = b.waitFinal(t, "30-4000")
	require.Equal(t, cluster.StatusFailed, res.Status, "no restart during the backoff")
	require.Contains(t, res.Message, "crash loop")
	require.Eventually(t, func() bool {
		st, _ := nodePluginStatus(t, b, "crashy")
		return st.State == cluster.PluginBackoff && st.Reason == cluster.PluginReasonCrashLoop &&
			st.RetryAt != nil && st.RetryAt.After(time.Now())
	}, waitFor, tick, "the crash loop is reported in the node's plugin status")
}
