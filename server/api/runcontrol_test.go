package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/agent"
	"github.com/cronix/cronix/node/sysinfo"
	"github.com/cronix/cronix/node/trust"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// ctlRunner is an in-process handler set for a real agent:
//
//	sleep   writes "started\n" and waits until ctx is done
//	stream  writes "first\n", waits for step, writes "second\n", waits for done
type ctlRunner struct {
	step, done chan struct{}
}

func (r *ctlRunner) Handlers() []cluster.PluginInfo {
	return []cluster.PluginInfo{{Name: "sleep", Version: "1"}, {Name: "stream", Version: "1"}}
}

func (r *ctlRunner) Run(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	switch handler {
	case "sleep":
		_, _ = io.WriteString(out, "started\n")
		<-ctx.Done()
	case "stream":
		_, _ = io.WriteString(out, "first\n")
		select {
		case <-r.step:
		case <-ctx.Done():
		}
		_, _ = io.WriteString(out, "second\n")
		select {
		case <-r.done:
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		case <-ctx.Done():
		}
	}
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "signal: killed"}, nil
}

// startAgent starts a real node agent reporting to the test API, with its
// live output endpoint served at the address it registers.
func (b *bundle) startAgent(t *testing.T, uuid string, runner agent.Runner, procThreshold time.Duration) {
	t.Helper()
	mux := http.NewServeMux()
	nodeSrv := httptest.NewServer(mux)
	t.Cleanup(nodeSrv.Close)
	u, err := url.Parse(nodeSrv.URL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	a, err := agent.New(agent.Config{
		UUID: uuid, IP: u.Hostname(), Port: port, Keys: b.keys, LeaseTTL: 2 * time.Second,
		ServerURLs: []string{b.srv.URL}, NodeToken: nodeToken, ReportInterval: 20 * time.Millisecond,
		RunningAfter: 50 * time.Millisecond, ProcThreshold: procThreshold, FlushTimeout: 2 * time.Second,
		ShutdownGrace: time.Second,
	}, b.etcd, runner)
	require.NoError(t, err)
	mux.Handle("GET "+agent.OutputPath, a.OutputHandler(nodeToken))
	require.NoError(t, a.Start(b.ctx))
	t.Cleanup(a.Stop)
}

// testRing is the cluster key of nodeToken, as servers and nodes derive it.
var testRing, _ = cluster.KeyringFromTokens(nodeToken)

// fire records a run in SQL as the scheduler does and dispatches it.
func (b *bundle) fire(t *testing.T, node, fireID, handler string) *store.Run {
	t.Helper()
	jobID, err := cluster.JobIDOfFire(fireID)
	require.NoError(t, err)
	now := time.Now().UTC()
	_, err = b.store.InsertRuns(b.ctx, []store.Run{{
		FireID: fireID, JobID: jobID, Trigger: cluster.TriggerSchedule, Status: cluster.StatusTriggered,
		Node: node, ScheduledAt: now, DispatchedAt: &now,
	}})
	require.NoError(t, err)
	run, err := b.store.RunByFireID(b.ctx, fireID)
	require.NoError(t, err)
	key := b.keys.Run(node, fireID)
	// Signed as the leader does (term 0: no leader key in these tests).
	v, err := testRing.SealJSON(key, 0, cluster.Dispatch{FireID: fireID, Trigger: cluster.TriggerSchedule, ScheduledAt: now,
		DispatchedAt: now, Job: cluster.JobConfig{JobID: jobID, Name: "j", Handler: handler}})
	require.NoError(t, err)
	_, err = b.etcd.Put(b.ctx, key, string(v))
	require.NoError(t, err)
	return run
}

func (b *bundle) runStatus(id int64) string {
	r, err := b.store.GetRun(b.ctx, id)
	if err != nil {
		return ""
	}
	return r.Status
}

func TestKillRunningRunThroughProcKeyAndKillKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAgent(t, "node-k", &ctlRunner{}, 100*time.Millisecond)

	// Long enough to have a proc key: killed through it.
	run := b.fire(t, "node-k", "1-1000", "sleep")
	require.Eventually(t, func() bool {
		resp, err := b.etcd.Get(b.ctx, b.keys.ProcPrefix("node-k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1 && b.runStatus(run.ID) == cluster.StatusRunning
	}, 10*time.Second, 10*time.Millisecond)
	var out map[string]string
	asked := time.Now()
	b.doJSON(http.MethodPost, "/api/v1/runs/"+strconv.FormatInt(run.ID, 10)+"/kill", b.token, nil, http.StatusAccepted, &out)
	require.Equal(t, map[string]string{"status": "killing"}, out)
	require.Eventually(t, func() bool { return b.runStatus(run.ID) == cluster.StatusKilled }, time.Second,
		10*time.Millisecond, "killed within 1s of the API call")
	t.Logf("killed %s after the API call", time.Since(asked))
	resp, err := b.etcd.Get(b.ctx, b.keys.ProcPrefix("node-k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count, "proc key gone")
	got, err := b.store.GetRun(b.ctx, run.ID)
	require.NoError(t, err)
	require.Contains(t, got.Message, "killed by request")

	// Already finished: 409. Unknown: 404.
	b.errorOf(http.MethodPost, "/api/v1/runs/"+strconv.FormatInt(run.ID, 10)+"/kill", b.token, nil, http.StatusConflict)
	b.errorOf(http.MethodPost, "/api/v1/runs/999999/kill", b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodPost, "/api/v1/runs/1/kill", "", nil, http.StatusUnauthorized)
}

func TestKillWithoutProcKeyUsesKillKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startAgent(t, "node-q", &ctlRunner{}, time.Hour)

	run := b.fire(t, "node-q", "2-1000", "sleep")
	require.Eventually(t, func() bool { return b.runStatus(run.ID) == cluster.StatusRunning },
		10*time.Second, 10*time.Millisecond)
	b.doJSON(http.MethodPost, "/api/v1/runs/"+strconv.FormatInt(run.ID, 10)+"/kill", b.token, nil, http.StatusAccepted, nil)
	require.Eventually(t, func() bool { return b.runStatus(run.ID) == cluster.StatusKilled }, time.Second,
		10*time.Millisecond, "killed within 1s through the kill key")
	require.Eventually(t, func() bool {
		resp, err := b.etcd.Get(b.ctx, b.keys.KillPrefix("node-q"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, 10*time.Second, 10*time.Millisecond, "the node removed the kill key")

	// A run not taken by any node yet: the kill key waits under a lease.
	_, err := b.store.InsertRuns(b.ctx, []store.Run{{FireID: "3-1000", JobID: 3, Trigger: cluster.TriggerSchedule,
		Status: cluster.StatusTriggered, Node: "node-absent", ScheduledAt: time.Now().UTC()}})
	require.NoError(t, err)
	queued, err := b.store.RunByFireID(b.ctx, "3-1000")
	require.NoError(t, err)
	b.doJSON(http.MethodPost, "/api/v1/runs/"+strconv.FormatInt(queued.ID, 10)+"/kill", b.token, nil, http.StatusAccepted, nil)
	kv, err := b.etcd.Get(b.ctx, b.keys.Kill("node-absent", "3-1000"))
	require.NoError(t, err)
	require.Len(t, kv.Kvs, 1)
	require.NotZero(t, kv.Kvs[0].Lease, "kill key under a lease")
}

func TestRunOutputStreamsFromTheNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := &ctlRunner{step: make(chan struct{}), done: make(chan struct{})}
	b.startAgent(t, "node-o", r, time.Hour)

	run := b.fire(t, "node-o", "4-1000", "stream")
	path := "/api/v1/runs/" + strconv.FormatInt(run.ID, 10) + "/output"
	require.Eventually(t, func() bool { return b.runStatus(run.ID) == cluster.StatusRunning },
		10*time.Second, 10*time.Millisecond)

	// Without follow: the output so far.
	status, body := b.do(http.MethodGet, path, b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "first\n", string(body))

	// With follow: streamed through from the node as it comes.
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.srv.URL+path+"?follow=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first\n", line)
	r.step <- struct{}{}
	line, err = rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "second\n", line, "a line written while the client follows")
	close(r.done)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the stream ends with the run")
	require.Empty(t, rest)

	// Finished: the stored output.
	require.Eventually(t, func() bool { return b.runStatus(run.ID) == cluster.StatusSuccess },
		10*time.Second, 10*time.Millisecond)
	status, body = b.do(http.MethodGet, path+"?follow=1", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "first\nsecond\n", string(body))
	b.errorOf(http.MethodGet, "/api/v1/runs/999999/output", b.token, nil, http.StatusNotFound)
}

func TestNodeSystemInfoRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// n1 is registered by setup; a real responder answers for it.
	guard, err := trust.New(trust.Config{Etcd: b.etcd, Keys: b.keys, Keyring: testRing})
	require.NoError(t, err)
	resp, err := sysinfo.NewResponder(sysinfo.Config{NodeUUID: "n1", Keys: b.keys, Disks: []string{t.TempDir()},
		Guard: guard}, b.etcd)
	require.NoError(t, err)
	require.NoError(t, resp.Start(b.ctx))
	t.Cleanup(resp.Stop)

	for range 2 { // each request gets a fresh answer
		var info cluster.SystemInfo
		b.doJSON(http.MethodGet, "/api/v1/nodes/n1/system", b.token, nil, http.StatusOK, &info)
		require.Equal(t, "n1", info.Node)
		require.NotEmpty(t, info.Hostname)
		require.Positive(t, info.CPUCount)
		require.Positive(t, info.MemoryTotal)
		require.NotEmpty(t, info.Disks)
		require.Equal(t, "/", info.Disks[0].Path)
		require.Positive(t, info.Disks[0].Total)
		require.WithinDuration(t, time.Now(), info.CollectedAt, time.Minute)
	}
	// collected_at is written like every instant of the API: UTC with
	// milliseconds, not the record's nanoseconds.
	status, raw := b.do(http.MethodGet, "/api/v1/nodes/n1/system", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	at, ok := fields["collected_at"].(string)
	require.True(t, ok, "collected_at: %v", fields["collected_at"])
	parsed, err := time.Parse(api.TimeLayout, at)
	require.NoError(t, err)
	require.Equal(t, parsed.UTC().Format(api.TimeLayout), at)
	sw, err := b.etcd.Get(b.ctx, b.keys.SystemSwitch("n1"), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, sw.Count, "request removed")
	get, err := b.etcd.Get(b.ctx, b.keys.SystemGet("n1"))
	require.NoError(t, err)
	require.Len(t, get.Kvs, 1)
	require.NotZero(t, get.Kvs[0].Lease, "answer under a lease")

	b.errorOf(http.MethodGet, "/api/v1/nodes/nope/system", b.token, nil, http.StatusNotFound)
	// A registered node that never answers: 504 after the wait.
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "mute", Group: "default", IP: "127.0.0.19", Port: 1})
	b.errorOf(http.MethodGet, "/api/v1/nodes/mute/system", b.token, nil, http.StatusGatewayTimeout)
}
