package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/server/raftha"
)

// TestRaftRecoverWithoutEtcd: with --min-term, "cronix raft recover" works
// on the raft data dir alone (the etcd endpoint here is closed) and the
// recovered replica leads in a term above it, its state kept.
func TestRaftRecoverWithoutEtcd(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	noEtcd := "http://" + closed.Addr().String()
	require.NoError(t, closed.Close())

	cfg := raftha.Config{ID: "s1", Dir: t.TempDir(), BindAddr: addr, Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond}
	open := func() *raftha.Node {
		n, err := raftha.Open(cfg)
		require.NoError(t, err)
		require.Eventually(t, n.IsLeader, 10*time.Second, 10*time.Millisecond)
		return n
	}
	n := open()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{4: 4000}))
	require.Less(t, n.Term(), uint64(900))
	require.NoError(t, n.Close())

	runRecover := func(extra ...string) (string, error) {
		var out, errOut syncbuf.Buffer
		args := append([]string{"recover", "--data-dir", cfg.Dir, "--peers", "s1=" + addr, "--etcd-endpoints", noEtcd}, extra...)
		err := runRaft(ctx, args, func(string) string { return "" }, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	_, err = runRecover("--min-term", "-2")
	require.ErrorContains(t, err, "--min-term -2")

	start := time.Now()
	out, err := runRecover("--min-term", "900")
	require.NoError(t, err, out)
	require.Contains(t, out, "leader fence term 900")
	require.Less(t, time.Since(start), 5*time.Second, "etcd was not waited for")

	cfg.Bootstrap = false
	n = open()
	defer func() { _ = n.Close() }()
	require.Greater(t, n.Term(), uint64(900))
	require.Eventually(t, func() bool { v, ok := n.Cursor(4); return ok && v == 4000 }, 10*time.Second, 10*time.Millisecond)
}
