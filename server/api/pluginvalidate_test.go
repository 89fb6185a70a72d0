package api_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/node"
	"github.com/cronix/cronix/node/pluginhost"
)

// startPluginHost starts a plugin host running the real shell plugin
// binary (built into the test's temp dir) when withShell, else none.
func startPluginHost(t *testing.T, withShell bool) *pluginhost.Host {
	t.Helper()
	var specs []pluginhost.Spec
	if withShell {
		bin, err := harness.BuildPackage(context.Background(), filepath.Join(t.TempDir(), "cronix-plugin-shell"),
			"./plugins/shell/cmd/cronix-plugin-shell")
		require.NoError(t, err)
		specs = append(specs, pluginhost.Spec{Name: "shell", Cmd: []string{bin}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := pluginhost.New(nil, specs)
	require.NoError(t, h.Start(ctx))
	t.Cleanup(h.Stop)
	require.Empty(t, h.Failures())
	return h
}

// serveNode serves the node's real validate endpoint over h and registers
// it in etcd as node uuid of group offering shell. It returns the number of
// validate calls the node has answered.
func serveNode(t *testing.T, b *bundle, h *pluginhost.Host, uuid, group string) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	mux := http.NewServeMux()
	validate := node.ValidateHandler(h, nodeToken)
	mux.Handle("POST "+node.ValidatePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		validate.ServeHTTP(w, r)
		calls.Add(1)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().(*net.TCPAddr)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{
		UUID: uuid, Group: group, IP: addr.IP.String(), Port: addr.Port, Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}},
	})
	return &calls
}

// deadAddress is a loopback address nothing listens on.
func deadAddress(t *testing.T) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().(*net.TCPAddr)
	require.NoError(t, l.Close())
	return addr
}

func TestJobSaveRunsPluginValidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	host := startPluginHost(t, true)

	// The shell plugin's real schema, published for the node, so the schema
	// check runs first and passes where the plugin's Validate does not.
	infos := host.Infos()
	require.Len(t, infos, 1)
	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: infos[0].Version, ParamsSchema: infos[0].ParamsSchema, Node: "pv-b"})
	calls := serveNode(t, b, host, "pv-b", "plug")

	saves := 0
	job := func(params map[string]any, pin string) map[string]any {
		saves++
		j := validJob()
		j["name"] = fmt.Sprintf("pv-%d", saves) // names are unique in a group
		j["group"] = "plug"
		j["params"] = params
		if pin != "" {
			j["node_uuid"] = pin
		}
		return j
	}
	before := b.jobTotal()

	// A blank script passes the schema (minLength 1) but not the plugin.
	e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, job(map[string]any{"script": "   "}, ""), http.StatusBadRequest)
	require.Equal(t, map[string]string{"params": "script: must not be empty"}, e.Fields)
	require.Equal(t, int64(1), calls.Load())
	require.Equal(t, before, b.jobTotal())

	// The schema check comes first: a schema failure never reaches the node.
	e = b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, job(map[string]any{"script": ""}, ""), http.StatusBadRequest)
	require.Contains(t, e.Fields["params"], "schema")
	require.Equal(t, int64(1), calls.Load())

	// Nor does a job with another field error.
	bad := job(map[string]any{"script": "   "}, "")
	bad["schedule"] = "not a schedule"
	e = b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, bad, http.StatusBadRequest)
	require.NotContains(t, e.Fields, "params")
	require.Equal(t, int64(1), calls.Load())

	// A valid job saves after the node said yes; so does its update.
	var saved struct {
		ID int64 `json:"id"`
	}
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job(map[string]any{"script": "echo hi", "interpreter": "bash"}, ""),
		http.StatusCreated, &saved)
	require.Equal(t, int64(2), calls.Load())
	e = b.errorOf(http.MethodPut, "/api/v1/jobs/"+strconv.FormatInt(saved.ID, 10), b.token,
		job(map[string]any{"script": "echo", "env": map[string]string{"A": "x\x00y"}}, ""), http.StatusBadRequest)
	require.Equal(t, map[string]string{"params": "env.A: must not contain NUL bytes"}, e.Fields)
	require.Equal(t, int64(3), calls.Load())

	// A node that cannot be reached does not block the save. pv-a sorts
	// before pv-b, so it is the node asked unless the job pins pv-b.
	dead := deadAddress(t)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{
		UUID: "pv-a", Group: "plug", IP: dead.IP.String(), Port: dead.Port, Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}},
	})
	e = b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, job(map[string]any{"script": "   "}, "pv-b"), http.StatusBadRequest)
	require.Equal(t, map[string]string{"params": "script: must not be empty"}, e.Fields)
	require.Equal(t, int64(4), calls.Load())
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job(map[string]any{"script": "   "}, ""), http.StatusCreated, nil)
	require.Equal(t, int64(4), calls.Load())
	require.Contains(t, b.logs.String(), "node unreachable")
	require.Equal(t, before+2, b.jobTotal())
}

func TestJobSaveNodeWithoutPluginDoesNotBlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The node registers shell but its host serves no plugin: it answers 502.
	calls := serveNode(t, b, startPluginHost(t, false), "pv-x", "plug")
	j := validJob()
	j["group"] = "plug"
	j["params"] = map[string]any{"script": "   "}
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, nil)
	require.Equal(t, int64(1), calls.Load())
	require.Contains(t, b.logs.String(), "node answered an error")
}
