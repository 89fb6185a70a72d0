package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/internal/syncbuf"
)

func TestCheckRaftPeers(t *testing.T) {
	t.Parallel()
	peers := []string{"s1=127.0.0.1:7001", "s2=127.0.0.1:7002", "s3=127.0.0.1:7003"}
	ok := serverConfig{ID: "s2", RaftAddr: "127.0.0.1:7002", RaftPeers: peers}
	require.NoError(t, checkRaftPeers(ok))
	require.NoError(t, checkRaftPeers(serverConfig{ID: "s9", RaftBootstrap: true}))

	both := ok
	both.RaftBootstrap = true
	require.ErrorContains(t, checkRaftPeers(both), "exclude each other")
	missing := ok
	missing.ID = "s4"
	require.ErrorContains(t, checkRaftPeers(missing), "must list this replica")
	wrongAddr := ok
	wrongAddr.RaftAddr = "127.0.0.1:7009"
	require.ErrorContains(t, checkRaftPeers(wrongAddr), "--raft-addr is 127.0.0.1:7009")
}

func TestEtcdCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runEtcd(ctx, []string{"--data-dir", t.TempDir(), "--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0"},
			func(string) string { return "" }, &out, io.Discard)
	}()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("cronix etcd exited early: %v", err)
		default:
		}
		return bytes.Contains([]byte(out.String()), []byte("etcd is running: http://127.0.0.1:"))
	}, 60*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("cronix etcd did not stop on cancel")
	}
}

func TestConfigurationDocIsCurrent(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("docs/configuration.md")
	require.NoError(t, err)
	require.Equal(t, configurationDoc(), string(b), "docs/configuration.md is stale: run 'make docs'")
}

// --dispatch-ahead outside 0..5s is refused before anything starts.
func TestDispatchAheadIsChecked(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"6s", "-1s"} {
		dir := t.TempDir()
		err := runStandalone(context.Background(), []string{"--data-dir", dir, "--dispatch-ahead", v},
			func(string) string { return "" }, io.Discard, io.Discard)
		require.ErrorContains(t, err, "--dispatch-ahead "+v+": want 0 to 5s")
		entries, rerr := os.ReadDir(dir)
		require.NoError(t, rerr)
		require.Empty(t, entries, "nothing written for a refused flag")
		err = runServer(context.Background(), []string{"--data-dir", dir, "--dispatch-ahead", v, "--node-token", "x"},
			func(string) string { return "" }, io.Discard, io.Discard)
		require.ErrorContains(t, err, "--dispatch-ahead")
	}
}

// A server id that the cluster API could not name (DELETE
// /api/v1/cluster/servers/{id}) is refused before anything starts.
func TestServerIDIsChecked(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a/b", "s 1", "x?y", strings.Repeat("a", 261)} {
		dir := t.TempDir()
		err := runServer(context.Background(), []string{"--data-dir", dir, "--id", id, "--node-token", "x"},
			func(string) string { return "" }, io.Discard, io.Discard)
		require.ErrorContains(t, err, "--id ")
		entries, rerr := os.ReadDir(dir)
		require.NoError(t, rerr)
		require.Empty(t, entries, "nothing written for a refused --id")
	}
}

// TestNodeSizesAreChecked: a limit of the node (bytes, run slots) that is not positive is
// refused by name before anything starts, in both commands that run a node
// (0 would silently mean the agent's default, not what --help shows).
func TestNodeSizesAreChecked(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	for _, c := range []struct{ flag, v, unit string }{
		{"--result-memory", "0", "bytes"}, {"--result-memory", "-1", "bytes"}, {"--output-cap", "0", "bytes"},
		{"--max-concurrent", "0", "fires"}, {"--max-concurrent", "-3", "fires"},
	} {
		dir := t.TempDir()
		want := c.flag + " " + c.v + ": must be a positive number of " + c.unit
		err := runStandalone(context.Background(), []string{"--data-dir", dir, c.flag, c.v}, env, io.Discard, io.Discard)
		require.ErrorContains(t, err, want)
		entries, rerr := os.ReadDir(dir)
		require.NoError(t, rerr)
		require.Empty(t, entries, "nothing written for a refused flag")
		err = runNode(context.Background(), []string{"--data-dir", dir, "--node-token", "x", c.flag, c.v}, env, io.Discard, io.Discard)
		require.ErrorContains(t, err, want)
	}
}
