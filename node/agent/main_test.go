package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shellBin is the real cronix-plugin-shell binary TestMain builds, for the
// tests that kill and time out real processes.
var shellBin string

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
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		return 1
	}
	shellBin = filepath.Join(dir, "cronix-plugin-shell")
	build := exec.Command("go", "build", "-o", shellBin, "./plugins/shell/cmd/cronix-plugin-shell")
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the shell plugin: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
