package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/internal/testcerts"
)

// etcdRoles sets up the RBAC of docs/deployment.md: the user
// cronix-server may write every Cronix prefix and the server registry; the
// user cronix-node reads them and writes only what a node owns.
func etcdRoles(ctx context.Context, t *testing.T, root *clientv3.Client) {
	t.Helper()
	const (
		server = "cronix-server"
		node   = "cronix-node"
	)
	type perm struct {
		key string
		typ authpb.Permission_Type
	}
	roles := map[string][]perm{
		server: {{"/Cronix/", clientv3.PermReadWrite}, {cluster.RegistryRoot, clientv3.PermReadWrite}},
		node: {
			{"/Cronix/", clientv3.PermRead}, {cluster.RegistryRoot, clientv3.PermRead},
			{"/Cronix/node/", clientv3.PermReadWrite}, {"/Cronix/run/", clientv3.PermReadWrite},
			{"/Cronix/proc/", clientv3.PermReadWrite}, {"/Cronix/kill/", clientv3.PermReadWrite},
			{"/Cronix/handler/", clientv3.PermReadWrite}, {"/Cronix/system/get/", clientv3.PermReadWrite},
		},
	}
	for name, perms := range roles {
		_, err := root.RoleAdd(ctx, name)
		require.NoError(t, err)
		for _, p := range perms {
			_, err := root.RoleGrantPermission(ctx, name, p.key, clientv3.GetPrefixRangeEnd(p.key), clientv3.PermissionType(p.typ))
			require.NoError(t, err)
		}
		// No password: the user logs in with a client certificate whose
		// common name is its name.
		_, err = root.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
		require.NoError(t, err)
		_, err = root.UserGrantRole(ctx, name, name)
		require.NoError(t, err)
	}
}

func certClient(t *testing.T, ca *testcerts.CA, endpoint string, p testcerts.Pair) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	require.NoError(t, err)
	tc := ca.ClientTLS()
	tc.Certificates = []tls.Certificate{cert}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 30 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestSplitDeploymentOverTLS: etcd serves TLS and requires client
// certificates, with auth on and the RBAC roles of docs/deployment.md; the
// server logs in with its certificate and serves its API over https (its
// advertise URL is https); the node logs in with its own certificate,
// serves its endpoint over https and verifies the server with --tls-ca.
// Jobs fire and the node's identity cannot move the leader fence.
func TestSplitDeploymentOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcerts.New(t)
	etcdCert, httpCert := ca.Server("etcd"), ca.Server("cronix-http")
	rootCert, serverCert, nodeCert := ca.Client("root"), ca.Client("cronix-server"), ca.Client("cronix-node")

	clientAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	peerAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	e := haStart(t, []string{"CRONIX_ETCD_ROOT_PASSWORD=tls-root-pw"}, "etcd", "--data-dir", filepath.Join(dir, "etcd"),
		"--client-addr", clientAddr, "--peer-addr", peerAddr,
		"--tls-cert", etcdCert.CertFile, "--tls-key", etcdCert.KeyFile, "--tls-client-ca", ca.CertFile)
	endpoint, err := e.WaitOutput(regexp.MustCompile(`etcd is running: (https://\S+)`), 60*time.Second)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcdRoles(ctx, t, certClient(t, ca, endpoint, rootCert))

	httpAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	raftAddr, err := harness.FreeAddr()
	require.NoError(t, err)
	etcdTLS := []string{"--etcd-endpoints", endpoint, "--etcd-ca", ca.CertFile}
	srv := haStart(t, []string{"CRONIX_NODE_TOKEN=tls-token", "CRONIX_ADMIN_PASSWORD=tls-admin-pw"},
		append([]string{"server", "--id", "s1", "--raft-bootstrap", "--raft-addr", raftAddr, "--http-addr", httpAddr,
			"--advertise-url", "https://" + httpAddr, "--data-dir", filepath.Join(dir, "s1"),
			"--db", "sqlite://" + filepath.Join(dir, "cronix.db"),
			"--tls-cert", httpCert.CertFile, "--tls-key", httpCert.KeyFile, "--tls-ca", ca.CertFile,
			"--etcd-cert", serverCert.CertFile, "--etcd-key", serverCert.KeyFile}, etcdTLS...)...)
	_, err = srv.WaitOutput(regexp.MustCompile(`Cronix server s1 is running: https://`), 90*time.Second)
	require.NoError(t, err)

	api := harness.NewClient("https://" + httpAddr)
	api.HTTP.Transport = &http.Transport{TLSClientConfig: ca.ClientTLS()}
	require.NoError(t, api.WaitHealthy(60*time.Second))
	require.NoError(t, api.Login("admin", "tls-admin-pw"))
	plain := harness.NewClient("http://" + httpAddr)
	code, err := plain.Do(http.MethodGet, "/healthz", nil, nil)
	require.True(t, err != nil || code == http.StatusBadRequest, "plain http must not be served (got %d, %v)", code, err)

	nd := haStart(t, []string{"CRONIX_NODE_TOKEN=tls-token"}, append([]string{"node", "--data-dir", filepath.Join(dir, "node"),
		"--group", "tls", "--tls-ca", ca.CertFile, "--tls-cert", httpCert.CertFile, "--tls-key", httpCert.KeyFile,
		"--etcd-cert", nodeCert.CertFile, "--etcd-key", nodeCert.KeyFile}, etcdTLS...)...)
	uuid, err := nd.WaitOutput(nodeRunning, 60*time.Second)
	require.NoError(t, err)

	job, err := api.CreateJob(harness.Job{Name: "tls", Group: "tls", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"echo over tls"}`)})
	require.NoError(t, err)
	runs := waitRuns(t, api, job.ID, 60*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 3 })
	for _, r := range successes(runs) {
		require.Equal(t, uuid, r.Node)
		require.Equal(t, "over tls\n", r.Output)
	}

	// The node's https endpoint is what the server's beats reach.
	var node struct {
		Scheme string `json:"scheme"`
	}
	nodeCli := certClient(t, ca, endpoint, nodeCert)
	resp, err := nodeCli.Get(ctx, cluster.NewKeys("").Node(uuid))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &node))
	require.Equal(t, "https", node.Scheme)

	// RBAC: a node's identity cannot claim the leader fence or dispatch.
	_, err = nodeCli.Put(ctx, cluster.NewKeys("").Leader(), "99999999999999999999/evil")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
	_, err = nodeCli.Put(ctx, cluster.NewKeys("").Job(uuid, job.ID), "{}")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)
}
