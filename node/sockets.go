package node

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// maxSocketDirLen bounds the directory of a plugin's sockets: go-plugin
// names a socket "plugin" and up to 10 digits, and a Unix socket's path
// has at most 107 bytes on Linux.
const maxSocketDirLen = 107 - len("/plugin0123456789")

// pluginSocketDir is the directory this node's plugins create their
// sockets in: <data-dir>/plugin-sockets, or, when that path is too long
// for a socket, a directory of the system's temp dir named after the data
// dir (so the next start of the same node finds it again); "" when even
// that is too long (go-plugin's default then). A plugin killed with its
// node (the parent-death signal is SIGKILL) leaves its socket file
// behind; clearPluginSockets removes those at the next start, where they
// used to pile up in the temp dir, a few per node crash. A clean stop
// removes the emptied directory (Node.Stop).
func pluginSocketDir(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("node: plugin socket dir: %w", err)
	}
	if dir := filepath.Join(abs, "plugin-sockets"); len(dir) <= maxSocketDirLen {
		return dir, nil
	}
	sum := sha256.Sum256([]byte(abs))
	if dir := filepath.Join(os.TempDir(), "cronix-sockets-"+hex.EncodeToString(sum[:6])); len(dir) <= maxSocketDirLen {
		return dir, nil
	}
	return "", nil
}

// clearPluginSockets empties dir (creating it), before the node's plugins
// start: what is there was left by plugins of an earlier run of this node.
func clearPluginSockets(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("node: plugin socket dir: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("node: plugin socket dir: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("node: clearing the plugin socket dir: %w", err)
		}
	}
	return nil
}
