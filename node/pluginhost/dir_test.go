package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// copyExec copies the executable src to dir/name.
func copyExec(t *testing.T, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(dst, b, 0o755))
	return dst
}

func TestParseChecksums(t *testing.T) {
	t.Parallel()
	good := strings.Repeat("ab", 32)
	got, err := ParseChecksums([]string{"notify=" + good, " cronix-plugin-sql = " + strings.ToUpper(good)})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"notify": good, "sql": good}, got)

	_, err = ParseChecksums([]string{"notify", "x=123", "=" + good})
	require.ErrorContains(t, err, `"notify": want name=sha256`)
	require.ErrorContains(t, err, `"123" is not a hex SHA-256`)
	require.ErrorContains(t, err, `"=`+good+`": want name=sha256`)
}

// TestPluginDirLoadsOnlyPinnedBinaries: one binary with the right checksum,
// one whose checksum is wrong and one with none; only the first is loaded,
// the others are logged by name, and the loaded third-party plugin (built
// by its own go build, imports only pluginapi) runs jobs.
func TestPluginDirLoadsOnlyPinnedBinaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyExec(t, notifyBin, dir, "cronix-plugin-notify")
	copyExec(t, notifyBin, dir, "cronix-plugin-tampered")
	copyExec(t, shellBin, dir, "cronix-plugin-unpinned")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a plugin"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cronix-plugin-data.txt"), []byte("x"), 0o644))

	sums, err := ParseChecksums([]string{
		"notify=" + fileSum(t, notifyBin),
		"tampered=" + strings.Repeat("0", 64),
	})
	require.NoError(t, err)
	logs := &plugintest.Output{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	specs, err := DirSpecs(logger, dir, sums)
	require.NoError(t, err)
	require.Len(t, specs, 2, "the unpinned binary is refused before it is started")
	require.Contains(t, logs.String(), "plugin refused: no checksum configured")
	require.Contains(t, logs.String(), "plugin=unpinned")
	require.Contains(t, logs.String(), "not an executable file")

	h := New(logger, specs)
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)
	require.Equal(t, []cluster.PluginInfo{{Name: "notify", Version: "1.0.0"}}, h.Handlers())
	failures := h.Failures()
	require.Len(t, failures, 1)
	require.ErrorContains(t, failures[0], `plugin "tampered"`)
	require.ErrorContains(t, failures[0], "does not match the configured SHA-256")
	require.Contains(t, logs.String(), "plugin=tampered")

	// Run a job through the third-party plugin process.
	var (
		mu  sync.Mutex
		got map[string]string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(hook.Close)
	params := json.RawMessage(fmt.Sprintf(`{"webhook_url":%q,"text":"{{job_name}} done"}`, hook.URL))
	require.NoError(t, h.Validate(t.Context(), "notify", params))
	ip, ok := pluginapi.AsInvalidParams(h.Validate(t.Context(), "notify", json.RawMessage(`{"text":"x"}`)))
	require.True(t, ok)
	require.Equal(t, "webhook_url", ip.Field())

	var out plugintest.Output
	res, err := h.Run(t.Context(), "notify", pluginapi.Request{FireID: "1-1", JobID: 1, JobName: "nightly", Params: params}, &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "sent"}, res)
	require.Contains(t, out.String(), "webhook answered 200 OK")
	mu.Lock()
	require.Equal(t, map[string]string{"text": "nightly done"}, got)
	mu.Unlock()
}

func TestDirSpecsFailsOnMissingDir(t *testing.T) {
	t.Parallel()
	_, err := DirSpecs(nil, filepath.Join(t.TempDir(), "nope"), nil)
	require.ErrorContains(t, err, "reading plugin dir")
}

func TestSpecEnvReachesThePlugin(t *testing.T) {
	t.Setenv("CRONIX_TEST_SPEC_ENV", "from-node") // the spec's value must win
	spec := shellSpec()
	spec.Env = []string{"CRONIX_TEST_SPEC_ENV=from-spec"}
	h, _ := startHost(t, spec)
	var out plugintest.Output
	res, err := h.Run(t.Context(), "shell", shellReq("f-env", `echo "$CRONIX_TEST_SPEC_ENV"`), &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Equal(t, "from-spec\n", out.String())
}
