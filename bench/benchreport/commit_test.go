package benchreport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGitCommitIgnoresDocs: a change under docs/ (where the benches write
// their tables) leaves the commit clean; a change to code marks it dirty.
func TestGitCommitIgnoresDocs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed") // the CI image has it; the commit is "unknown" without it
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	git("init", "-q")
	write("main.go", "package main\n")
	write("docs/benchmarks.md", "# Benchmarks\n")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	head := strings.TrimSpace(git("rev-parse", "--short", "HEAD"))
	t.Chdir(dir)

	require.Equal(t, head, GitCommit())
	write("docs/benchmarks.md", "# Benchmarks\n\na table\n")
	require.Equal(t, head, GitCommit(), "a table written under docs/ is not the code measured")
	write("main.go", "package main\n\nfunc main() {}\n")
	require.Equal(t, head+"+dirty", GitCommit())
}
