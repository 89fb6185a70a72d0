// Package wordcount_test runs the TypeScript plugin in this folder (Node.js,
// @grpc/grpc-js, no Go SDK) through the node's plugin host: go-plugin's
// handshake, protocol v2 from pluginapi/proto/v2/handler.proto, Describe,
// Validate with a field error, and Run with streamed output.
//
// It needs node and this folder's node_modules (npm ci). Without them it
// skips, except under CI=true, where it fails: .ci/run installs them.
package wordcount_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// requireNode skips (or, under CI=true, fails) without node and the npm
// modules, and builds the plugin (tsc) into dist/.
func requireNode(t *testing.T) string {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; .ci/run must install it (npm ci in plugins/examples/node-wordcount)", what)
		}
		t.Skipf("%s: run npm ci in plugins/examples/node-wordcount to run this test", what)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		missing("node_modules is missing")
	}
	out, err := exec.CommandContext(t.Context(), tsc, "-p", dir).CombinedOutput()
	require.NoError(t, err, "tsc: %s", out)
	return filepath.Join(dir, "cronix-plugin-wordcount")
}

func TestTypeScriptPluginSpeaksTheProtocol(t *testing.T) {
	bin := requireNode(t)
	sum := fileSum(t, bin)
	h := pluginhost.New(nil, []pluginhost.Spec{{Name: "wordcount", Cmd: []string{bin}, SHA256: sum, Handler: "wordcount"}},
		pluginhost.Options{StartTimeout: time.Minute})
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)

	st := h.Status()
	require.Len(t, st, 1)
	require.Equal(t, cluster.PluginLoaded, st[0].State, st[0].Message)
	require.Equal(t, pluginapi.ProtocolVersion, st[0].Protocol)
	infos := h.Infos()
	require.Equal(t, "wordcount", infos[0].Name)
	require.Equal(t, "1.0.0", infos[0].Version)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(infos[0].ParamsSchema, &schema))
	require.Equal(t, []any{"text"}, schema["required"])

	require.NoError(t, h.Validate(t.Context(), "wordcount", json.RawMessage(`{"text":"a b"}`)))
	ip, ok := pluginapi.AsInvalidParams(h.Validate(t.Context(), "wordcount", json.RawMessage(`{}`)))
	require.True(t, ok, "a field error from TypeScript keeps its kind")
	require.Equal(t, "text", ip.Field())

	var out plugintest.Output
	res, err := h.Run(t.Context(), "wordcount", pluginapi.Request{FireID: "9-1000", Attempt: 1,
		Params: json.RawMessage(`{"text":"the quick brown fox"}`)}, &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "4 words"}, res)
	require.Equal(t, "fire 9-1000 attempt 1\nwords: 4\n", out.String())

	res, err = h.Run(t.Context(), "wordcount", pluginapi.Request{FireID: "9-2000", Params: json.RawMessage(`{"text":""}`)}, &out)
	ip, ok = pluginapi.AsInvalidParams(err)
	require.True(t, ok, "Run's handler error keeps its kind: %v", err)
	require.Equal(t, "text", ip.Field())
	require.Equal(t, pluginapi.StatusFailed, res.Status)
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
