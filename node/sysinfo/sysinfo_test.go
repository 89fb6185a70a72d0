package sysinfo

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/trust"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

func TestCollectReportsTheMachine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	info := Collect(t.Context(), "n", dir, "/", "")
	require.Empty(t, info.Errors)
	require.Equal(t, "n", info.Node)
	require.NotEmpty(t, info.Hostname)
	require.Positive(t, info.CPUCount)
	require.Positive(t, info.MemoryTotal)
	require.LessOrEqual(t, info.MemoryUsed, info.MemoryTotal)
	require.Len(t, info.Disks, 2, `"/" once, then the data dir`)
	require.Equal(t, "/", info.Disks[0].Path)
	require.Equal(t, dir, info.Disks[1].Path)
}

func TestAnswersARequestMadeBeforeStart(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("")
	ring, err := cluster.KeyringFromTokens("sysinfo-test-token")
	require.NoError(t, err)
	guard, err := trust.New(trust.Config{Etcd: cli, Keys: keys, Keyring: ring})
	require.NoError(t, err)
	// Signed under term 0: no leader key yet.
	v, err := ring.Seal(keys.SystemSwitch("n"), 0, []byte(`{}`))
	require.NoError(t, err)
	_, err = cli.Put(t.Context(), keys.SystemSwitch("n"), string(v))
	require.NoError(t, err)
	r, err := NewResponder(Config{NodeUUID: "n", Keys: keys, AnswerTTL: time.Minute, Guard: guard}, cli)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context()))
	t.Cleanup(r.Stop)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), keys.SystemGet("n"))
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		var info cluster.SystemInfo
		return json.Unmarshal(resp.Kvs[0].Value, &info) == nil && info.Node == "n" && resp.Kvs[0].Lease != 0
	}, 10*time.Second, 10*time.Millisecond)
	r.Stop()
	r.Stop() // idempotent
}

// An unsigned request is refused: deleted and not answered.
func TestUnsignedRequestIsRefused(t *testing.T) {
	t.Parallel()
	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("")
	ring, err := cluster.KeyringFromTokens("sysinfo-test-token")
	require.NoError(t, err)
	refused := make(chan trust.Event, 1)
	guard, err := trust.New(trust.Config{Etcd: cli, Keys: keys, Keyring: ring,
		Report: func(ev trust.Event) { refused <- ev }})
	require.NoError(t, err)
	r, err := NewResponder(Config{NodeUUID: "n", Keys: keys, AnswerTTL: time.Minute, Guard: guard}, cli)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context()))
	t.Cleanup(r.Stop)
	_, err = cli.Put(t.Context(), keys.SystemSwitch("n"), "{}")
	require.NoError(t, err)
	select {
	case ev := <-refused:
		require.Equal(t, trust.KindUnsigned, ev.Kind)
	case <-time.After(10 * time.Second):
		t.Fatal("the unsigned request was not refused")
	}
	r.Stop()
	resp, err := cli.Get(t.Context(), keys.SystemGet("n"))
	require.NoError(t, err)
	require.Empty(t, resp.Kvs, "no answer to an unsigned request")
}
