package integration

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// TestJobsSaveWithoutLiveNode (issue 13): a standalone accepts a job at
// once after /healthz, before or while its node registers; a job for a
// group whose only node is stopped is accepted with a warning and fires
// once the node returns; an unknown handler is refused listing the known
// ones. Groups of registering nodes exist without any call.
func TestJobsSaveWithoutLiveNode(t *testing.T) {
	dataDir := t.TempDir()
	httpAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	etcdAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	peerAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	raftAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	s := &standalone{
		etcdURL: "http://" + etcdAddr,
		dataDir: dataDir,
		api:     harness.NewClient("http://" + httpAddr),
	}
	// No token exists before /healthz answers, so the first request after
	// it is the login (bcrypt: a few hundred ms here); the job create
	// follows with nothing in between, before the built-in node registers.
	args := []string{"standalone", "--data-dir", dataDir,
		"--http-addr", httpAddr, "--etcd-client-addr", etcdAddr, "--etcd-peer-addr", peerAddr, "--raft-addr", raftAddr}
	env := []string{"CRONIX_ADMIN_PASSWORD=" + adminPassword}
	start := func() *harness.Proc {
		p, err := harness.Start(binary, env, args...)
		require.NoError(t, err)
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
		return p
	}
	p := start()
	require.NoError(t, s.api.WaitHealthy(60*time.Second))
	healthy := time.Now()
	require.NoError(t, s.api.Login("admin", adminPassword))
	loggedIn := time.Since(healthy)
	var created struct {
		ID       int64    `json:"id"`
		Warnings []string `json:"warnings"`
	}
	sent := time.Now()
	status, err := s.api.Do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "early", "schedule": "*/1 * * * * *",
		"handler": "shell", "params": map[string]any{"script": "echo early"}}, &created)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	t.Logf("job created %s after /healthz (login took %s, the save %s); warnings: %v",
		time.Since(healthy).Round(time.Millisecond), loggedIn.Round(time.Millisecond), time.Since(sent).Round(time.Millisecond), created.Warnings)
	waitRuns(t, s.api, created.ID, 60*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 1 })

	// A separate node of group "edge" registers: the group exists with it.
	token := nodeToken(t, dataDir)
	nodeDir := t.TempDir()
	node, uuid := startNode(t, s, token, nodeDir, "edge")
	require.Eventually(t, func() bool {
		var groups struct {
			Items []struct {
				AppName     string `json:"appname"`
				AddressType string `json:"address_type"`
			} `json:"items"`
		}
		code, err := s.api.Do(http.MethodGet, "/api/v1/groups?appname=edge", nil, &groups)
		return err == nil && code == http.StatusOK && len(groups.Items) == 1 && groups.Items[0].AddressType == "auto"
	}, 30*time.Second, 100*time.Millisecond, "the node's group is registered")
	require.Equal(t, []string{uuid}, liveNodes(t, s.api, "edge"))

	// Its only node stops: a job for the group is accepted with a warning.
	require.NoError(t, node.Interrupt(30*time.Second))
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "edge")) == 0 }, 30*time.Second, 100*time.Millisecond)
	status, err = s.api.Do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "edge-job", "group": "edge",
		"schedule": "*/1 * * * * *", "handler": "shell", "params": map[string]any{"script": "echo edge"}}, &created)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	require.Len(t, created.Warnings, 1)
	require.Contains(t, created.Warnings[0], `no live node of group "edge" offers handler "shell" now`)

	// The node returns: the job fires there.
	_, back := startNode(t, s, token, nodeDir, "edge")
	require.Equal(t, uuid, back)
	runs := waitRuns(t, s.api, created.ID, 60*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 1 })
	for _, r := range successes(runs) {
		require.Equal(t, uuid, r.Node)
		require.Equal(t, "edge\n", r.Output)
	}

	// A handler no node ever offered is refused, naming the known ones.
	var e struct {
		Fields map[string]string `json:"fields"`
	}
	status, err = s.api.Do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "typo", "schedule": "@every 1m",
		"handler": "shel"}, &e)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, status)
	require.Regexp(t, regexp.MustCompile(`^unknown handler "shel": no node has ever offered it \(known: .*shell`), e.Fields["handler"])
	for _, h := range []string{"cmd", "http", "shell"} {
		require.True(t, strings.Contains(e.Fields["handler"], h), "%s listed: %s", h, e.Fields["handler"])
	}

	// A portal holding an API token across a restart: its job, created in
	// the first 100 ms after /healthz answers (the built-in node has not
	// registered again yet), is accepted and fires.
	var tok struct {
		Secret string `json:"secret"`
	}
	status, err = s.api.Do(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "importer", "role": "admin",
		"groups": []int64{}}, &tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	require.NoError(t, p.Interrupt(60*time.Second))
	start()
	portal := harness.NewClient(s.api.Base)
	portal.Token = tok.Secret
	require.NoError(t, portal.WaitHealthy(60*time.Second))
	healthy = time.Now()
	created.Warnings = nil
	sentAfter := time.Since(healthy)
	status, err = portal.Do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "right-after-healthz",
		"schedule": "*/1 * * * * *", "handler": "shell", "params": map[string]any{"script": "echo imported"}}, &created)
	answeredAfter := time.Since(healthy)
	require.NoError(t, err)
	require.Less(t, sentAfter, 100*time.Millisecond, "the job was sent within 100 ms of /healthz")
	require.Equal(t, http.StatusCreated, status, "a job sent %s after /healthz is accepted", sentAfter)
	t.Logf("job sent %s and saved %s after /healthz; warnings: %v", sentAfter.Round(time.Millisecond),
		answeredAfter.Round(time.Millisecond), created.Warnings)
	runs = waitRuns(t, portal, created.ID, 60*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 1 })
	require.Equal(t, "imported\n", successes(runs)[0].Output)
}
