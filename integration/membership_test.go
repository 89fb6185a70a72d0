package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

type memberView struct {
	Leader struct {
		ID string `json:"id"`
	} `json:"leader"`
	Term     uint64 `json:"term"`
	Replicas []struct {
		ID       string `json:"id"`
		Suffrage string `json:"suffrage"`
	} `json:"replicas"`
}

func suffrage(v memberView, id string) string {
	for _, r := range v.Replicas {
		if r.ID == id {
			return r.Suffrage
		}
	}
	return ""
}

// requireEverySecond checks that every whole second in [from, to] has a
// successful run, and that no second ran twice.
func requireEverySecond(t *testing.T, runs []harness.Run, from, to time.Time) {
	t.Helper()
	requireOncePerSecond(t, runs)
	ok := map[int64]bool{}
	for _, r := range successes(runs) {
		ok[r.ScheduledAt.Unix()] = true
	}
	for s := from.Truncate(time.Second).Add(time.Second); !s.After(to); s = s.Add(time.Second) {
		require.True(t, ok[s.Unix()], "no successful run scheduled at %s", s.Format(time.TimeOnly))
	}
}

// TestMembershipDeadVoterAndRecovery: adding a server with a dead address
// to a 3-replica cluster makes it a non-voter that is never promoted, and
// scheduling misses no fire in the next 30 s; removing it succeeds. Then 2
// of 3 replicas are killed, the leader fence in etcd is left at a term
// above the survivor's (as after a lost lineage), "cronix raft recover"
// runs on the survivor, and jobs fire again within 10 s of its start, with
// no etcd or SQL wipe and no fire duplicated.
func TestMembershipDeadVoterAndRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-replica cluster for about a minute")
	}
	dir := t.TempDir()
	c, err := harness.StartCluster(harness.ClusterConfig{Binary: binary, Dir: dir, AdminPassword: adminPassword,
		NodeToken: "member-token", Env: []string{"CRONIX_LOG_LEVEL=info"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, r := range c.Replicas {
				t.Logf("%s output:\n%s", r.ID, r.Output())
			}
		}
	})
	_, _, err = c.StartNode(filepath.Join(dir, "node"), "default", "--lease-ttl", "3s")
	require.NoError(t, err)
	li, err := c.Leader(60*time.Second, -1)
	require.NoError(t, err)
	api := c.Replicas[li].API
	job, err := api.CreateJob(harness.Job{Name: "tick", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`)})
	require.NoError(t, err)
	waitRuns(t, api, job.ID, 60*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 2 })

	// A dead address: a port nothing listens on.
	dead, err := harness.FreeAddr()
	require.NoError(t, err)
	added := time.Now()
	var view memberView
	code, err := api.Do(http.MethodPost, "/api/v1/cluster/servers", map[string]string{"id": "ghost", "address": dead}, &view)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "Nonvoter", suffrage(view, "ghost"))

	// 30 s of scheduling with the dead member in the configuration.
	require.Eventually(t, func() bool { return time.Since(added) > 32*time.Second }, time.Minute, time.Second)
	code, err = api.Do(http.MethodGet, "/api/v1/cluster", nil, &view)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "Nonvoter", suffrage(view, "ghost"), "a dead server must never be promoted")
	runs := waitRuns(t, api, job.ID, 30*time.Second, func(rs []harness.Run) bool {
		for _, r := range successes(rs) {
			if r.ScheduledAt.After(added.Add(30 * time.Second)) {
				return true
			}
		}
		return false
	})
	requireEverySecond(t, runs, added, added.Add(30*time.Second))

	code, err = api.Do(http.MethodDelete, "/api/v1/cluster/servers/ghost", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)

	// Lose the quorum: kill the leader and one more; stop the survivor.
	li, err = c.Leader(30*time.Second, -1)
	require.NoError(t, err)
	survivor := (li + 1) % 3
	for i := range c.Replicas {
		c.Kill9(i)
	}
	lost := time.Now()

	// A stale fence: a term far above anything the survivor used.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdURL}, DialTimeout: 30 * time.Second,
		Logger: zap.NewNop(), Username: "root", Password: c.EtcdPassword()})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := cluster.NewKeys("")
	resp, err := cli.Get(ctx, keys.Leader())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	term, _, err := cluster.ParseLeaderValue(string(resp.Kvs[0].Value))
	require.NoError(t, err)
	_, err = cli.Put(ctx, keys.Leader(), cluster.LeaderValue(term+1000, "lost-lineage"))
	require.NoError(t, err)

	r := c.Replicas[survivor]
	cmd := exec.Command(binary, "raft", "recover", "--data-dir", r.DataDir, "--peers", r.ID+"="+r.RaftAddr,
		"--etcd-endpoints", c.EtcdURL)
	cmd.Env = append(cmd.Environ(), c.EtcdEnv()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("raft recover: %s", out)

	started := time.Now()
	require.NoError(t, c.Restart(survivor, 90*time.Second))
	require.Eventually(t, func() bool {
		var v memberView
		code, err := c.Replicas[survivor].API.Do(http.MethodGet, "/api/v1/cluster", nil, &v)
		return err == nil && code == http.StatusOK && v.Leader.ID == r.ID && v.Term > term+1000
	}, 30*time.Second, 100*time.Millisecond, "the survivor leads with a term above the stale fence")
	api = c.Replicas[survivor].API
	var firstAfter time.Time
	runs = waitRuns(t, api, job.ID, 60*time.Second, func(rs []harness.Run) bool {
		for _, run := range successes(rs) {
			if run.ScheduledAt.After(started) && run.FinishedAt != nil {
				firstAfter = *run.FinishedAt
				return true
			}
		}
		return false
	})
	t.Logf("quorum lost at %s; survivor started %s later; first fire ran %s after its start",
		lost.Format(time.TimeOnly), started.Sub(lost).Round(100*time.Millisecond), firstAfter.Sub(started).Round(100*time.Millisecond))
	require.Less(t, firstAfter.Sub(started), 10*time.Second, "jobs fire again within 10 s")
	requireOncePerSecond(t, runs)
}
