//go:build linux

package node

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/node/pluginhost"
)

// buildShell builds the real cronix-plugin-shell binary for a test.
func buildShell(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin, err := harness.BuildPackage(ctx, filepath.Join(t.TempDir(), "cronix-plugin-shell"), "./plugins/shell/cmd/cronix-plugin-shell")
	require.NoError(t, err)
	return bin
}

// newShellNode is a node in dataDir with the shell plugin shellBin as its
// only plugin, not started.
func newShellNode(t *testing.T, dataDir, shellBin string, etcd *clientv3.Client) *Node {
	t.Helper()
	n, err := New(Config{DataDir: dataDir, Keys: cluster.NewKeys(""), NodeToken: "t", LeaseTTL: 3 * time.Second,
		Plugins: []pluginhost.Spec{{Name: "shell", Cmd: []string{shellBin}}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		etcd)
	require.NoError(t, err)
	return n
}
