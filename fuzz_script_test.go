package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFuzzScriptRetriesOnlyTheDeadlineFlake runs scripts/fuzz.sh (make
// test's fuzz steps) with a stand-in for the go command that prints what a
// fuzz run prints: the script runs a target once more only after Go's bare
// fuzztime-deadline failure, and fails at once on a real finding.
func TestFuzzScriptRetriesOnlyTheDeadlineFlake(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash on this machine; make test runs the script with bash")
	}
	flake := "fuzz: elapsed: 15s, execs: 40304 (0/sec), new interesting: 4 (total: 9)\n--- FAIL: FuzzX (15.20s)\n    context deadline exceeded\nFAIL\n"
	finding := "--- FAIL: FuzzX (3.10s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:12: bad\n\n    Failing input written to testdata/fuzz/FuzzX/abc\n    context deadline exceeded\nFAIL\n"
	cases := []struct {
		name    string
		outputs []string // what the stand-in prints on each call; "" = success
		wantRC  int
		calls   int
	}{
		{"passes", []string{""}, 0, 1},
		{"flake then pass", []string{flake, ""}, 0, 2},
		{"flake twice", []string{flake, flake}, 1, 2},
		{"real finding", []string{finding, ""}, 1, 1},
		{"other failure", []string{"--- FAIL: FuzzX\n    x_test.go:3: no\nFAIL\n", ""}, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for i, out := range tc.outputs {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "out"+strconv.Itoa(i+1)), []byte(out), 0o600))
			}
			fakeGo := filepath.Join(dir, "go")
			script := "#!/usr/bin/env bash\nd=" + shellQuote(dir) + "\n" +
				"n=$(( $(cat \"$d/calls\" 2>/dev/null || echo 0) + 1 )); echo $n > \"$d/calls\"\n" +
				"out=$(cat \"$d/out$n\"); printf '%s' \"$out\"; [ -z \"$out\" ]\n"
			require.NoError(t, os.WriteFile(fakeGo, []byte(script), 0o700)) //nolint:gosec // an executable stand-in
			cmd := exec.Command("bash", "scripts/fuzz.sh", "FuzzX", "./x/", "1s")
			cmd.Env = append(os.Environ(), "GO="+fakeGo)
			out, err := cmd.CombinedOutput()
			rc := 0
			if err != nil {
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				rc = ee.ExitCode()
			}
			require.Equal(t, tc.wantRC, rc, "%s", out)
			calls, err := os.ReadFile(filepath.Join(dir, "calls"))
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(tc.calls), strings.TrimSpace(string(calls)), "%s", out)
		})
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
