package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/embedetcd"
)

func TestRegistrationAppearsAndIsRemovedOnStop(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	info, lease, ok := b.nodeInfo(t)
	require.True(t, ok, "registered once Start returns")
	require.NotZero(t, lease, "registration is under a lease")
	require.Equal(t, "node-1", info.UUID)
	require.Equal(t, DefaultGroup, info.Group)
	require.Equal(t, "127.0.0.1", info.IP)
	require.Equal(t, 9999, info.Port)
	require.Equal(t, "test", info.Version)
	require.Equal(t, NodeOnline, info.Status)
	require.Equal(t, b.runner.Handlers(), info.Plugins)
	require.False(t, info.Started.IsZero())

	b.agent.Stop()
	_, _, ok = b.nodeInfo(t)
	require.False(t, ok, "registration deleted on Stop")
	ttl, err := b.etcd.TimeToLive(t.Context(), clientv3.LeaseID(lease))
	require.NoError(t, err)
	require.Equal(t, int64(-1), ttl.TTL, "lease revoked on Stop")
	b.agent.Stop() // idempotent
}

func TestReRegistersAfterLeaseRevoked(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	_, lease, ok := b.nodeInfo(t)
	require.True(t, ok)

	// As after an etcd outage longer than the TTL: the lease is gone.
	_, err := b.etcd.Revoke(t.Context(), clientv3.LeaseID(lease))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, newLease, ok := b.nodeInfo(t)
		return ok && newLease != 0 && newLease != lease && info.Status == NodeOnline
	}, waitFor, tick, "registered again under a new lease")
}

func TestDispatchRunsOnceReportsOutputAndDeletesRunKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatch(t, "42-1000", "echo", `{"text":"hello"}`, 0)
	res := b.waitFinal(t, "42-1000")

	require.Equal(t, cluster.StatusSuccess, res.Status)
	require.Equal(t, "hello", res.Output)
	require.False(t, res.OutputTruncated)
	require.Equal(t, int64(42), res.JobID)
	require.Equal(t, "node-1", res.Node)
	require.Equal(t, cluster.TriggerSchedule, res.Trigger)
	require.NotNil(t, res.ExitCode)
	require.Zero(t, *res.ExitCode)
	require.NotNil(t, res.StartedAt)
	require.NotNil(t, res.FinishedAt)
	require.False(t, res.FinishedAt.Before(*res.StartedAt))
	require.Equal(t, 1, b.runner.Calls("42-1000"))
	require.Len(t, b.srv.of("42-1000"), 1, "a short run sends only its final result")

	b.srv.mu.Lock()
	auth := b.srv.auth
	b.srv.mu.Unlock()
	require.Equal(t, map[string]bool{"Bearer node-secret": true}, auth)
}

func TestSameFireIDRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	// Dispatched twice in a row (a replayed leader txn), then again after
	// the first run's key was deleted.
	b.dispatch(t, "7-1000", "echo", "", 0)
	b.dispatch(t, "7-1000", "echo", "", 0)
	b.waitFinal(t, "7-1000")
	b.dispatch(t, "7-1000", "echo", "", 0)
	require.Eventually(t, func() bool { return !b.runKeyExists(t, "7-1000") }, waitFor, tick,
		"a re-dispatch of a fire already run is dropped and its key deleted")

	require.Equal(t, 1, b.runner.Calls("7-1000"))
	require.Len(t, b.srv.of("7-1000"), 1)
}

func TestDispatchesPresentBeforeStartAreRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i := range 3 {
		b.dispatch(t, fmt.Sprintf("3-%d", 1000+i), "echo", "", 0)
	}
	b.start(t)
	for i := range 3 {
		id := fmt.Sprintf("3-%d", 1000+i)
		require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, id).Status)
		require.Equal(t, 1, b.runner.Calls(id))
	}
}

// TestDefaultSlotsTakeASecondOf5000Fires: with the default MaxConcurrent,
// 5,000 fires of one second (the http bench's top rate) all run at once,
// none waiting for another to end. With 4,096 slots the last ~900 of each
// second were handed to the plugin only once the first ones ended, 100-170
// ms after their time.
func TestDefaultSlotsTakeASecondOf5000Fires(t *testing.T) {
	t.Parallel()
	const n = 5000
	b := setup(t, nil)
	at := time.Now().Truncate(time.Second)
	ops := make([]clientv3.Op, 0, 128)
	flush := func() {
		_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit()
		require.NoError(t, err)
		ops = ops[:0]
	}
	for i := range n {
		id := cluster.FireID(int64(i+1), at)
		key := b.cfg.Keys.Run(b.cfg.UUID, id)
		ops = append(ops, clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "block", "", 0))))
		if len(ops) == cap(ops) {
			flush()
		}
	}
	flush()
	t.Cleanup(func() { close(b.runner.release) }) // before the agent's Stop (cleanups run last first)
	b.start(t)
	require.Eventually(t, func() bool { return b.runner.started() == n }, 3*waitFor, tick,
		"every fire of the second is running at once")
}

func TestOutputOverCapIsTruncatedAndFlagged(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.OutputCap = 1000 })
	b.start(t)

	b.dispatch(t, "1-1", "big", `{"bytes":5000}`, 0)
	b.dispatch(t, "1-2", "big", `{"bytes":1000}`, 0)
	big := b.waitFinal(t, "1-1")
	require.Equal(t, cluster.StatusSuccess, big.Status)
	require.Len(t, big.Output, 1000)
	require.True(t, big.OutputTruncated)
	exact := b.waitFinal(t, "1-2")
	require.Len(t, exact.Output, 1000)
	require.False(t, exact.OutputTruncated)
}

func TestTimeoutIsReportedAsTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatch(t, "9-1", "sleep", "", 1)
	res := b.waitFinal(t, "9-1")
	require.Equal(t, cluster.StatusTimeout, res.Status)
	require.Contains(t, res.Message, "timed out after 1s")
	require.GreaterOrEqual(t, res.FinishedAt.Sub(*res.StartedAt), time.Second)
}

func TestFailuresAreReportedFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatch(t, "2-1", "fail", "", 0)
	b.dispatch(t, "2-2", "crash", "", 0)
	b.dispatch(t, "2-3", "no-such-handler", "", 0)
	b.dispatch(t, "2-4", "panic", "", 0)

	failed := b.waitFinal(t, "2-1")
	require.Equal(t, cluster.StatusFailed, failed.Status)
	require.NotNil(t, failed.ExitCode)
	require.Equal(t, 3, *failed.ExitCode)
	require.Equal(t, "boom", failed.Output)
	require.Equal(t, "exit status 3", failed.Message)

	crashed := b.waitFinal(t, "2-2")
	require.Equal(t, cluster.StatusFailed, crashed.Status)
	require.Equal(t, "plugin crashed: connection reset", crashed.Message)
	require.Nil(t, crashed.ExitCode)

	unknown := b.waitFinal(t, "2-3")
	require.Equal(t, cluster.StatusFailed, unknown.Status)
	require.Contains(t, unknown.Message, `unknown handler "no-such-handler"`)

	panicked := b.waitFinal(t, "2-4")
	require.Equal(t, cluster.StatusFailed, panicked.Status)
	require.Contains(t, panicked.Message, "panicked: handler bug")

	// The node survived the panic.
	b.dispatch(t, "2-5", "echo", "", 0)
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "2-5").Status)
}

func TestMalformedDispatchIsReportedFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	key := b.cfg.Keys.Run(b.cfg.UUID, "5-99")
	_, err := b.etcd.Put(t.Context(), key, seal(t, key, "[1,2]")) // signed, but not a dispatch
	require.NoError(t, err)
	res := b.waitFinal(t, "5-99")
	require.Equal(t, cluster.StatusFailed, res.Status)
	require.Equal(t, int64(5), res.JobID)
	require.Contains(t, res.Message, "malformed dispatch")
}

func TestResultsAreBatched(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ReportInterval = DefaultReportInterval })
	b.start(t)

	ops := make([]clientv3.Op, 100)
	for i := range ops {
		id := fmt.Sprintf("11-%d", 1000+i)
		key := b.cfg.Keys.Run(b.cfg.UUID, id)
		ops[i] = clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "echo", "", 0)))
	}
	_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit()
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(b.srv.all()) == 100 && b.runKeyCount(t) == 0 },
		waitFor, tick, "100 results delivered and their run keys deleted")
	posts, _ := b.srv.counts()
	require.LessOrEqual(t, posts, 10, "results are batched")
	for i := range 100 {
		require.Equal(t, 1, b.runner.Calls(fmt.Sprintf("11-%d", 1000+i)))
	}
}

func TestServerErrorsDelayButNeverLoseResults(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(nil)
	dead.Close() // a server URL where nothing answers
	b := setup(t, func(c *Config) {
		c.MaxConcurrent = 1 // results are produced in dispatch order
		c.ReportBatch = 7
	})
	b.cfg.ServerURLs = []string{dead.URL, b.srv.URL}
	b.agent = b.newAgent(t)
	b.srv.setFailNext(3)
	b.start(t)

	var want []string
	ops := make([]clientv3.Op, 20)
	for i := range ops {
		id := fmt.Sprintf("12-%d", 1000+i)
		want = append(want, id)
		key := b.cfg.Keys.Run(b.cfg.UUID, id)
		ops[i] = clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "echo", "", 0)))
	}
	_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit()
	require.NoError(t, err)

	require.Eventually(t, func() bool { return len(b.srv.all()) >= 20 && b.runKeyCount(t) == 0 },
		waitFor, tick, "every result delivered once the server recovers")
	var got []string
	for _, r := range b.srv.all() {
		got = append(got, r.FireID)
	}
	require.Equal(t, want, got, "none lost, none doubled, order kept")
	_, attempts := b.srv.counts()
	require.Greater(t, attempts, 3, "the 500s were retried")
}

func TestServersAreDiscoveredFromRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ServerURLs = nil })
	b.start(t)

	b.dispatch(t, "13-1", "echo", "", 0)
	require.Eventually(t, func() bool { return b.runner.Calls("13-1") == 1 }, waitFor, tick)
	require.Empty(t, b.srv.all(), "no server registered yet")

	info := fmt.Sprintf(`{"id":"s1","url":%q,"version":"test"}`, b.srv.URL+"/")
	_, err := b.etcd.Put(t.Context(), strings.TrimSuffix(cluster.ServerRegistration("127.0.0.1:1"), "data")+"status", "up")
	require.NoError(t, err)
	_, err = b.etcd.Put(t.Context(), cluster.ServerRegistration("127.0.0.1:1"), info)
	require.NoError(t, err)
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "13-1").Status)
	require.Equal(t, []string{b.srv.URL}, b.agent.servers.URLs())

	_, err = b.etcd.Delete(t.Context(), cluster.ServerRegistration("127.0.0.1:1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(b.agent.servers.URLs()) == 0 }, waitFor, tick,
		"a deregistered server is forgotten")
}

func TestLongRunReportsRunningOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.RunningAfter = 50 * time.Millisecond })
	b.start(t)

	b.dispatch(t, "14-1", "block", "", 0)
	require.Eventually(t, func() bool { return len(b.srv.of("14-1")) == 1 }, waitFor, tick)
	running := b.srv.of("14-1")[0]
	require.Equal(t, cluster.StatusRunning, running.Status)
	require.NotNil(t, running.StartedAt)
	require.Nil(t, running.FinishedAt)
	require.True(t, b.runKeyExists(t, "14-1"), "a running report does not delete the run key")

	close(b.runner.release)
	final := b.waitFinal(t, "14-1")
	require.Equal(t, cluster.StatusSuccess, final.Status)
	require.True(t, final.StartedAt.Equal(*running.StartedAt))
	statuses := []string{}
	for _, r := range b.srv.of("14-1") {
		statuses = append(statuses, r.Status)
	}
	require.Equal(t, []string{cluster.StatusRunning, cluster.StatusSuccess}, statuses)
}

func TestStopDrainsRunningFires(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatch(t, "15-1", "block", "", 0)
	require.Eventually(t, func() bool { return b.runner.Calls("15-1") == 1 }, waitFor, tick)

	stopped := make(chan struct{})
	go func() {
		b.agent.Stop()
		close(stopped)
	}()
	require.Eventually(t, func() bool {
		info, _, ok := b.nodeInfo(t)
		return ok && info.Status == NodeDraining
	}, waitFor, tick, "a stopping node advertises draining")
	// Stop waits for the running fire.
	select {
	case <-stopped:
		t.Fatal("Stop returned while a fire was running")
	default:
	}
	close(b.runner.release)
	<-stopped
	res, ok := b.srv.final("15-1")
	require.True(t, ok, "the result was flushed before Stop returned")
	require.Equal(t, cluster.StatusSuccess, res.Status)
	require.False(t, b.runKeyExists(t, "15-1"))
	_, _, ok = b.nodeInfo(t)
	require.False(t, ok)
}

func TestStopCancelsFiresAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ShutdownGrace = 50 * time.Millisecond })
	b.start(t)

	b.dispatch(t, "16-1", "block", "", 0)
	require.Eventually(t, func() bool { return b.runner.Calls("16-1") == 1 }, waitFor, tick)
	b.agent.Stop()
	res, ok := b.srv.final("16-1")
	require.True(t, ok, "the killed fire was reported before Stop returned")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Contains(t, res.Message, "shutting down")
}

func TestSpooledResultsSurviveRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.SpoolDir = t.TempDir()
		c.FlushTimeout = 100 * time.Millisecond
	})
	b.srv.setFailNext(1 << 30) // no server accepts anything
	b.start(t)

	b.dispatch(t, "17-1", "echo", "", 0)
	require.Eventually(t, func() bool { _, attempts := b.srv.counts(); return attempts > 0 }, waitFor, tick,
		"delivery was attempted (so the result is spooled)")
	b.agent.Stop()
	require.True(t, b.runKeyExists(t, "17-1"), "undelivered: the run key stays")

	// The node comes back (same uuid and spool) and the server recovers.
	b.srv.setFailNext(0)
	b.agent = b.newAgent(t)
	b.start(t)
	res := b.waitFinal(t, "17-1")
	require.Equal(t, cluster.StatusSuccess, res.Status)
	require.Equal(t, "17-1", res.Output)
	require.Equal(t, 1, b.runner.Calls("17-1"), "a spooled fire is not run again")
}

func TestStartTwiceFails(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	require.Error(t, b.agent.Start(t.Context()))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := New(Config{}, nil, newTestRunner())
	require.ErrorContains(t, err, "UUID is required")
	_, err = New(Config{UUID: "n"}, nil, newTestRunner())
	require.ErrorContains(t, err, "NodeToken is required")
	_, err = New(Config{UUID: "n", ServerURLs: []string{"ftp://x"}}, nil, newTestRunner())
	require.ErrorContains(t, err, "not an http(s) URL")
	_, err = New(Config{UUID: "n", ReportBatch: -1}, nil, newTestRunner())
	require.ErrorContains(t, err, "ReportBatch -1 must be positive")
	require.NoError(t, Config{UUID: "n", NodeToken: "t"}.withDefaults().Validate())
}

func TestCappedOutputKeepsValidUTF8(t *testing.T) {
	t.Parallel()
	o := newCappedOutput(5)
	_, _ = o.Write([]byte("abcé")) // 5 bytes exactly
	out, trunc := o.Result()
	require.Equal(t, "abcé", out)
	require.False(t, trunc)

	o = newCappedOutput(4)
	_, _ = o.Write([]byte("abcé")) // é is cut in half
	out, trunc = o.Result()
	require.Equal(t, "abc", out)
	require.True(t, trunc)

	o = newCappedOutput(3)
	n, err := o.Write([]byte("abcdef"))
	require.NoError(t, err)
	require.Equal(t, 6, n, "writes never fail")
	_, _ = o.Write([]byte("more"))
	out, trunc = o.Result()
	require.Equal(t, "abc", out)
	require.True(t, trunc)
}

func TestStartFailsWhenEtcdIsDown(t *testing.T) {
	t.Parallel()
	// A client whose etcd does not answer. (Closing an etcdtest server
	// early is not possible: its cleanup would close it twice.)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	a, err := New(Config{UUID: "n", NodeToken: "t", ServerURLs: []string{"http://127.0.0.1:1"}, Logger: testLogger()}, c,
		newTestRunner())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	require.Error(t, a.Start(ctx))
	a.Stop() // nothing left to stop
	require.Error(t, a.Start(t.Context()), "an Agent starts once")
}

func TestRunKeyDeletionFitsEtcdsTxnLimit(t *testing.T) {
	t.Parallel()
	// An etcd with the stock --max-txn-ops of 128, while the agent expects
	// the embedded etcd's 8192 and delivers batches of 200.
	e, err := embedetcd.Start(t.Context(), embedetcd.Config{Dir: t.TempDir(), MaxTxnOps: 128, UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	c, err := e.Client()
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	b := setupWith(t, c, func(c *Config) {
		c.ReportBatch = 200
		c.ReportInterval = 5 * time.Second // one batch of 200 (ReportBatch sends it at once), however slow the intake
	})
	b.start(t)
	for txn := range 2 {
		ops := make([]clientv3.Op, 100)
		for i := range ops {
			id := fmt.Sprintf("18-%d", 1000+txn*100+i)
			key := b.cfg.Keys.Run(b.cfg.UUID, id)
			ops[i] = clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "echo", "", 0)))
		}
		_, err := c.Txn(t.Context()).Then(ops...).Commit()
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return len(b.srv.all()) == 200 && b.runKeyCount(t) == 0 },
		waitFor, tick, "all run keys deleted despite the smaller txn limit")
	b.agent.Stop()
	require.Equal(t, stockMaxTxnOps, b.agent.txns.get(), "fell back to etcd's stock limit")
}

// A fire the previous node process started but never finished (it was
// killed mid-run) is reported lost after a restart, not run a second time.
func TestInterruptedFireIsReportedLostNotRerun(t *testing.T) {
	t.Parallel()
	spoolDir := t.TempDir()
	b := setup(t, func(c *Config) { c.SpoolDir = spoolDir })
	// What a killed process leaves: the start journal line and the run key.
	scheduled := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	line, err := json.Marshal(startEntry{FireID: "18-1", JobID: 18, Trigger: cluster.TriggerSchedule,
		ScheduledAt: scheduled, StartedAt: scheduled.Add(time.Second)})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(spoolDir, startLogName), append(line, '\n'), 0o600))
	b.dispatch(t, "18-1", "echo", "", 0)
	b.start(t)

	res := b.waitFinal(t, "18-1")
	require.Equal(t, cluster.StatusLost, res.Status)
	require.Contains(t, res.Message, "not run again")
	require.Equal(t, int64(18), res.JobID)
	require.True(t, res.ScheduledAt.Equal(scheduled))
	require.Equal(t, 0, b.runner.Calls("18-1"), "the interrupted fire is not run again")
	require.Eventually(t, func() bool { return !b.runKeyExists(t, "18-1") }, waitFor, tick,
		"its run key is removed once the lost report is stored")

	// A fire that starts now is journalled, and forgotten when it ends.
	b.dispatch(t, "18-2", "echo", "", 0)
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "18-2").Status)
	b.agent.starts.mu.Lock()
	_, still := b.agent.starts.running["18-2"]
	b.agent.starts.mu.Unlock()
	require.False(t, still)
}

// logRecorder keeps the messages logged at Warn or above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// Fires that finished before a restart are not reported "in progress" or
// lost by the next process, whether the previous one stopped gracefully or
// its journal lost the end lines (a crash right after the run keys were
// deleted).
func TestRestartDoesNotReportFinishedFiresLost(t *testing.T) {
	t.Parallel()
	spoolDir := t.TempDir()
	b := setup(t, func(c *Config) { c.SpoolDir = spoolDir })
	b.start(t)
	for i := range 3 {
		b.dispatch(t, fmt.Sprintf("18-%d", i), "echo", "", 0)
	}
	for i := range 3 {
		require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, fmt.Sprintf("18-%d", i)).Status)
	}
	b.agent.Stop()
	prev, err := readStartLog(filepath.Join(spoolDir, startLogName))
	require.NoError(t, err)
	require.Empty(t, prev, "every journalled fire has its end line")

	// A crash between the run key deletion and the end line: only the start line is left.
	line, err := json.Marshal(startEntry{FireID: "18-9", JobID: 18, StartedAt: time.Now().UTC()})
	require.NoError(t, err)
	f, err := os.OpenFile(filepath.Join(spoolDir, startLogName), os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = f.Write(append(line, '\n'))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	logs := &logRecorder{}
	b.cfg.Logger = slog.New(logs)
	b.agent = b.newAgent(t)
	b.start(t)
	b.dispatch(t, "18-10", "echo", "", 0)
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "18-10").Status)
	b.agent.Stop()
	for _, m := range logs.messages() {
		require.NotContains(t, m, "in progress", "no false in-progress warning")
	}
	for _, r := range b.srv.all() {
		require.NotEqual(t, cluster.StatusLost, r.Status, "no finished fire reported lost: %+v", r)
	}
}

// TestUndeliveredResultsSpillPastTheMemoryBound: while no server accepts
// results, the node holds at most ResultMemory of them in memory and leaves
// the rest in the spool only, also after a restart; once a server accepts
// again, every result is delivered once and in order, and no fire runs
// twice.
func TestUndeliveredResultsSpillPastTheMemoryBound(t *testing.T) {
	t.Parallel()
	const fires, memory = 60, 4 << 10 // each result is about 1 KiB
	spoolDir := t.TempDir()
	b := setup(t, func(c *Config) {
		c.SpoolDir = spoolDir
		c.ResultMemory = memory
		c.MaxConcurrent = 1 // results are produced in dispatch order
		c.ReportBatch = 7
		c.FlushTimeout = 100 * time.Millisecond
	})
	b.srv.setFailNext(1 << 30) // no server accepts anything
	b.start(t)

	want := make([]string, fires)
	ops := make([]clientv3.Op, fires)
	for i := range ops {
		id := fmt.Sprintf("19-%d", 1000+i)
		want[i] = id
		key := b.cfg.Keys.Run(b.cfg.UUID, id)
		ops[i] = clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "echo",
			fmt.Sprintf(`{"text":%q}`, id+strings.Repeat("x", 600)), 0)))
	}
	_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit()
	require.NoError(t, err)

	held := func(a *Agent) (queued, bytes, spilled int) {
		a.reporter.mu.Lock()
		defer a.reporter.mu.Unlock()
		if a.reporter.spool != nil {
			spilled = a.reporter.spool.Spilled()
		}
		return len(a.reporter.queue), a.reporter.queueBytes, spilled
	}
	require.Eventually(t, func() bool { q, _, s := held(b.agent); return q+s == fires }, waitFor, tick,
		"every fire ran and its result is queued or spilled")
	queued, bytes, spilled := held(b.agent)
	require.LessOrEqual(t, bytes, memory, "memory holds results up to the bound")
	require.Positive(t, queued)
	require.Greater(t, spilled, fires/2, "the rest wait in the spool only")
	b.agent.Stop()

	// The node restarts (same spool) while the servers still refuse: it
	// reads back only the oldest results up to the bound.
	b.agent = b.newAgent(t)
	b.start(t)
	queued, bytes, spilled = held(b.agent)
	require.Equal(t, fires, queued+spilled)
	require.LessOrEqual(t, bytes, 2*memory, "a restart holds about the bound (counted by line, not approxSize)")
	require.Greater(t, spilled, fires/2)

	b.srv.setFailNext(0)
	if !assert.Eventually(t, func() bool { return len(b.srv.all()) >= fires && b.runKeyCount(t) == 0 },
		waitFor, tick, "every result delivered once a server accepts") {
		q, by, sp := held(b.agent)
		t.Fatalf("delivered %d, run keys %d, queued %d (%d bytes), spilled %d", len(b.srv.all()), b.runKeyCount(t), q, by, sp)
	}
	got := make([]string, 0, fires)
	for _, r := range b.srv.all() {
		got = append(got, strings.TrimRight(r.Output, "x"))
		require.Equal(t, r.FireID, strings.TrimRight(r.Output, "x"), "each result keeps its own output")
	}
	require.Equal(t, want, got, "none lost, none doubled, order kept")
	for _, id := range want {
		require.Equal(t, 1, b.runner.Calls(id), "a spilled fire is not run again after the restart")
	}
	_, _, spilled = held(b.agent)
	require.Zero(t, spilled)
}
