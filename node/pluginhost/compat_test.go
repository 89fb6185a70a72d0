package pluginhost

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// TestFrozenV1PluginOnCurrentHost is the protocol compatibility test: a
// plugin built only from the frozen copy of protocol v1
// (internal/testplugins/v1frozen, no import of today's SDK) is loaded by
// the current host, which negotiates v1 with it; Info, Validate (with the
// error kind and field) and Run work. The current SDK's plugins negotiate
// the current version on the same host.
func TestFrozenV1PluginOnCurrentHost(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, Spec{Name: "frozen", Cmd: []string{frozenBin}, Handler: "frozen"}, shellSpec())
	byName := map[string]cluster.PluginStatus{}
	for _, st := range h.Status() {
		byName[st.Name] = st
	}
	require.Equal(t, cluster.PluginLoaded, byName["frozen"].State, byName["frozen"].Message)
	require.Equal(t, pluginapi.PreviousProtocolVersion, byName["frozen"].Protocol)
	require.Equal(t, "1.0.0", byName["frozen"].Version)
	require.Equal(t, pluginapi.ProtocolVersion, byName["shell"].Protocol)

	infos := h.Infos()
	require.Equal(t, "frozen", infos[0].Name)
	require.JSONEq(t, `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`, string(infos[0].ParamsSchema))

	require.NoError(t, h.Validate(t.Context(), "frozen", json.RawMessage(`{"text":"hi"}`)))
	ip, ok := pluginapi.AsInvalidParams(h.Validate(t.Context(), "frozen", json.RawMessage(`{}`)))
	require.True(t, ok, "the v1 error kind survives the version bridge")
	require.Equal(t, "text", ip.Field())

	var out plugintest.Output
	res, err := h.Run(t.Context(), "frozen", pluginapi.Request{FireID: "7-1000", Attempt: 2, Params: json.RawMessage(`{"text":"hi"}`)}, &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "v1 ok"}, res)
	require.Equal(t, "frozen v1 plugin ran fire 7-1000 (attempt 2)\n", out.String())

	// A v1 plugin does not wait for StartAt: the host does, before calling it.
	require.False(t, h.HoldsStartAt("frozen"))
	require.True(t, h.HoldsStartAt("shell"), "a plugin of the current SDK holds StartAt itself")
	at := time.Now().Add(300 * time.Millisecond)
	res, err = h.Run(t.Context(), "frozen", pluginapi.Request{FireID: "7-2000", Attempt: 1, StartAt: at,
		Params: json.RawMessage(`{"text":"hi"}`)}, &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.False(t, time.Now().Before(at), "the run ended before its StartAt")
}

// TestCurrentPluginOnV1Host: a plugin built with today's SDK still serves a
// host that only speaks protocol v1 (an older node).
func TestCurrentPluginOnV1Host(t *testing.T) {
	t.Parallel()
	cfg := pluginapi.ClientConfig(exec.Command(shellBin))
	cfg.VersionedPlugins = map[int]goplugin.PluginSet{
		pluginapi.PreviousProtocolVersion: pluginapi.VersionedPlugins[pluginapi.PreviousProtocolVersion],
	}
	client := goplugin.NewClient(cfg)
	t.Cleanup(client.Kill)
	hd, err := pluginapi.Dispense(client)
	require.NoError(t, err)
	require.Equal(t, pluginapi.PreviousProtocolVersion, client.NegotiatedVersion())
	info, err := hd.Info(t.Context())
	require.NoError(t, err)
	require.Equal(t, "shell", info.Name)
	var out plugintest.Output
	res, err := hd.Run(t.Context(), shellReq("f-v1", "echo over v1"), &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Equal(t, "over v1\n", out.String())
	_, ok := pluginapi.AsInvalidParams(hd.Validate(t.Context(), json.RawMessage(`{}`)))
	require.True(t, ok, "error kinds survive v1 too")
}
