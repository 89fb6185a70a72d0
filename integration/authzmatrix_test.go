package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/alert/alerttest"
	"github.com/cronix/cronix/server/api/authzmatrix"
	"github.com/cronix/cronix/server/store"
)

// apiMembership changes and counts raft membership through the admin API
// of a real server.
type apiMembership struct{ admin *harness.Client }

func (m apiMembership) AddNonvoter(_ context.Context, id, address string) error {
	code, err := m.admin.Do(http.MethodPost, "/api/v1/cluster/servers", map[string]string{"id": id, "address": address}, nil)
	if err == nil && code/100 != 2 {
		return fmt.Errorf("adding server %s: status %d", id, code)
	}
	return err
}

func (m apiMembership) Servers(context.Context) (int, error) {
	var st struct {
		Servers []any `json:"servers"`
	}
	code, err := m.admin.Do(http.MethodGet, "/api/v1/cluster", nil, &st)
	if err == nil && code != http.StatusOK {
		return 0, fmt.Errorf("cluster status: %d", code)
	}
	return len(st.Servers), err
}

// TestAuthorizationMatrixStandalone (access issue, acceptance 1, 2 and 3) runs
// the authorization matrix (server/api/authzmatrix: every route of the
// router × anonymous, viewer and operator of group A, admin, an API token
// of group A, the node token × an object in group A and one in group B)
// against a real "cronix standalone": its real raft (a server the matrix
// adds is a non-voter with a dead address, so quorum is never at stake),
// its authenticated embedded etcd and its SQLite database, which the test
// opens beside the server to put its fixtures. Then users of group A list
// only group A's objects (acceptance 2), and a viewer's every unsafe request
// is refused and changes nothing.
func TestAuthorizationMatrixStandalone(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "whsec_dGVzdC1rZXk=", nil)
	dir := t.TempDir()
	s := newStandalone(t, dir, "--alert-webhook-url", hook.URL, "--alert-webhook-secret", hook.Secret,
		"--alert-webhook-allow-loopback")
	s = startStandalone(t, dir, s)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 5 * time.Second,
		Username: "root", Password: etcdPassword(t, dir)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })

	tg := authzmatrix.Target{Base: s.api.Base, Client: &http.Client{Timeout: 30 * time.Second}, Store: st, Etcd: cli,
		Keys: cluster.NewKeys(""), Cluster: apiMembership{s.api}, AdminPassword: adminPassword,
		NodeToken: nodeToken(t, dir), Webhook: "default"}
	t.Run("matrix", func(t *testing.T) {
		tg := tg
		tg.Prefix = "m-"
		authzmatrix.Check(t, tg)
	})
	t.Run("lists are filtered", func(t *testing.T) {
		tg := tg
		tg.Prefix = "l-"
		authzmatrix.ListsAreFiltered(t, tg)
	})
	t.Run("viewer changes nothing", func(t *testing.T) {
		tg := tg
		tg.Prefix = "v-"
		authzmatrix.ViewerChangesNothing(t, tg)
	})
}
