package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// testRunner is an in-process Runner standing in for the plugin host, so
// these tests exercise the agent's own logic (intake, dedupe, timeouts,
// output capture, batching). The real plugin processes behind the Runner
// interface are covered by the pluginhost tests and the integration tests.
//
// Handlers:
//
//	echo   writes params.text (or the fire id) and succeeds
//	fail   writes "boom" and fails with exit code 3
//	crash  returns a Runner error, as a crashed plugin does
//	sleep  waits until ctx is done and reports failure
//	big    writes params.bytes bytes and succeeds
//	block  waits until released (or ctx is done), then succeeds (or fails)
//	panic  panics
//	flaky  fails (exit code 1) until attempt params.succeed_at, then succeeds
//	permanent  returns a pluginapi.Permanent error
//	stream writes "first", waits for step, writes "second", waits for release
//	stuck  waits until released, ignoring ctx (a handler that ignores cancellation)
type testRunner struct {
	mu       sync.Mutex
	calls    map[string]int
	attempts map[string][]int       // Request.Attempt of each call, per fire
	times    map[string][]time.Time // start of each call, per fire
	release  chan struct{}
	step     chan struct{}
}

func newTestRunner() *testRunner {
	return &testRunner{calls: map[string]int{}, attempts: map[string][]int{}, times: map[string][]time.Time{},
		release: make(chan struct{}), step: make(chan struct{})}
}

// callInfo returns the attempt numbers and start times of a fire's calls.
func (r *testRunner) callInfo(fireID string) ([]int, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.attempts[fireID]...), append([]time.Time(nil), r.times[fireID]...)
}

func (r *testRunner) Handlers() []cluster.PluginInfo {
	return []cluster.PluginInfo{{Name: "echo", Version: "1.0.0"}, {Name: "sleep", Version: "0.1.0"}}
}

// started is how many fires the runner was called for.
func (r *testRunner) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *testRunner) Calls(fireID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[fireID]
}

func (r *testRunner) Run(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	r.mu.Lock()
	r.calls[req.FireID]++
	r.attempts[req.FireID] = append(r.attempts[req.FireID], req.Attempt)
	r.times[req.FireID] = append(r.times[req.FireID], time.Now())
	r.mu.Unlock()
	var params struct {
		Text      string `json:"text"`
		Bytes     int    `json:"bytes"`
		SucceedAt int    `json:"succeed_at"`
	}
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			return pluginapi.Result{}, fmt.Errorf("bad params: %w", err)
		}
	}
	switch handler {
	case "echo":
		text := params.Text
		if text == "" {
			text = req.FireID
		}
		_, _ = io.WriteString(out, text)
		return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
	case "fail":
		_, _ = io.WriteString(out, "boom")
		return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 3, Message: "exit status 3"}, nil
	case "crash":
		return pluginapi.Result{}, errors.New("plugin crashed: connection reset")
	case "sleep":
		<-ctx.Done()
		return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: ctx.Err().Error()}, nil
	case "big":
		chunk := []byte(strings.Repeat("x", 100))
		for n := 0; n < params.Bytes; n += len(chunk) {
			_, _ = out.Write(chunk[:min(len(chunk), params.Bytes-n)])
		}
		return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
	case "block":
		select {
		case <-r.release:
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		case <-ctx.Done():
			return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "signal: killed"}, nil
		}
	case "stuck":
		<-r.release
		return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
	case "panic":
		panic("handler bug")
	case "flaky":
		_, _ = fmt.Fprintf(out, "try %d\n", req.Attempt)
		if req.Attempt >= params.SucceedAt {
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}
		return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 1, Message: "exit status 1"}, nil
	case "permanent":
		return pluginapi.Result{}, pluginapi.Permanent(errors.New("no such host"))
	case "stream":
		_, _ = io.WriteString(out, "first\n")
		select {
		case <-r.step:
		case <-ctx.Done():
			return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1}, nil
		}
		_, _ = io.WriteString(out, "second\n")
		select {
		case <-r.release:
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		case <-ctx.Done():
			return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1}, nil
		}
	}
	return pluginapi.Result{}, fmt.Errorf("unknown handler %q", handler)
}

// resultServer stands in for a server's result endpoint. It records every
// accepted batch, and can be told to answer 500 for a number of requests.
type resultServer struct {
	*httptest.Server
	mu       sync.Mutex
	posts    int // accepted batches
	attempts int // all requests
	failNext int // answer 500 to this many more requests
	results  []cluster.RunResult
	auth     map[string]bool
	security []cluster.SecurityEvent // events posted to SecurityEventsPath
}

func newResultServer(t testing.TB) *resultServer {
	s := &resultServer{auth: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.attempts++
		if req.Method == http.MethodPost && req.URL.Path == SecurityEventsPath {
			var batch cluster.SecurityEventBatch
			if err := json.NewDecoder(req.Body).Decode(&batch); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.security = append(s.security, batch.Events...)
			_, _ = w.Write([]byte(`{"accepted":1}`))
			return
		}
		if req.Method != http.MethodPost || req.URL.Path != ResultsPath {
			http.NotFound(w, req)
			return
		}
		s.auth[req.Header.Get("Authorization")] = true
		if s.failNext > 0 {
			s.failNext--
			http.Error(w, "database unavailable", http.StatusInternalServerError)
			return
		}
		var batch cluster.ResultBatch
		if err := json.NewDecoder(req.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.posts++
		s.results = append(s.results, batch.Results...)
		_ = json.NewEncoder(w).Encode(cluster.ResultAck{Accepted: len(batch.Results)})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *resultServer) setFailNext(n int) {
	s.mu.Lock()
	s.failNext = n
	s.mu.Unlock()
}

// of returns the results received for one fire, in arrival order.
func (s *resultServer) of(fireID string) []cluster.RunResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []cluster.RunResult
	for _, r := range s.results {
		if r.FireID == fireID {
			out = append(out, r)
		}
	}
	return out
}

// final returns the final result received for a fire.
func (s *resultServer) final(fireID string) (cluster.RunResult, bool) {
	for _, r := range s.of(fireID) {
		if cluster.Terminal(r.Status) {
			return r, true
		}
	}
	return cluster.RunResult{}, false
}

// securityEvents returns the security events received so far.
func (s *resultServer) securityEvents() []cluster.SecurityEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cluster.SecurityEvent(nil), s.security...)
}

func (s *resultServer) all() []cluster.RunResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cluster.RunResult(nil), s.results...)
}

func (s *resultServer) counts() (posts, attempts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts, s.attempts
}

// bundle is one test's agent with its real etcd and result server.
type bundle struct {
	etcd   *clientv3.Client
	cfg    Config
	runner *testRunner
	srv    *resultServer
	agent  *Agent
}

const waitFor = 10 * time.Second
const tick = 10 * time.Millisecond

func testLogger() *slog.Logger {
	if os.Getenv("CRONIX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// setup builds (but does not start) an agent against a fresh embedded etcd
// and a result server; mutate adjusts the config.
func setup(t testing.TB, mutate func(*Config)) *bundle {
	t.Helper()
	return setupWith(t, etcdtest.Client(t), mutate)
}

// setupWith is setup with a given etcd client.
func setupWith(t testing.TB, etcd *clientv3.Client, mutate func(*Config)) *bundle {
	t.Helper()
	b := &bundle{etcd: etcd, runner: newTestRunner(), srv: newResultServer(t)}
	b.cfg = Config{
		UUID:           "node-1",
		IP:             "127.0.0.1",
		Port:           9999,
		Version:        "test",
		Keys:           cluster.NewKeys(""),
		LeaseTTL:       2 * time.Second,
		ServerURLs:     []string{b.srv.URL},
		NodeToken:      "node-secret",
		ReportInterval: 20 * time.Millisecond,
		FlushTimeout:   2 * time.Second,
		Logger:         testLogger(),
	}
	if mutate != nil {
		mutate(&b.cfg)
	}
	putLeader(t, etcd, b.cfg.Keys)
	b.agent = b.newAgent(t)
	return b
}

// putLeader writes the leader key of term testTerm, as the trigger leader
// claims it before dispatching (kept if another test on this etcd wrote it).
func putLeader(t testing.TB, etcd *clientv3.Client, keys cluster.Keys) {
	t.Helper()
	leader := keys.Leader()
	_, err := etcd.Txn(t.Context()).If(clientv3.Compare(clientv3.CreateRevision(leader), "=", 0)).
		Then(clientv3.OpPut(leader, cluster.LeaderValue(testTerm, "s1"))).Commit()
	require.NoError(t, err)
}

// testTerm is the leader term the tests' records are signed under.
const testTerm = 1

// testRing is the cluster key of the tests' node token ("node-secret").
var testRing, _ = cluster.KeyringFromTokens("node-secret")

// seal signs body (JSON) for key under testTerm, as a server does.
func seal(t testing.TB, key, body string) string {
	t.Helper()
	v, err := testRing.Seal(key, testTerm, []byte(body))
	require.NoError(t, err)
	return string(v)
}

func (b *bundle) newAgent(t testing.TB) *Agent {
	t.Helper()
	a, err := New(b.cfg, b.etcd, b.runner)
	require.NoError(t, err)
	t.Cleanup(a.Stop)
	return a
}

func (b *bundle) start(t testing.TB) {
	t.Helper()
	require.NoError(t, b.agent.Start(t.Context()))
}

func dispatchValue(t testing.TB, fireID, handler, params string, timeoutSeconds int) string {
	t.Helper()
	jobID, err := cluster.JobIDOfFire(fireID)
	require.NoError(t, err)
	d := cluster.Dispatch{
		FireID:       fireID,
		Trigger:      cluster.TriggerSchedule,
		ScheduledAt:  time.Now().UTC().Truncate(time.Second),
		DispatchedAt: time.Now().UTC(),
		Term:         1,
		Job: cluster.JobConfig{
			JobID: jobID, Name: "job", Group: "default", Handler: handler,
			TimeoutSeconds: timeoutSeconds, Revision: 1,
		},
	}
	if params != "" {
		d.Job.Params = json.RawMessage(params)
	}
	v, err := json.Marshal(d)
	require.NoError(t, err)
	return string(v)
}

// dispatchJob puts one fire whose job config mutate adjusts.
func (b *bundle) dispatchJob(t *testing.T, fireID, handler, params string, mutate func(*cluster.JobConfig)) {
	t.Helper()
	var d cluster.Dispatch
	require.NoError(t, json.Unmarshal([]byte(dispatchValue(t, fireID, handler, params, 0)), &d))
	if mutate != nil {
		mutate(&d.Job)
	}
	v, err := json.Marshal(d)
	require.NoError(t, err)
	key := b.cfg.Keys.Run(b.cfg.UUID, fireID)
	_, err = b.etcd.Put(t.Context(), key, seal(t, key, string(v)))
	require.NoError(t, err)
}

// dispatch puts one fire under the node's run prefix, as the leader does.
func (b *bundle) dispatch(t *testing.T, fireID, handler, params string, timeoutSeconds int) {
	t.Helper()
	key := b.cfg.Keys.Run(b.cfg.UUID, fireID)
	_, err := b.etcd.Put(t.Context(), key, seal(t, key, dispatchValue(t, fireID, handler, params, timeoutSeconds)))
	require.NoError(t, err)
}

// runKeyExists reports whether the fire's run key is in etcd (true on an
// etcd error, so waiting for its deletion keeps waiting). It is called from
// require.Eventually's goroutine, so it must not call require.
func (b *bundle) runKeyExists(t *testing.T, fireID string) bool {
	resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.Run(b.cfg.UUID, fireID))
	return err != nil || len(resp.Kvs) > 0
}

// runKeyCount counts the node's run keys (-1 on an etcd error).
func (b *bundle) runKeyCount(t testing.TB) int64 {
	resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.RunPrefix(b.cfg.UUID), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return -1
	}
	return resp.Count
}

// waitFinal waits for the fire's final result to reach the server and its
// run key to be deleted, and returns the result.
func (b *bundle) waitFinal(t *testing.T, fireID string) cluster.RunResult {
	t.Helper()
	require.Eventually(t, func() bool {
		_, ok := b.srv.final(fireID)
		return ok && !b.runKeyExists(t, fireID)
	}, waitFor, tick, "fire %s: final result delivered and run key deleted", fireID)
	res, _ := b.srv.final(fireID)
	return res
}

// nodeInfo reads the node's registration; ok is false when it is absent
// or unreadable. Safe to call from require.Eventually.
func (b *bundle) nodeInfo(t *testing.T) (info cluster.NodeInfo, lease int64, ok bool) {
	resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.Node(b.cfg.UUID))
	if err != nil || len(resp.Kvs) == 0 {
		return info, 0, false
	}
	if json.Unmarshal(resp.Kvs[0].Value, &info) != nil {
		return info, 0, false
	}
	return info, resp.Kvs[0].Lease, true
}
