package integration

import (
	"bufio"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// scrape GETs a Prometheus text exposition and returns every sample by its
// series ("name{labels}") and the family names it declares (# TYPE lines).
func scrape(t *testing.T, url, token string) (map[string]float64, map[string]bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	samples, families := map[string]float64{}, map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families[strings.Fields(f)[0]] = true
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return samples, families
}

// TestMetricsAndReadinessStandalone: a standalone started with
// --metrics-addr is ready (every check named ok); /metrics on the API port
// needs a token, on --metrics-addr it does not; after a few runs of a shell
// job the fire, run, lateness, SQL and etcd counters have moved, and every
// documented family is exposed.
func TestMetricsAndReadinessStandalone(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	metricsAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	s := startStandalone(t, dataDir, newStandalone(t, dataDir, "--metrics-addr", metricsAddr, "--max-concurrent", "77"))

	code, ready, err := s.api.Ready()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]string{"sql": "ok", "etcd": "ok", "leader": "ok", "trigger": "ok",
		"node_registered": "ok", "plugins_published": "ok"}, ready.Checks)

	resp, err := http.Get(s.api.Base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "/metrics on the API port needs a token")

	open := "http://" + metricsAddr + "/metrics"
	before, _ := scrape(t, open, "")

	job, err := s.api.CreateJob(harness.Job{Name: "metrics-hello", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: []byte(`{"script":"echo hi"}`)})
	require.NoError(t, err)
	waitRuns(t, s.api, job.ID, 60*time.Second, func(r []harness.Run) bool { return len(successes(r)) >= 3 })

	var after map[string]float64
	var families map[string]bool
	require.Eventually(t, func() bool {
		after, families = scrape(t, open, "")
		return after[`cronix_runs_total{handler="shell",status="success"}`] >= 3
	}, 30*time.Second, 200*time.Millisecond, "runs_total never reached 3")

	for _, f := range []string{
		"cronix_schedule_lateness_seconds", "cronix_fires_total", "cronix_runs_total", "cronix_runs_in_flight",
		"cronix_dispatch_batch_size", "cronix_dispatch_duration_seconds", "cronix_raft_state", "cronix_raft_term",
		"cronix_raft_leader_changes_total", "cronix_etcd_request_duration_seconds", "cronix_sql_query_duration_seconds",
		"cronix_plugin_starts_total", "cronix_plugin_crashes_total", "cronix_alert_sends_total", "cronix_nodes",
		"cronix_run_slots",
	} {
		require.True(t, families[f], "family %s not exposed", f)
	}
	moved := func(series string, atLeast float64) {
		t.Helper()
		require.GreaterOrEqual(t, after[series]-before[series], atLeast, "%s: before %v after %v", series, before[series], after[series])
	}
	moved(`cronix_fires_total{outcome="dispatched"}`, 3)
	moved(`cronix_schedule_lateness_seconds_count{stage="dispatched"}`, 3)
	moved(`cronix_schedule_lateness_seconds_count{stage="started"}`, 3)
	moved(`cronix_dispatch_batch_size_count`, 3)
	moved(`cronix_sql_query_duration_seconds_count{operation="INSERT"}`, 3)
	moved(`cronix_etcd_request_duration_seconds_count{method="KV/Txn"}`, 3)
	require.Equal(t, 1.0, after[`cronix_raft_state{state="Leader"}`])
	require.Equal(t, 1.0, after[`cronix_nodes{status="online"}`])
	require.Equal(t, 77.0, after["cronix_run_slots"], "--max-concurrent reaches the built-in node's agent")
	require.GreaterOrEqual(t, after[`cronix_plugin_starts_total{plugin="shell"}`], 1.0)
	require.GreaterOrEqual(t, after["cronix_raft_term"], 1.0)

	// The same exposition on the API port for a logged-in user.
	withToken, _ := scrape(t, s.api.Base+"/metrics", s.api.Token)
	require.GreaterOrEqual(t, withToken[`cronix_fires_total{outcome="dispatched"}`], 3.0)
}

// TestReadyzWithoutQuorum: three replicas are ready; with two of them
// stopped the survivor's /readyz answers 503 naming the leader check (and
// only it: no longer leader, it passes the trigger check),
// while its /healthz still answers 200 (the process is alive).
func TestReadyzWithoutQuorum(t *testing.T) {
	t.Parallel()
	c, err := harness.StartCluster(harness.ClusterConfig{Binary: binary, Dir: t.TempDir(),
		AdminPassword: "ready-admin-pw", NodeToken: "ready-token", Env: []string{"CRONIX_LOG_LEVEL=warn"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range c.Replicas {
				t.Logf("%s output:\n%s", r.ID, r.Output())
			}
		}
		c.Close()
	})
	for _, r := range c.Replicas {
		require.NoError(t, r.API.WaitReady(60*time.Second), "replica %s", r.ID)
	}

	survivor := c.Replicas[2].API
	for i := range 2 {
		require.NoError(t, c.Interrupt(i, 30*time.Second))
	}
	var (
		code  int
		ready harness.Readiness
	)
	// On the way the survivor may be 503 naming only `trigger`: elected
	// after the first stop, it was still loading when the second one came,
	// or still leader with its trigger loop stopped until raft stepped
	// it down.
	require.Eventually(t, func() bool {
		code, ready, err = survivor.Ready()
		return err == nil && code == http.StatusServiceUnavailable && slices.Contains(ready.Failing, "leader")
	}, 30*time.Second, 100*time.Millisecond, "the survivor never answered 503 naming leader: %d %+v %v", code, ready, err)
	require.Equal(t, "not ready", ready.Status)
	require.Equal(t, []string{"leader"}, ready.Failing)
	require.Contains(t, ready.Checks["leader"], "no raft leader known")
	require.Equal(t, "ok", ready.Checks["sql"])
	require.Equal(t, "ok", ready.Checks["etcd"])
	require.NoError(t, survivor.WaitHealthy(5*time.Second), "/healthz means alive, not ready")
}
