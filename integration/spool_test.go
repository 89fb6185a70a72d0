package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

// spooledTerminal returns the fire ids of the terminal results queued in a
// node's spool log and not yet acknowledged.
func spooledTerminal(t *testing.T, nodeDir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(nodeDir, "spool", "results.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var queued []cluster.RunResult
	acked := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "R"):
			var r cluster.RunResult
			if json.Unmarshal([]byte(line[1:]), &r) == nil {
				queued = append(queued, r)
			}
		case strings.HasPrefix(line, "A"):
			var n int
			if _, err := fmt.Sscanf(line[1:], "%d", &n); err == nil {
				acked = n
			}
		}
	}
	var ids []string
	for i, r := range queued {
		if i >= acked && cluster.Terminal(r.Status) {
			ids = append(ids, r.FireID)
		}
	}
	sort.Strings(ids)
	return ids
}

func TestResultsSurviveServerOutage(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)
	token := nodeToken(t, dataDir)

	closed, err := harness.FreeAddr()
	require.NoError(t, err)
	nodeDir := t.TempDir()
	node, uuid := startNode(t, s, token, nodeDir, "far", "--server-urls", "http://"+closed)
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "far")) == 1 }, 20*time.Second, 100*time.Millisecond)

	fires := filepath.Join(t.TempDir(), "fires.log")
	job, err := s.api.CreateJobBody(map[string]any{"name": "far", "group": "far", "schedule": "@every 1h",
		"handler": "shell", "params": map[string]any{"script": `echo "$CRONIX_FIRE_ID" >> ` + fires + `; sleep 2; echo done`}})
	require.NoError(t, err)

	// Three manual fires, one at a time so no trigger request replaces a
	// pending one before the leader has taken it.
	for i := 1; i <= 3; i++ {
		code, err := s.api.Do(http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/trigger", job.ID), nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, code)
		waitRuns(t, s.api, job.ID, 20*time.Second, func(rs []harness.Run) bool { return len(rs) >= i })
	}
	// They run on the node, whose reports cannot be delivered: all three
	// finish into the spool, and the server has none of them as success.
	var spooled []string
	require.Eventually(t, func() bool { spooled = spooledTerminal(t, nodeDir); return len(spooled) >= 3 },
		40*time.Second, 100*time.Millisecond, "three finished results spooled")
	require.Len(t, spooled, 3)
	runs, total, err := s.api.Runs(job.ID, 500)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	for _, r := range runs {
		require.NotEqual(t, cluster.StatusSuccess, r.Status, "run %s reached the server without a reachable server URL", r.FireID)
	}

	// kill -9 and restart on the same data dir with the right server URL.
	node.Kill()
	_, uuid2 := startNode(t, s, token, nodeDir, "far", "--server-urls", s.api.Base)
	require.Equal(t, uuid, uuid2)

	runs = waitRuns(t, s.api, job.ID, 30*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 3 })
	require.Len(t, runs, 3, "no duplicate runs")
	var ids []string
	for _, r := range runs {
		require.Equal(t, cluster.StatusSuccess, r.Status)
		require.Equal(t, "done\n", r.Output)
		require.Equal(t, uuid, r.Node)
		require.Equal(t, "manual", r.Trigger)
		ids = append(ids, r.FireID)
	}
	sort.Strings(ids)
	require.Equal(t, spooled, ids, "the spooled results are the server's runs")

	b, err := os.ReadFile(fires)
	require.NoError(t, err)
	lines := strings.Fields(string(b))
	sort.Strings(lines)
	require.Equal(t, ids, lines, "every fire ran exactly once")
	// The server records a delivery before the node reads its answer and
	// marks the spool: wait for the mark.
	left := spooledTerminal(t, nodeDir)
	for deadline := time.Now().Add(30 * time.Second); len(left) > 0 && time.Now().Before(deadline); {
		<-time.After(20 * time.Millisecond)
		left = spooledTerminal(t, nodeDir)
	}
	require.Empty(t, left, "the spool is drained")
}
