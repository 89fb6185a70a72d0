//go:build linux

package node

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// leaveSocket leaves a Unix socket file at path, as a plugin killed
// while listening there does (its listener never unlinks it).
func leaveSocket(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSocket)
}

// sockets lists the Unix sockets in dir.
func sockets(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestPluginSocketsLiveInTheNodesDirAndAreClearedAtStart: the plugins'
// go-plugin sockets are created in <data-dir>/plugin-sockets and not in
// the system's temp dir, what an earlier run left there (a plugin killed
// with its node leaves its socket) is removed when the node starts, and a
// stopped node leaves none (nor the directory).
func TestPluginSocketsLiveInTheNodesDirAndAreClearedAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shellBin := buildShell(ctx, t)
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "plugin-sockets")
	stale := filepath.Join(dir, "plugin123")
	leaveSocket(t, stale)

	etcd := etcdtest.Client(t)
	start := func() *Node {
		n := newShellNode(t, dataDir, shellBin, etcd)
		require.NoError(t, n.Start(ctx))
		return n
	}
	n := start()
	_, err := os.Stat(stale)
	require.True(t, os.IsNotExist(err), "what an earlier run left is removed at start")
	live := sockets(t, dir)
	require.Len(t, live, 1, "the plugin's socket is in the node's directory")
	require.True(t, strings.HasPrefix(live[0], "plugin"), live[0])
	n.Stop()
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "a stopped node leaves no socket, nor the emptied directory")

	// A socket left by a plugin that was killed goes at the next start.
	leaveSocket(t, stale)
	n = start()
	defer n.Stop()
	_, err = os.Stat(stale)
	require.True(t, os.IsNotExist(err))
	require.Len(t, sockets(t, dir), 1)
}

// TestPluginSocketDirFitsASocketPath: the directory is the data dir's own
// while a socket path in it fits in 107 bytes, and otherwise one of the
// temp dir, the same for the same data dir and another for another.
func TestPluginSocketDirFitsASocketPath(t *testing.T) {
	short := t.TempDir()
	dir, err := pluginSocketDir(short)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(short, "plugin-sockets"), dir)

	deep := filepath.Join(short, strings.Repeat("d", 100))
	dir, err = pluginSocketDir(deep)
	require.NoError(t, err)
	require.Equal(t, os.TempDir(), filepath.Dir(dir))
	require.LessOrEqual(t, len(dir)+len("/plugin0123456789"), 107)
	again, err := pluginSocketDir(deep)
	require.NoError(t, err)
	require.Equal(t, dir, again, "the same data dir finds its directory again")
	other, err := pluginSocketDir(deep + "x")
	require.NoError(t, err)
	require.NotEqual(t, dir, other)
}
