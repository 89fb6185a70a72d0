package pluginhost

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cronix/cronix/cluster"
)

// DirPrefix is the file name prefix of a third-party plugin binary in the
// plugin directory: "cronix-plugin-notify" is the plugin "notify".
const DirPrefix = "cronix-plugin-"

// ParseChecksums parses "name=sha256hex" entries (the node's
// --plugin-checksums). name is a plugin binary's file name
// ("cronix-plugin-notify") or that name without DirPrefix ("notify").
// The result is keyed by the short name.
func ParseChecksums(entries []string) (map[string]string, error) {
	out := make(map[string]string, len(entries))
	var errs []error
	for _, e := range entries {
		name, sum, ok := strings.Cut(strings.TrimSpace(e), "=")
		name = strings.TrimPrefix(strings.TrimSpace(name), DirPrefix)
		sum = strings.ToLower(strings.TrimSpace(sum))
		if !ok || name == "" {
			errs = append(errs, fmt.Errorf("plugin checksum %q: want name=sha256", e))
			continue
		}
		if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("plugin checksum for %q: %q is not a hex SHA-256 (64 hex digits)", name, sum))
			continue
		}
		if prev, dup := out[name]; dup && prev != sum {
			errs = append(errs, fmt.Errorf("plugin checksum for %q is given twice, differently", name))
			continue
		}
		out[name] = sum
	}
	return out, errors.Join(errs...)
}

// DirSpecs returns a Spec for every executable regular file named
// cronix-plugin-* in dir (symlinks followed). A binary whose SHA-256 is
// configured in checksums (from ParseChecksums) is pinned to that checksum
// and to the handler its entry names (the short name): the host refuses to
// start a binary whose content does not match, and refuses one that serves
// another handler. A binary without a configured checksum gets a Spec
// marked Refused (PluginReasonMissingChecksum), so the node reports it, and
// a log line naming it and how to allow it; a checksum naming no binary is
// logged. It fails only when dir cannot be read.
func DirSpecs(logger *slog.Logger, dir string, checksums map[string]string) ([]Spec, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "pluginhost", "plugin_dir", dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pluginhost: reading plugin dir: %w", err)
	}
	var specs []Spec
	seen := map[string]bool{}
	for _, e := range entries {
		file := e.Name()
		name, ok := strings.CutPrefix(file, DirPrefix)
		if !ok || name == "" || strings.HasPrefix(file, ".") {
			continue
		}
		path := filepath.Join(dir, file)
		st, err := os.Stat(path)
		if err != nil {
			logger.Error("plugin refused: cannot stat it", "plugin", name, "file", path, "err", err)
			continue
		}
		if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			logger.Warn("plugin dir entry skipped: not an executable file", "plugin", name, "file", path)
			continue
		}
		seen[name] = true
		sum, ok := checksums[name]
		if !ok {
			logger.Error("plugin refused: no checksum configured; add it to --plugin-checksums as "+name+"=<sha256>",
				"plugin", name, "file", path)
			specs = append(specs, Spec{Name: name, Cmd: []string{path}, Handler: name, Refused: &Refusal{
				Reason:  cluster.PluginReasonMissingChecksum,
				Message: "no checksum configured; add it to --plugin-checksums as " + name + "=<sha256>",
			}})
			continue
		}
		specs = append(specs, Spec{Name: name, Cmd: []string{path}, SHA256: sum, Handler: name})
	}
	for _, name := range slices.Sorted(maps.Keys(checksums)) {
		if !seen[name] {
			logger.Warn("plugin checksum configured but no such plugin binary in the plugin dir",
				"plugin", name, "file", filepath.Join(dir, DirPrefix+name))
		}
	}
	return specs, nil
}
