package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/api/authzmatrix"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/compat"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/raftha"
	"github.com/cronix/cronix/server/store"
)

// TestEveryRouteHasARule walks the router: a route without an entry in
// authz.Routes fails here (and answers 500 at run time), and an entry
// without a route is stale.
func TestEveryRouteHasARule(t *testing.T) {
	t.Parallel()
	routes, err := api.Routes()
	require.NoError(t, err)
	require.NotEmpty(t, routes)
	for _, k := range routes {
		method, path, _ := strings.Cut(k, " ")
		_, ok := authz.Lookup(method, path)
		require.True(t, ok, "route %s has no entry in authz.Routes (server/authz/authz.go): add one", k)
	}
	for k := range authz.Routes {
		require.True(t, slices.Contains(routes, k), "authz.Routes has %s but the router serves no such route", k)
	}
}

// inProcess serves the API in this process on a real SQLite store and a
// real embedded etcd. Raft membership is a fake (fakeCluster): this process
// runs no raft; the integration suite runs the same matrix against a real
// "cronix standalone" (integration.TestAuthorizationMatrixStandalone).
func inProcess(t *testing.T) authzmatrix.Target {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = auth.EnsureAdmin(ctx, st, adminPassword)
	require.NoError(t, err)
	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("")
	fc := &fakeCluster{st: raftha.Status{ID: "s1", Address: "127.0.0.1:7001", State: "Leader", Term: 3,
		LeaderID: "s1", LeaderAddress: "127.0.0.1:7001",
		Servers: []raftha.Server{{ID: "s1", Address: "127.0.0.1:7001", Suffrage: "Voter"}}}}
	hook := alerttest.StartWebhook(t, "whsec_dGVzdC1rZXk=", nil)
	alerts, err := alert.New(alert.Config{Store: st, BaseURL: "http://cronix.test", WebhookAllowLoopback: true,
		Flags: alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}}})
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(api.Config{Store: st, Etcd: cli, Keys: keys, Location: time.UTC,
		NodeToken: nodeToken, Cluster: fc, Logger: slog.New(slog.DiscardHandler), Alerts: alerts,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("# metrics\n")) }),
		Compat:  compat.New(compat.Config{Store: st, Etcd: cli, Keys: keys, Location: time.UTC})}))
	t.Cleanup(srv.Close)
	return authzmatrix.Target{Base: srv.URL, Client: srv.Client(), Store: st, Etcd: cli, Keys: keys,
		Cluster: fakeMembership{fc}, AdminPassword: adminPassword, NodeToken: nodeToken, Webhook: "ops"}
}

// fakeMembership counts the fake cluster's servers for the matrix.
type fakeMembership struct{ *fakeCluster }

func (f fakeMembership) Servers(context.Context) (int, error) {
	st, err := f.Status()
	return len(st.Servers), err
}

// TestAuthorizationMatrix: every route × every kind of caller × an object
// in and out of the caller's groups, in process (see authzmatrix).
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	authzmatrix.Check(t, inProcess(t))
}

// TestViewerChangesNothing: a viewer's every unsafe request is refused and
// no row, etcd key or raft server changes.
func TestViewerChangesNothing(t *testing.T) {
	t.Parallel()
	authzmatrix.ViewerChangesNothing(t, inProcess(t))
}

// TestListsAreFiltered: users of group A list only group A's jobs, runs and
// groups, natively and through xxl-job's API.
func TestListsAreFiltered(t *testing.T) {
	t.Parallel()
	authzmatrix.ListsAreFiltered(t, inProcess(t))
}
