package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// TestRefusedPluginsListedByNodeAPI: a real node with a plugin dir loads
// the pinned example plugin, refuses the same binary copied under another
// name (its checksum entry names a handler it does not serve) and a binary
// without a checksum, and GET /api/v1/nodes/{uuid} lists each refusal with
// its reason.
func TestRefusedPluginsListedByNodeAPI(t *testing.T) {
	pluginDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	notify, err := harness.BuildPackage(ctx, filepath.Join(pluginDir, "cronix-plugin-notify"), "./plugins/example")
	require.NoError(t, err)
	copyFile := func(to string) {
		src, err := os.Open(notify)
		require.NoError(t, err)
		defer src.Close()
		dst, err := os.OpenFile(filepath.Join(pluginDir, to), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(dst, src)
		require.NoError(t, err)
		require.NoError(t, dst.Close())
	}
	copyFile("cronix-plugin-copy")
	copyFile("cronix-plugin-stray")
	b, err := os.ReadFile(notify)
	require.NoError(t, err)
	h := sha256.Sum256(b)
	sum := hex.EncodeToString(h[:])

	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)
	_, uuid := startNode(t, s, nodeToken(t, dataDir), t.TempDir(), "plugins", "--plugin-dir", pluginDir,
		"--plugin-checksums", "notify="+sum+",copy="+sum)

	type pluginStatus struct {
		Name, Handler, State, Reason, Message string
	}
	var node struct {
		Plugins []struct {
			Name string `json:"name"`
		} `json:"plugins"`
		PluginStatus []pluginStatus `json:"plugin_status"`
	}
	byName := map[string]pluginStatus{}
	require.Eventually(t, func() bool {
		code, err := s.api.Do(http.MethodGet, "/api/v1/nodes/"+uuid, nil, &node)
		if err != nil || code != http.StatusOK {
			return false
		}
		for _, p := range node.PluginStatus {
			byName[p.Name] = p
		}
		return byName["copy"].State != "" && byName["stray"].State != "" && byName["notify"].State != ""
	}, 30*time.Second, 200*time.Millisecond, "the node lists its plugin dir's binaries")
	t.Logf("plugin_status: %+v", node.PluginStatus)

	require.Equal(t, "loaded", byName["notify"].State)
	require.Equal(t, "notify", byName["notify"].Handler)
	require.Equal(t, "refused", byName["copy"].State)
	require.Equal(t, "handler_not_pinned", byName["copy"].Reason)
	require.Contains(t, byName["copy"].Message, `serves handler "notify"`)
	require.Equal(t, "refused", byName["stray"].State)
	require.Equal(t, "missing_checksum", byName["stray"].Reason)
	require.NotEmpty(t, byName["stray"].Message)
	var served []string
	for _, p := range node.Plugins {
		served = append(served, p.Name)
	}
	require.True(t, slices.Contains(served, "notify"), "served handlers: %v", served)
	require.False(t, slices.Contains(served, "copy"), "served handlers: %v", served)
	require.False(t, slices.Contains(served, "stray"), "served handlers: %v", served)
}
