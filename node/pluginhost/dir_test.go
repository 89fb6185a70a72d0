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
	"github.com/cronix/cronix/plugins/shell"
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
	// A pinned binary copied under another name, with a checksum entry for
	// that name: it must not serve "notify", the handler its entry does
	// not name.
	copyExec(t, notifyBin, dir, "cronix-plugin-copy")
	// A second binary offering "shell", which the built-in already serves.
	copyExec(t, shellBin, dir, "cronix-plugin-shell")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a plugin"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cronix-plugin-data.txt"), []byte("x"), 0o644))

	sums, err := ParseChecksums([]string{
		"notify=" + fileSum(t, notifyBin),
		"tampered=" + strings.Repeat("0", 64),
		"copy=" + fileSum(t, notifyBin),
		"shell=" + fileSum(t, shellBin),
	})
	require.NoError(t, err)
	logs := &plugintest.Output{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	specs, err := DirSpecs(logger, dir, sums)
	require.NoError(t, err)
	require.Len(t, specs, 5)
	for _, sp := range specs {
		if sp.Name == "unpinned" {
			require.NotNil(t, sp.Refused, "the unpinned binary is refused before it is started")
		} else {
			require.Nil(t, sp.Refused, sp.Name)
			require.Equal(t, sp.Name, sp.Handler, "a checksum entry pins its handler name")
		}
	}
	require.Contains(t, logs.String(), "plugin refused: no checksum configured")
	require.Contains(t, logs.String(), "plugin=unpinned")
	require.Contains(t, logs.String(), "not an executable file")

	// The built-in shell comes first, as on a node (named apart here to
	// tell the two statuses apart).
	h := New(logger, append([]Spec{{Name: "builtin-shell", Cmd: []string{shellBin}}}, specs...))
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)
	require.Equal(t, []cluster.PluginInfo{{Name: "notify", Version: "1.0.0"}, {Name: shell.Name, Version: shell.Version}}, h.Handlers())
	require.Len(t, h.Failures(), 4)
	require.Contains(t, logs.String(), "plugin=tampered")

	byName := map[string]cluster.PluginStatus{}
	for _, st := range h.Status() {
		byName[st.Name] = st
	}
	t.Logf("status: %+v", h.Status())
	require.Len(t, byName, 6, "the built-in shell and the five plugin-dir binaries")
	require.Equal(t, cluster.PluginLoaded, byName["notify"].State)
	require.Equal(t, "1.0.0", byName["notify"].Version)
	require.Equal(t, pluginapi.ProtocolVersion, byName["notify"].Protocol)
	for name, reason := range map[string]string{
		"tampered": cluster.PluginReasonChecksumMismatch,
		"unpinned": cluster.PluginReasonMissingChecksum,
		"copy":     cluster.PluginReasonHandlerNotPinned,
		"shell":    cluster.PluginReasonConflict,
	} {
		st := byName[name]
		require.Equal(t, cluster.PluginRefused, st.State, name)
		require.Equal(t, reason, st.Reason, name)
		require.NotEmpty(t, st.Message, name)
	}
	require.Contains(t, byName["copy"].Message, `serves handler "notify" but its checksum entry pins it to handler "copy"`)
	require.Contains(t, byName["shell"].Message, `already served by plugin "builtin-shell"`)

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
