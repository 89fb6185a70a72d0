package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// TestPluginVerifyAndList runs "cronix plugin verify" and "cronix plugin
// list" on the real example plugin binary and on binaries that are not
// plugins.
func TestPluginVerifyAndList(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, err := harness.BuildPackage(t.Context(), filepath.Join(dir, "cronix-plugin-notify"), "./plugins/example")
	require.NoError(t, err)
	sum, err := fileSHA256(bin)
	require.NoError(t, err)

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"plugin", "verify", bin}, os.Getenv, &out, &errOut), errOut.String())
	t.Logf("verify:\n%s", out.String())
	require.Contains(t, out.String(), "handler   notify 1.0.0")
	require.Contains(t, out.String(), "schema    ok")
	require.Contains(t, out.String(), "checksum  notify="+sum+"\n")
	require.Regexp(t, regexp.MustCompile(`(?m)^protocol  \d+$`), out.String())

	// A program that exits at once and one that never answers: both are
	// refused with a clear message within 5 s.
	hang := filepath.Join(dir, "cronix-plugin-hang")
	require.NoError(t, os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755))
	for _, file := range []string{"/bin/true", hang} {
		out.Reset()
		errOut.Reset()
		start := time.Now()
		code := run([]string{"plugin", "verify", file}, os.Getenv, &out, &errOut)
		took := time.Since(start)
		t.Logf("verify %s: exit %d after %s: %s", file, code, took, errOut.String())
		require.NotEqual(t, 0, code)
		require.Less(t, took, 5*time.Second)
		require.Contains(t, errOut.String(), "is not a usable Cronix plugin (handshake_failed)")
	}

	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, run([]string{"plugin", "list", "--plugin-dir", dir}, os.Getenv, &out, &errOut), errOut.String())
	t.Logf("list:\n%s", out.String())
	require.Regexp(t, regexp.MustCompile(`(?m)^notify +notify +1\.0\.0 +\d+ +loaded +`+sum), out.String())
	require.Regexp(t, regexp.MustCompile(`(?m)^hang +hang +- +- +refused .*handshake_failed`), out.String())

	// With the node's checksums: what the node would do.
	out.Reset()
	require.Equal(t, 0, run([]string{"plugin", "list", "--plugin-dir", dir, "--plugin-checksums", "notify=" + sum}, os.Getenv, &out, &errOut))
	require.Regexp(t, regexp.MustCompile(`(?m)^hang .* refused .*missing_checksum`), out.String())
}
