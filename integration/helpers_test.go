package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// nodeToken reads the node token a standalone generated into its data dir.
func nodeToken(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "node-token"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

var nodeRunning = regexp.MustCompile(`node (\S+) is running`)

// joinEnv is the environment a node joining a standalone gets, read from
// its data dir as the README says: the node token and the embedded etcd's
// root credentials.
func joinEnv(t *testing.T, dataDir string) []string {
	t.Helper()
	return []string{"CRONIX_NODE_TOKEN=" + nodeToken(t, dataDir), "CRONIX_ETCD_USERNAME=root",
		"CRONIX_ETCD_PASSWORD=" + etcdPassword(t, dataDir)}
}

// etcdPassword reads the embedded etcd's root password from a standalone's
// data dir.
func etcdPassword(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "etcd-root-password"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// startNode starts "cronix node" against the standalone's etcd and returns
// the process and the node's uuid (as it printed it).
func startNode(t *testing.T, s *standalone, token, dataDir, group string, extra ...string) (*harness.Proc, string) {
	t.Helper()
	args := append([]string{"node", "--data-dir", dataDir, "--etcd-endpoints", s.etcdURL, "--group", group,
		"--lease-ttl", "3s"}, extra...)
	p, err := harness.Start(binary, append([]string{"CRONIX_NODE_TOKEN=" + token, "CRONIX_ETCD_USERNAME=root",
		"CRONIX_ETCD_PASSWORD=" + etcdPassword(t, s.dataDir)}, s.env...), args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
		if t.Failed() {
			t.Logf("node %s output:\n%s", dataDir, p.Output())
		}
	})
	uuid, err := p.WaitOutput(nodeRunning, 60*time.Second)
	require.NoError(t, err)
	return p, uuid
}

// liveNodes returns the uuids of the live nodes of group, sorted.
func liveNodes(t *testing.T, api *harness.Client, group string) []string {
	t.Helper()
	var out struct {
		Items []struct {
			UUID  string `json:"uuid"`
			Group string `json:"group"`
		} `json:"items"`
	}
	code, err := api.Do(http.MethodGet, "/api/v1/nodes", nil, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	var ids []string
	for _, n := range out.Items {
		if n.Group == group {
			ids = append(ids, n.UUID)
		}
	}
	sort.Strings(ids)
	return ids
}

// byScheduled returns runs sorted oldest scheduled first (ties by fire id).
func byScheduled(runs []harness.Run) []harness.Run {
	out := append([]harness.Run(nil), runs...)
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ScheduledAt.Equal(out[j].ScheduledAt) {
			return out[i].ScheduledAt.Before(out[j].ScheduledAt)
		}
		return out[i].FireID < out[j].FireID
	})
	return out
}

// scheduledAfter keeps the runs scheduled strictly after t.
func scheduledAfter(runs []harness.Run, t time.Time) []harness.Run {
	var out []harness.Run
	for _, r := range runs {
		if r.ScheduledAt.After(t) {
			out = append(out, r)
		}
	}
	return out
}

// scheduledBefore keeps the runs scheduled strictly before t.
func scheduledBefore(runs []harness.Run, t time.Time) []harness.Run {
	var out []harness.Run
	for _, r := range runs {
		if r.ScheduledAt.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// nodesOf lists the nodes of runs in order.
func nodesOf(runs []harness.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.Node
	}
	return out
}

// distinct counts each value.
func distinct(xs []string) map[string]int {
	m := map[string]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}
