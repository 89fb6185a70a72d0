package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/health"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/store"
)

// TestMetricsNeedAUserAndReadyzNamesTheFailingCheck: on the API port
// /metrics answers 401 without a token and the exposition with one;
// /readyz answers 503 naming the failing check, /healthz stays 200.
func TestMetricsNeedAUserAndReadyzNamesTheFailingCheck(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = auth.EnsureAdmin(ctx, st, adminPassword)
	require.NoError(t, err)

	met := metrics.New()
	met.Fired(metrics.FireDispatched, 3)
	ready := &health.Checker{}
	ready.Add("sql", st.Ping)
	ready.Add("leader", func(context.Context) error { return errors.New("no raft leader known") })
	srv := httptest.NewServer(api.New(api.Config{Store: st, Etcd: etcdtest.Client(t), Keys: cluster.NewKeys(""),
		NodeToken: nodeToken, Ready: ready.ReadyHandler(), Metrics: met.Handler()}))
	t.Cleanup(srv.Close)

	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}

	code, body := get("/metrics", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, body, "cronix_fires_total")
	code, _ = get("/metrics", nodeToken) // the node token is not a user's
	require.Equal(t, http.StatusUnauthorized, code)

	code, body = get("/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status":"not ready","checks":{"sql":"ok","leader":"no raft leader known"},"failing":["leader"]}`, body)
	code, body = get("/healthz", "")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)

	token := login(t, srv.URL)
	code, body = get("/metrics", token)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `cronix_fires_total{outcome="dispatched"} 3`)
	require.True(t, strings.Contains(body, "go_goroutines"), "the Go collector is registered")
}

func login(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/auth/login", "application/json",
		strings.NewReader(`{"username":"admin","password":"`+adminPassword+`"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	_, rest, ok := strings.Cut(string(b), `"token":"`)
	require.True(t, ok, string(b))
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}
