package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// haCluster is the status body of GET /api/v1/cluster this test reads.
type haCluster struct {
	This   string `json:"this"`
	State  string `json:"state"`
	Term   uint64 `json:"term"`
	Leader struct {
		ID string `json:"id"`
	} `json:"leader"`
	Replicas []struct {
		ID    string `json:"id"`
		URL   string `json:"url"`
		Alive bool   `json:"alive"`
	} `json:"replicas"`
}

func haStatus(c *harness.Client) (haCluster, error) {
	var st haCluster
	code, err := c.Do(http.MethodGet, "/api/v1/cluster", nil, &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /api/v1/cluster: status %d", code)
	}
	return st, err
}

func haStart(t *testing.T, env []string, args ...string) *harness.Proc {
	t.Helper()
	p, err := harness.Start(binary, env, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", strings.Join(args[:min(3, len(args))], " "), p.Output())
		}
	})
	return p
}

// TestHAFailover: cronix etcd + three servers bootstrapped with --raft-peers
// on one SQLite file; kill -9 the leader, and another replica names a new
// leader within 5 s.
func TestHAFailover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	etcdClient, err := harness.FreeAddr()
	require.NoError(t, err)
	etcdPeer, err := harness.FreeAddr()
	require.NoError(t, err)
	e := haStart(t, nil, "etcd", "--data-dir", filepath.Join(dir, "etcd"), "--client-addr", etcdClient, "--peer-addr", etcdPeer)
	_, err = e.WaitOutput(regexp.MustCompile(`etcd is running: http://`+regexp.QuoteMeta(etcdClient)), 60*time.Second)
	require.NoError(t, err)

	const n = 3
	raftAddrs, httpAddrs := make([]string, n), make([]string, n)
	var peers []string
	for i := range n {
		raftAddrs[i], err = harness.FreeAddr()
		require.NoError(t, err)
		httpAddrs[i], err = harness.FreeAddr()
		require.NoError(t, err)
		peers = append(peers, fmt.Sprintf("s%d=%s", i+1, raftAddrs[i]))
	}
	env := []string{"CRONIX_NODE_TOKEN=ha-token", "CRONIX_ADMIN_PASSWORD=ha-admin-pw"}
	dsn := "sqlite://" + filepath.Join(dir, "cronix.db")
	procs := make([]*harness.Proc, n)
	clients := make([]*harness.Client, n)
	for i := range n {
		procs[i] = haStart(t, env, "server", "--id", fmt.Sprintf("s%d", i+1), "--raft-addr", raftAddrs[i],
			"--raft-peers", strings.Join(peers, ","), "--etcd-endpoints", "http://"+etcdClient, "--db", dsn,
			"--http-addr", httpAddrs[i], "--data-dir", filepath.Join(dir, fmt.Sprintf("s%d", i+1)))
		// One at a time: the first creates the schema and the admin user.
		_, err = procs[i].WaitOutput(regexp.MustCompile(`server s\d is running`), 60*time.Second)
		require.NoError(t, err)
		clients[i] = harness.NewClient("http://" + httpAddrs[i])
		require.NoError(t, clients[i].Login("admin", "ha-admin-pw"))
	}

	// Every replica agrees on one leader and sees all three registered.
	var leader string
	require.Eventually(t, func() bool {
		leader = ""
		for _, c := range clients {
			st, err := haStatus(c)
			if err != nil || st.Leader.ID == "" || (leader != "" && st.Leader.ID != leader) || len(st.Replicas) != n {
				return false
			}
			for _, r := range st.Replicas {
				if !r.Alive || r.URL == "" {
					return false
				}
			}
			leader = st.Leader.ID
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "replicas never agreed on a leader")

	var li int
	_, err = fmt.Sscanf(leader, "s%d", &li)
	require.NoError(t, err)
	li--
	procs[li].Kill()
	killed := time.Now()
	other := clients[(li+1)%n]
	var st haCluster
	require.Eventually(t, func() bool {
		st, err = haStatus(other)
		return err == nil && st.Leader.ID != "" && st.Leader.ID != leader
	}, 5*time.Second, 20*time.Millisecond, "no new leader within 5 s of killing %s", leader)
	t.Logf("leader %s killed; %s leads after %s (term %d)", leader, st.Leader.ID, time.Since(killed), st.Term)
}
