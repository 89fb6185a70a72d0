package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPluginsDocCompiles extracts every complete Go program (a ```go block
// starting with "package main") from docs/plugins.md and runs go vet on it
// against this module's pluginapi, so the documented handler keeps
// compiling as the SDK changes.
func TestPluginsDocCompiles(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/plugins.md")
	require.NoError(t, err)
	var programs []string
	for _, part := range strings.Split(string(doc), "```go\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		require.True(t, ok, "unterminated go block")
		if strings.HasPrefix(block, "package main\n") {
			programs = append(programs, block)
		}
	}
	require.NotEmpty(t, programs, "docs/plugins.md has no complete Go program")
	for i, src := range programs {
		file := filepath.Join(t.TempDir(), "main.go")
		require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
		out, err := exec.CommandContext(t.Context(), "go", "vet", file).CombinedOutput()
		require.NoError(t, err, "program %d of docs/plugins.md does not compile:\n%s\n%s", i+1, out, src)
		require.LessOrEqual(t, strings.Count(strings.TrimSpace(src), "\n")+1, 60, "keep the example short")
	}
}
