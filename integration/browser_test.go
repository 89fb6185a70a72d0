package integration

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebAdminInChromium drives the web admin in real Chromium (Playwright,
// ui/web/e2e/browser.mjs) against a real cronix standalone: keyboard login,
// a job created through the form with a schema-rendered params form and the
// cron preview, its runs and output, a trigger with a params override, live
// output and kill of a long run, edit / compare versions / restore, both
// languages, what a viewer sees, and no console error throughout.
//
// It needs node, ui/web/node_modules and Chromium (/usr/bin/chromium or
// $CHROMIUM); without them it skips, except with CI=true, where it fails.
// CRONIX_SCREENSHOTS=1 writes the screenshots to docs/screenshots (install
// Debian's fonts-noto-cjk first, or the Chinese pictures show empty boxes).
func TestWebAdminInChromium(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	web := filepath.Join(root, "ui", "web")
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "ui/web/node_modules (npm ci in ui/web)")
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium)
	}
	if len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser test cannot run: missing %s", strings.Join(missing, ", "))
		}
		t.Skipf("browser test skipped: missing %s", strings.Join(missing, ", "))
	}

	s := startStandalone(t, t.TempDir(), nil)
	// A job must run on the standalone's node before the form can offer its handler.
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "default")) > 0 }, 60*time.Second, 200*time.Millisecond)

	env := append(os.Environ(),
		"CRONIX_URL="+s.api.Base,
		"CRONIX_USER=admin",
		"CRONIX_PASSWORD="+adminPassword,
		"CRONIX_TOKEN="+s.api.Token,
		"CHROMIUM="+chromium,
	)
	viewer := createViewer(t, s)
	env = append(env, "VIEWER_USER="+viewer, "VIEWER_PASSWORD="+viewerPassword)
	if os.Getenv("CRONIX_SCREENSHOTS") == "1" {
		env = append(env, "SCREENSHOT_DIR="+filepath.Join(root, "docs", "screenshots"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(web, "e2e", "browser.mjs"))
	cmd.Dir = web
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("browser.mjs output:\n%s", out)
	require.NoError(t, err, "the browser test failed")
	require.Contains(t, string(out), "PASS")
}

const viewerPassword = "viewer-pw-123456"

// createViewer creates a viewer user of the default group through the users
// API: it can read that group's jobs but change nothing.
func createViewer(t *testing.T, s *standalone) string {
	t.Helper()
	// The node's group is registered a moment after the node itself.
	var def int64
	require.Eventually(t, func() bool {
		var groups struct {
			Items []struct {
				ID      int64  `json:"id"`
				AppName string `json:"appname"`
			} `json:"items"`
		}
		code, err := s.api.Do(http.MethodGet, "/api/v1/groups?appname=default", nil, &groups)
		if err != nil || code != http.StatusOK {
			return false
		}
		for _, g := range groups.Items {
			if g.AppName == "default" {
				def = g.ID
			}
		}
		return def != 0
	}, 60*time.Second, 200*time.Millisecond, "the standalone's default group is registered")
	var out map[string]any
	code, err := s.api.Do(http.MethodPost, "/api/v1/users",
		map[string]any{"username": "vera", "password": viewerPassword, "role": "viewer", "groups": []int64{def}}, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, "create viewer: %v", out)
	return "vera"
}
