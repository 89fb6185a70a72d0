package agent

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

func retries(n, interval int) func(*cluster.JobConfig) {
	return func(j *cluster.JobConfig) { j.RetryCount, j.RetryIntervalSeconds = n, interval }
}

func TestRetriesUntilSuccessWithGrowingBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.RetryBackoffBase = 50 * time.Millisecond })
	b.start(t)

	b.dispatchJob(t, "1-1000", "flaky", `{"succeed_at":3}`, retries(3, 0))
	res := b.waitFinal(t, "1-1000")

	require.Equal(t, cluster.StatusSuccess, res.Status)
	require.Equal(t, 3, res.Attempt, "attempts made")
	require.Contains(t, res.Output, "try 1\n")
	require.Contains(t, res.Output, "--- attempt 2/4 (after exit code 1) ---\ntry 2\n")
	require.Contains(t, res.Output, "--- attempt 3/4 (after exit code 1) ---\ntry 3\n")
	attempts, times := b.runner.callInfo("1-1000")
	require.Equal(t, []int{1, 2, 3}, attempts)
	require.GreaterOrEqual(t, times[1].Sub(times[0]), 50*time.Millisecond, "first pause: base")
	require.GreaterOrEqual(t, times[2].Sub(times[1]), 100*time.Millisecond, "second pause: 2×base")
	for _, r := range b.srv.of("1-1000") {
		if r.Status == cluster.StatusRunning {
			require.GreaterOrEqual(t, r.Attempt, 1)
		}
	}
}

func TestRetriesExhaustedReportsLastFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.RetryBackoffBase = 10 * time.Millisecond })
	b.start(t)

	b.dispatchJob(t, "2-1000", "fail", "", retries(2, 0))
	res := b.waitFinal(t, "2-1000")
	require.Equal(t, cluster.StatusFailed, res.Status)
	require.Equal(t, 3, res.Attempt)
	require.Equal(t, 3, b.runner.Calls("2-1000"))
	require.Equal(t, "attempt 3/3: exit status 3", res.Message)
	require.NotNil(t, res.ExitCode)
	require.Equal(t, 3, *res.ExitCode)
	require.Equal(t, "boom\n--- attempt 2/3 (after exit code 3) ---\nboom\n--- attempt 3/3 (after exit code 3) ---\nboom", res.Output)
}

func TestRetryFixedIntervalAndTimeoutRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	// The job's interval (1s) wins over the backoff; a timeout is retried.
	b.dispatchJob(t, "3-1000", "sleep", "", func(j *cluster.JobConfig) {
		j.RetryCount, j.RetryIntervalSeconds, j.TimeoutSeconds = 1, 1, 1
	})
	res := b.waitFinal(t, "3-1000")
	require.Equal(t, cluster.StatusTimeout, res.Status)
	require.Equal(t, 2, res.Attempt)
	require.Contains(t, res.Output, "--- attempt 2/2 (after timeout) ---")
	_, times := b.runner.callInfo("3-1000")
	require.Len(t, times, 2)
	require.GreaterOrEqual(t, times[1].Sub(times[0]), 2*time.Second, "1s timeout + 1s interval")
}

func TestPermanentErrorIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.RetryBackoffBase = 10 * time.Millisecond })
	b.start(t)

	b.dispatchJob(t, "4-1000", "permanent", "", retries(3, 0))
	res := b.waitFinal(t, "4-1000")
	require.Equal(t, cluster.StatusFailed, res.Status)
	require.Equal(t, 1, res.Attempt)
	require.Equal(t, 1, b.runner.Calls("4-1000"))
	require.Contains(t, res.Message, "no such host")
}

func TestRetryPauseGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	a := &Agent{cfg: Config{RetryBackoffBase: time.Second, RetryBackoffMax: 60 * time.Second}}
	var got []time.Duration
	for n := 1; n <= 8; n++ {
		got = append(got, a.retryPause(cluster.JobConfig{}, n))
	}
	s := time.Second
	require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s}, got)
	require.Equal(t, 5*s, a.retryPause(cluster.JobConfig{RetryIntervalSeconds: 5}, 3))
}

// running waits until the runner was called for a fire.
func (b *bundle) running(t *testing.T, fireID string) {
	t.Helper()
	require.Eventually(t, func() bool { return b.runner.Calls(fireID) > 0 }, waitFor, tick, "fire %s running", fireID)
}

// held waits until the agent holds a fire (queued or running).
func (b *bundle) held(t *testing.T, fireID string) {
	t.Helper()
	require.Eventually(t, func() bool { _, ok := b.agent.lookup(fireID); return ok }, waitFor, tick,
		"fire %s taken", fireID)
}

func block(strategy string) func(*cluster.JobConfig) {
	return func(j *cluster.JobConfig) { j.BlockStrategy = strategy }
}

func TestBlockSerialRunsOverlappingFiresInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatchJob(t, "5-1000", "block", "", block(cluster.BlockSerial))
	b.running(t, "5-1000")
	b.dispatchJob(t, "5-2000", "block", "", block(""))
	b.dispatchJob(t, "5-3000", "block", "", block(""))
	b.held(t, "5-3000")
	require.Zero(t, b.runner.Calls("5-2000"), "queued behind the running fire")
	require.Zero(t, b.runner.Calls("5-3000"))

	b.runner.release <- struct{}{}
	first := b.waitFinal(t, "5-1000")
	b.running(t, "5-2000")
	require.Zero(t, b.runner.Calls("5-3000"), "FIFO")
	b.runner.release <- struct{}{}
	second := b.waitFinal(t, "5-2000")
	b.runner.release <- struct{}{}
	third := b.waitFinal(t, "5-3000")
	for _, r := range []cluster.RunResult{first, second, third} {
		require.Equal(t, cluster.StatusSuccess, r.Status)
	}
	require.False(t, second.StartedAt.Before(*first.FinishedAt))
	require.False(t, third.StartedAt.Before(*second.FinishedAt))
}

func TestBlockDiscardLaterSkipsTheNewFire(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatchJob(t, "6-1000", "block", "", block(cluster.BlockDiscardLater))
	b.running(t, "6-1000")
	b.dispatchJob(t, "6-2000", "block", "", block(cluster.BlockDiscardLater))
	skipped := b.waitFinal(t, "6-2000")
	require.Equal(t, cluster.StatusSkipped, skipped.Status)
	require.Contains(t, skipped.Message, "6-1000")
	require.Contains(t, skipped.Message, "DISCARD_LATER")
	require.Zero(t, b.runner.Calls("6-2000"))
	_, done := b.srv.final("6-1000")
	require.False(t, done, "the running fire goes on")

	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "6-1000").Status)
	// Once the job is idle, a new fire runs.
	b.dispatchJob(t, "6-3000", "echo", "", block(cluster.BlockDiscardLater))
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "6-3000").Status)
}

func TestBlockCoverEarlyKillsTheRunningFire(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)

	b.dispatchJob(t, "7-1000", "block", "", block(cluster.BlockCoverEarly))
	b.running(t, "7-1000")
	b.dispatchJob(t, "7-2000", "block", "", block(cluster.BlockCoverEarly))
	covered := b.waitFinal(t, "7-1000")
	require.Equal(t, cluster.StatusKilled, covered.Status)
	require.Contains(t, covered.Message, "covered by 7-2000")
	require.Equal(t, 1, covered.Attempt)

	b.running(t, "7-2000")
	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "7-2000").Status)
}

// procKeys returns this node's proc keys and their values.
func (b *bundle) procKeys(t *testing.T) (map[string]cluster.ProcInfo, map[string]int64) {
	resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.ProcPrefix(b.cfg.UUID), clientv3.WithPrefix())
	if err != nil {
		return nil, nil
	}
	out, leases := map[string]cluster.ProcInfo{}, map[string]int64{}
	for _, kv := range resp.Kvs {
		var p cluster.ProcInfo
		if json.Unmarshal(kv.Value, &p) == nil {
			out[string(kv.Key)] = p
			leases[string(kv.Key)] = kv.Lease
		}
	}
	return out, leases
}

// procKeyOf waits for the proc key of a fire and returns it.
func (b *bundle) procKeyOf(t *testing.T, fireID string) (string, cluster.ProcInfo) {
	t.Helper()
	var (
		key  string
		info cluster.ProcInfo
	)
	require.Eventually(t, func() bool {
		procs, _ := b.procKeys(t)
		for k, p := range procs {
			if p.FireID == fireID {
				key, info = k, p
				return true
			}
		}
		return false
	}, waitFor, tick, "proc key of %s", fireID)
	return key, info
}

func TestProcKeyOnlyForLongRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProcThreshold = 300 * time.Millisecond })
	b.start(t)

	// A short run never writes a proc key: none at any revision of its life.
	before, err := b.etcd.Get(t.Context(), b.cfg.Keys.NodePrefix())
	require.NoError(t, err)
	b.dispatch(t, "8-1000", "echo", "", 0)
	b.waitFinal(t, "8-1000")
	after, err := b.etcd.Get(t.Context(), b.cfg.Keys.NodePrefix())
	require.NoError(t, err)
	for rev := before.Header.Revision; rev <= after.Header.Revision; rev++ {
		resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.ProcPrefix(b.cfg.UUID), clientv3.WithPrefix(),
			clientv3.WithRev(rev), clientv3.WithCountOnly())
		require.NoError(t, err)
		require.Zero(t, resp.Count, "proc key at revision %d", rev)
	}

	// A long one does, under the registration lease, and removes it at the end.
	b.dispatch(t, "8-2000", "block", "", 0)
	key, info := b.procKeyOf(t, "8-2000")
	_, leases := b.procKeys(t)
	_, regLease, ok := b.nodeInfo(t)
	require.True(t, ok)
	require.Equal(t, regLease, leases[key])
	require.Equal(t, b.cfg.Keys.Proc(b.cfg.UUID, 8, info.PID), key)
	require.False(t, info.Killed)
	require.False(t, info.Started.IsZero())

	b.runner.release <- struct{}{}
	b.waitFinal(t, "8-2000")
	require.Eventually(t, func() bool { procs, leases := b.procKeys(t); return procs != nil && len(leases) == 0 },
		waitFor, tick, "proc key removed when the run ended")
}

func TestKillThroughProcKey(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProcThreshold = 100 * time.Millisecond })
	b.start(t)

	b.dispatchJob(t, "9-1000", "sleep", "", retries(3, 0))
	key, info := b.procKeyOf(t, "9-1000")
	info.Killed = true
	v, err := json.Marshal(info)
	require.NoError(t, err)
	asked := time.Now()
	_, err = b.etcd.Put(t.Context(), key, seal(t, key, string(v)), clientv3.WithIgnoreLease())
	require.NoError(t, err)

	require.Eventually(t, func() bool { _, ok := b.srv.final("9-1000"); return ok }, time.Second, tick,
		"killed within 1s")
	res, _ := b.srv.final("9-1000")
	require.Less(t, time.Since(asked), 2*time.Second)
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Contains(t, res.Message, "killed by request")
	require.Equal(t, 1, b.runner.Calls("9-1000"), "a kill is not retried")
	require.Eventually(t, func() bool { procs, _ := b.procKeys(t); return procs != nil && len(procs) == 0 },
		waitFor, tick, "proc key removed")
}

func TestKillThroughKillKey(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProcThreshold = time.Minute })
	b.start(t)

	// Running, no proc key yet.
	b.dispatch(t, "10-1000", "sleep", "", 0)
	b.running(t, "10-1000")
	_, err := b.etcd.Put(t.Context(), b.cfg.Keys.Kill(b.cfg.UUID, "10-1000"), seal(t, b.cfg.Keys.Kill(b.cfg.UUID, "10-1000"), "{}"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := b.srv.final("10-1000"); return ok }, time.Second, tick,
		"killed within 1s")
	res, _ := b.srv.final("10-1000")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Eventually(t, func() bool {
		resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.KillPrefix(b.cfg.UUID), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, waitFor, tick, "kill key deleted once acted on")

	// Queued behind a running fire of its job: killed without running.
	b.dispatch(t, "11-1000", "block", "", 0)
	b.running(t, "11-1000")
	b.dispatch(t, "11-2000", "block", "", 0)
	b.held(t, "11-2000")
	_, err = b.etcd.Put(t.Context(), b.cfg.Keys.Kill(b.cfg.UUID, "11-2000"), seal(t, b.cfg.Keys.Kill(b.cfg.UUID, "11-2000"), "{}"))
	require.NoError(t, err)
	res = b.waitFinal(t, "11-2000")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Zero(t, b.runner.Calls("11-2000"))
	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "11-1000").Status)

	// Requested before the dispatch arrives: killed without running.
	_, err = b.etcd.Put(t.Context(), b.cfg.Keys.Kill(b.cfg.UUID, "12-1000"), seal(t, b.cfg.Keys.Kill(b.cfg.UUID, "12-1000"), "{}"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, err := b.etcd.Get(t.Context(), b.cfg.Keys.KillPrefix(b.cfg.UUID), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, waitFor, tick)
	b.dispatch(t, "12-1000", "echo", "", 0)
	res = b.waitFinal(t, "12-1000")
	require.Equal(t, cluster.StatusKilled, res.Status)
	require.Zero(t, b.runner.Calls("12-1000"))
}

func TestLiveOutputStreamsWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	srv := httptest.NewServer(func() http.Handler {
		mux := http.NewServeMux()
		mux.Handle("GET "+OutputPath, b.agent.OutputHandler("node-secret"))
		return mux
	}())
	t.Cleanup(srv.Close)
	get := func(fireID, token, query string) *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/runs/"+fireID+"/output"+query, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusUnauthorized, get("13-1000", "", "").StatusCode)
	require.Equal(t, http.StatusNotFound, get("13-1000", "node-secret", "").StatusCode)

	b.dispatch(t, "13-1000", "stream", "", 0)
	b.running(t, "13-1000")
	resp := get("13-1000", "node-secret", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first\n", line, "output so far, while the run goes on")

	snap := get("13-1000", "node-secret", "?follow=0")
	body, err := io.ReadAll(snap.Body)
	require.NoError(t, err)
	require.Equal(t, "first\n", string(body), "follow=0: output so far, then the reply ends")

	b.runner.step <- struct{}{}
	line, err = rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "second\n", line, "new output as it comes")
	b.runner.release <- struct{}{}
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the stream ends with the run")
	require.Empty(t, rest)
	require.Equal(t, "first\nsecond\n", b.waitFinal(t, "13-1000").Output)
}
