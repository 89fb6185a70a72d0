package main

import (
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPluginsDocCompiles extracts every complete Go program (a ```go block
// starting with "package main") from docs/plugins.md and runs go vet on it
// against this module's pluginapi, so the documented handlers keep
// compiling as the SDK changes. The first one is the doc's promise of "a
// complete handler in 30 lines": it must stay within 30 lines. Every other
// go block is an excerpt that must appear verbatim in a file of
// plugins/example, whose own tests compile and run it.
func TestPluginsDocCompiles(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/plugins.md")
	require.NoError(t, err)
	var example strings.Builder
	files, err := filepath.Glob("plugins/example/*.go")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		example.Write(b)
	}
	var programs []string
	for _, part := range strings.Split(string(doc), "```go\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		require.True(t, ok, "unterminated go block")
		if strings.HasPrefix(block, "package main\n") {
			programs = append(programs, block)
		} else {
			require.Contains(t, example.String(), block, "a go excerpt in docs/plugins.md is not in plugins/example")
		}
	}
	require.NotEmpty(t, programs, "docs/plugins.md has no complete Go program")
	for i, src := range programs {
		formatted, err := format.Source([]byte(src))
		require.NoError(t, err, "program %d of docs/plugins.md", i+1)
		require.Equal(t, string(formatted), src, "program %d of docs/plugins.md is not gofmt-ed", i+1)
		file := filepath.Join(t.TempDir(), "main.go")
		require.NoError(t, os.WriteFile(file, []byte(src), 0o600))
		out, err := exec.CommandContext(t.Context(), "go", "vet", file).CombinedOutput()
		require.NoError(t, err, "program %d of docs/plugins.md does not compile:\n%s\n%s", i+1, out, src)
		lines := strings.Count(strings.TrimSpace(src), "\n") + 1
		if i == 0 {
			require.LessOrEqual(t, lines, 30, "the first handler of docs/plugins.md is promised in at most 30 lines")
		}
		require.LessOrEqual(t, lines, 60, "keep the example short")
	}
}
