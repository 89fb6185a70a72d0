package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cronix/cronix/integration/harness"
)

// shellBin is the real cronix-plugin-shell binary TestMain builds, for the
// tests that kill and time out real processes; crashyBin is a plugin that
// crashes on demand (internal/testplugins/crashy).
var shellBin, crashyBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := harness.PluginSocketsIn(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shellBin, err = harness.BuildPackage(context.Background(), filepath.Join(dir, "cronix-plugin-shell"),
		"./plugins/shell/cmd/cronix-plugin-shell")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crashyBin, err = harness.BuildPackage(context.Background(), filepath.Join(dir, "cronix-plugin-crashy"),
		"./internal/testplugins/crashy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
