package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// TestKillAndTimeoutWithRealShellPlugin is the acceptance test of kill and
// timeout with a real plugin process: a running `sleep 60` is killed within
// 1s of its proc key being marked, and its proc key disappears; a script
// over its timeout is stopped and reported "timeout".
func TestKillAndTimeoutWithRealShellPlugin(t *testing.T) {
	t.Parallel()
	host := pluginhost.New(testLogger(), []pluginhost.Spec{{Name: "shell", Cmd: []string{shellBin}}})
	require.NoError(t, host.Start(t.Context()))
	t.Cleanup(host.Stop)

	b := &bundle{etcd: etcdtest.Client(t), runner: newTestRunner(), srv: newResultServer(t)}
	b.cfg = Config{
		UUID: "node-real", Keys: cluster.NewKeys(""), LeaseTTL: 2 * time.Second,
		ServerURLs: []string{b.srv.URL}, NodeToken: "node-secret", ReportInterval: 20 * time.Millisecond,
		FlushTimeout: 2 * time.Second, ProcThreshold: 200 * time.Millisecond, Logger: testLogger(),
	}
	a, err := New(b.cfg, b.etcd, host)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	b.agent = a
	putLeader(t, b.etcd, b.cfg.Keys)
	require.NoError(t, a.Start(t.Context()))

	// The kill waits until the script has written its line: the proc key
	// is there as soon as the process starts, before the shell has run
	// anything (on a machine with slow forks, tens of ms before).
	marker := filepath.Join(t.TempDir(), "started")
	script, err := json.Marshal(map[string]string{"script": "echo started; : > '" + marker + "'; sleep 60"})
	require.NoError(t, err)
	b.dispatchJob(t, "20-1000", "shell", string(script), retries(2, 0))
	key, info := b.procKeyOf(t, "20-1000")
	require.Eventually(t, func() bool { _, err := os.Stat(marker); return err == nil }, waitFor, tick, "the script wrote its line")
	info.Killed = true
	v, err := json.Marshal(info)
	require.NoError(t, err)
	asked := time.Now()
	_, err = b.etcd.Put(t.Context(), key, seal(t, key, string(v)), clientv3.WithIgnoreLease())
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := b.srv.final("20-1000"); return ok }, time.Second, tick,
		"a running sleep 60 is killed within 1s")
	t.Logf("killed %s after the request", time.Since(asked))
	res, _ := b.srv.final("20-1000")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Equal(t, 1, res.Attempt, "a kill is not retried")
	require.Contains(t, res.Output, "started")
	require.Eventually(t, func() bool {
		resp, err := b.etcd.Get(t.Context(), key, clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, waitFor, tick, "proc key gone")

	b.dispatchJob(t, "21-1000", "shell", `{"script":"echo waiting; sleep 60"}`,
		func(j *cluster.JobConfig) { j.TimeoutSeconds = 1 })
	res = b.waitFinal(t, "21-1000")
	require.Equal(t, cluster.StatusTimeout, res.Status, "message %q", res.Message)
	require.Contains(t, res.Message, "timed out after 1s")
	require.Less(t, res.FinishedAt.Sub(*res.StartedAt), 5*time.Second)
}
