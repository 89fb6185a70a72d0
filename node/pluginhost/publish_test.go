package pluginhost

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

func TestPublisherPublishesUnderItsLeaseAndRevokes(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("/pubtest")
	infos := []pluginapi.Info{
		{Name: "http", Version: "1.0.0", Description: "d", ParamsSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "shell", Version: "1.2.0", ParamsSchema: json.RawMessage(`{"type":"object","required":["script"]}`)},
	}
	p := NewPublisher(cli, keys, "node-1", 5*time.Second, func() []pluginapi.Info { return infos }, nil)
	require.NoError(t, p.Start(t.Context()))
	t.Cleanup(p.Stop)

	resp, err := cli.Get(t.Context(), keys.HandlerPrefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 2)
	require.Equal(t, keys.Handler("http", "node-1"), string(resp.Kvs[0].Key))
	require.NotZero(t, resp.Kvs[0].Lease, "published under a lease")
	var got cluster.HandlerInfo
	require.NoError(t, json.Unmarshal(resp.Kvs[1].Value, &got))
	require.Equal(t, "shell", got.Name)
	require.Equal(t, "1.2.0", got.Version)
	require.Equal(t, "node-1", got.Node)
	require.JSONEq(t, `{"type":"object","required":["script"]}`, string(got.ParamsSchema))

	// Losing the lease (revoked behind its back) makes it publish again.
	_, err = cli.Revoke(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := cli.Get(t.Context(), keys.HandlerPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 2
	}, 10*time.Second, 50*time.Millisecond)

	p.Stop()
	p.Stop() // idempotent
	resp, err = cli.Get(t.Context(), keys.HandlerPrefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	require.Empty(t, resp.Kvs, "Stop removes the handler keys")
}

// A publish that fails after its grant (here the transaction is larger than
// etcd accepts) revokes the lease it granted instead of leaving it to
// expire: the same path covers a Stop that cancels a transaction the server
// had already committed, whose keys would otherwise outlive the node.
func TestPublisherRevokesTheLeaseOfAFailedPublish(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("/pubfail")
	huge := json.RawMessage(`{"description":"` + strings.Repeat("x", 9<<20) + `"}`)
	infos := []pluginapi.Info{{Name: "big", Version: "1.0.0", ParamsSchema: huge}}
	p := NewPublisher(cli, keys, "node-1", 5*time.Second, func() []pluginapi.Info { return infos }, nil)
	require.Error(t, p.Start(t.Context()), "etcd refuses a request over its size limit")

	leases, err := cli.Leases(t.Context())
	require.NoError(t, err)
	require.Empty(t, leases.Leases, "the failed publish revoked the lease it granted")
	resp, err := cli.Get(t.Context(), keys.HandlerPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count)
}
