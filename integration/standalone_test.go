// Package integration runs real cronix processes end to end: the binary is
// built once, started as a user would start it, and checked through its API
// and etcd.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cronix-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	binary, err = harness.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The processes the tests start (and kill) put their temp files here,
	// not in the system's temp dir: a node killed with -9 leaves its
	// plugins' sockets (in a temp dir named after its data dir when that
	// is too deep for a socket path, as every test's is) and the shell
	// plugin's script dirs of the runs it had in flight.
	harness.ProcessTempDir = filepath.Join(dir, "tmp")
	if err := os.Mkdir(harness.ProcessTempDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// standalone is a running "cronix standalone" with its addresses.
type standalone struct {
	proc    *harness.Proc
	api     *harness.Client
	etcdURL string
	dataDir string
	args    []string
	env     []string
}

const adminPassword = "it-secret-pw"

// newStandalone picks free addresses for a standalone in dataDir started
// with extra flags (startStandalone starts it).
func newStandalone(t *testing.T, dataDir string, extra ...string) *standalone {
	t.Helper()
	httpAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	etcdAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	peerAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	raftAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	return &standalone{
		etcdURL: "http://" + etcdAddr,
		dataDir: dataDir,
		args: append([]string{"standalone", "--data-dir", dataDir, "--http-addr", httpAddr,
			"--etcd-client-addr", etcdAddr, "--etcd-peer-addr", peerAddr, "--raft-addr", raftAddr}, extra...),
		env: []string{"CRONIX_ADMIN_PASSWORD=" + adminPassword},
		api: harness.NewClient("http://" + httpAddr),
	}
}

// startStandalone starts prev again, or a new standalone in dataDir.
func startStandalone(t *testing.T, dataDir string, prev *standalone) *standalone {
	t.Helper()
	s := prev
	if s == nil {
		s = newStandalone(t, dataDir)
	}
	p, err := harness.Start(binary, s.env, s.args...)
	require.NoError(t, err)
	s.proc = p
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
		if t.Failed() {
			t.Logf("standalone output:\n%s", p.Output())
		}
	})
	_, err = p.WaitOutput(regexp.MustCompile(`URL:\s+(\S+)`), 60*time.Second)
	require.NoError(t, err)
	require.NoError(t, s.api.WaitReady(30*time.Second))
	require.NoError(t, s.api.Login("admin", adminPassword))
	return s
}

// waitRuns polls a job's runs until cond holds for them or the deadline passes.
func waitRuns(t *testing.T, api *harness.Client, jobID int64, timeout time.Duration, cond func([]harness.Run) bool) []harness.Run {
	t.Helper()
	var runs []harness.Run
	require.Eventually(t, func() bool {
		var err error
		runs, _, err = api.Runs(jobID, 500)
		return err == nil && cond(runs)
	}, timeout, 200*time.Millisecond, "runs of job %d never satisfied the condition; last: %+v", jobID, runs)
	return runs
}

func successes(runs []harness.Run) []harness.Run {
	var out []harness.Run
	for _, r := range runs {
		if r.Status == cluster.StatusSuccess {
			out = append(out, r)
		}
	}
	return out
}

// requireOncePerSecond checks that scheduled times are whole distinct seconds.
func requireOncePerSecond(t *testing.T, runs []harness.Run) {
	t.Helper()
	seen := map[int64]string{}
	for _, r := range runs {
		sec := r.ScheduledAt.Unix()
		require.Equal(t, int64(0), r.ScheduledAt.UnixMilli()%1000, "scheduled at a whole second: %v", r.ScheduledAt)
		if prev, dup := seen[sec]; dup {
			t.Fatalf("scheduled second %v fired twice: %s and %s", r.ScheduledAt, prev, r.FireID)
		}
		seen[sec] = r.FireID
	}
}

func TestStandaloneFiresEverySecondAndSurvivesRestart(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)

	job, err := s.api.CreateJob(harness.Job{Name: "hello", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"echo hello"}`)})
	require.NoError(t, err)
	require.NotZero(t, job.ID)

	runs := waitRuns(t, s.api, job.ID, 30*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 3 })
	for _, r := range successes(runs) {
		require.Equal(t, "hello\n", r.Output)
		require.NotNil(t, r.ExitCode)
		require.Equal(t, 0, *r.ExitCode)
		require.NotEmpty(t, r.Node)
		require.NotNil(t, r.StartedAt)
		require.NotNil(t, r.FinishedAt)
		require.Equal(t, cluster.FireID(job.ID, r.ScheduledAt), r.FireID)
	}
	requireOncePerSecond(t, runs)

	// Ctrl-C, then start again on the same data: job and history remain,
	// firing resumes, and no scheduled second runs twice.
	require.NoError(t, s.proc.Interrupt(30*time.Second))
	before, totalBefore := runs, len(runs)
	s = startStandalone(t, dataDir, s)
	var got harness.Job
	code, err := s.api.Do("GET", fmt.Sprintf("/api/v1/jobs/%d", job.ID), nil, &got)
	require.NoError(t, err)
	require.Equal(t, 200, code)
	require.Equal(t, "hello", got.Name)

	lastBefore := before[0].ScheduledAt
	after := waitRuns(t, s.api, job.ID, 30*time.Second, func(rs []harness.Run) bool {
		n := 0
		for _, r := range successes(rs) {
			if r.ScheduledAt.After(lastBefore) && r.StartedAt != nil && r.StartedAt.After(lastBefore.Add(time.Second)) {
				n++
			}
		}
		return n >= 3 && len(rs) >= totalBefore
	})
	requireOncePerSecond(t, after)
	ids := map[string]bool{}
	for _, r := range before {
		ids[r.FireID] = true
	}
	found := 0
	for _, r := range after {
		if ids[r.FireID] {
			found++
		}
	}
	require.Equal(t, len(before), found, "every run from before the restart is still in the history")
	for _, r := range after {
		if r.ScheduledAt.Before(time.Now().Add(-10 * time.Second)) {
			require.True(t, cluster.Terminal(r.Status), "run %s scheduled %v is still %s", r.FireID, r.ScheduledAt, r.Status)
		}
	}
}

// TestSeparateNodeKill9ReregistersAndRuns: the embedded etcd refuses a
// client without credentials (its root password is in the data dir, mode
// 0600); a node started as the README says, with the data dir's node token
// and etcd password, joins, runs jobs, and after kill -9 registers again.
func TestSeparateNodeKill9ReregistersAndRuns(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)
	for _, f := range []string{"node-token", "etcd-root-password"} {
		fi, err := os.Stat(filepath.Join(dataDir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}

	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer anon.Close()
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = anon.Put(actx, cluster.NewKeys("").Run("some-node", "1-1"), `{"job_id":1}`)
	require.ErrorIs(t, err, rpctypes.ErrUserEmpty, "an etcd client without credentials must be refused")
	_, err = anon.Get(actx, "/Cronix/", clientv3.WithPrefix())
	require.ErrorIs(t, err, rpctypes.ErrUserEmpty)
	acancel()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 30 * time.Second, Logger: zap.NewNop(),
		Username: "root", Password: etcdPassword(t, dataDir)})
	require.NoError(t, err)
	defer cli.Close()
	keys := cluster.NewKeys("")

	nodeDir := t.TempDir()
	startNode := func() *harness.Proc {
		p, err := harness.Start(binary, joinEnv(t, dataDir),
			"node", "--data-dir", nodeDir, "--etcd-endpoints", s.etcdURL, "--group", "edge", "--lease-ttl", "3s")
		require.NoError(t, err)
		t.Cleanup(func() {
			select {
			case <-p.Done():
			default:
				p.KillGroup()
			}
			if t.Failed() {
				t.Logf("node output:\n%s", p.Output())
			}
		})
		_, err = p.WaitOutput(regexp.MustCompile(`node \S+ is running`), 60*time.Second)
		require.NoError(t, err)
		return p
	}
	nodeKey := func() (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, keys.NodePrefix(), clientv3.WithPrefix())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			var n cluster.NodeInfo
			require.NoError(t, json.Unmarshal(kv.Value, &n))
			if n.Group == "edge" {
				return n.UUID, true
			}
		}
		return "", false
	}

	p := startNode()
	var uuid string
	require.Eventually(t, func() bool { var ok bool; uuid, ok = nodeKey(); return ok }, 20*time.Second, 100*time.Millisecond)

	p.Kill()
	gone := time.Now()
	require.Eventually(t, func() bool { _, ok := nodeKey(); return !ok }, 10*time.Second, 100*time.Millisecond,
		"node key must disappear within the 3s lease TTL (plus slack)")
	t.Logf("node key gone %s after kill -9", time.Since(gone).Round(100*time.Millisecond))

	startNode()
	require.Eventually(t, func() bool { id, ok := nodeKey(); return ok && id == uuid }, 20*time.Second, 100*time.Millisecond,
		"restarted node registers again with the same uuid")

	job, err := s.api.CreateJob(harness.Job{Name: "edge", Group: "edge", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"echo edge"}`)})
	require.NoError(t, err)
	runs := waitRuns(t, s.api, job.ID, 30*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 2 })
	for _, r := range successes(runs) {
		require.Equal(t, uuid, r.Node)
		require.Equal(t, "edge\n", r.Output)
	}
}
