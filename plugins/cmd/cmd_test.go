package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
	"github.com/cronix/cronix/plugins/internal/proc"
)

func TestContract(t *testing.T) {
	t.Parallel()
	plugintest.CheckContract(t, New(), json.RawMessage(`{"argv":["echo","hello"]}`),
		plugintest.LongRunning(json.RawMessage(`{"argv":["sleep","30"]}`)))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for params, field := range map[string]string{
		`{"argv":["echo","hi"]}`:                              "-",
		`{"argv":["/bin/true"],"dir":"/tmp","env":{"A":"b"}}`: "-",
		`{}`:                                  "argv",
		`null`:                                "argv",
		`{"argv":[]}`:                         "argv",
		`{"argv":[""]}`:                       "argv",
		`{"argv":"echo hi"}`:                  "argv",
		`{"argv":["echo",1]}`:                 "argv",
		`{"argv":["echo","a\u0000b"]}`:        "argv.1",
		`{"argv":["echo"],"dir":"tmp"}`:       "dir",
		`{"argv":["echo"],"env":{"A=B":"c"}}`: "env",
		`{"argv":["echo"],"env":{"A":1}}`:     "env",
		`{"argv":["echo"],"shell":true}`:      "shell",
		`["echo"]`:                            "",
	} {
		err := New().Validate(t.Context(), json.RawMessage(params))
		if field == "-" {
			require.NoError(t, err, params)
			continue
		}
		ip, ok := pluginapi.AsInvalidParams(err)
		require.True(t, ok, "%s: want InvalidParams, got %v", params, err)
		require.Equal(t, field, ip.Field(), params)
	}
}

func run(t *testing.T, ctx context.Context, p Params) (pluginapi.Result, string, error) {
	t.Helper()
	params, err := json.Marshal(p)
	require.NoError(t, err)
	var out plugintest.Output
	res, err := New().Run(ctx, pluginapi.Request{
		FireID: "9-1767225600", JobID: 9, JobName: "report", Params: params,
		ScheduledAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Attempt: 1, ShardIndex: 1, ShardTotal: 3,
	}, &out)
	return res, out.String(), err
}

func TestArgumentsAreNotInterpretedByAShell(t *testing.T) {
	t.Parallel()
	res, out, err := run(t, t.Context(), Params{Argv: []string{"printf", "%s|", "$HOME", "*", "a b", "`id`;"}})
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess}, res)
	require.Equal(t, "$HOME|*|a b|`id`;|", out)
}

func TestExitCodeEnvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, out, err := run(t, t.Context(), Params{
		Argv: []string{"sh", "-c", `pwd; echo "$GREETING $CRONIX_JOB_ID $CRONIX_SHARD_INDEX/$CRONIX_SHARD_TOTAL"; echo err >&2; exit 4`},
		Env:  map[string]string{"GREETING": "hi", "CRONIX_JOB_ID": "spoofed"},
		Dir:  dir,
	})
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 4, Message: "exit status 4"}, res)
	realDir, _ := filepath.EvalSymlinks(dir)
	require.Equal(t, realDir+"\nhi 9 1/3\nerr\n", out)
}

func TestRelativeProgramResolvesAgainstDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "job.sh"), []byte("#!/bin/sh\necho from-dir\n"), 0o700))
	res, out, err := run(t, t.Context(), Params{Argv: []string{"./job.sh"}, Dir: dir})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
	require.Equal(t, "from-dir\n", out)
}

func TestMissingProgramIsPermanent(t *testing.T) {
	t.Parallel()
	res, _, err := run(t, t.Context(), Params{Argv: []string{"cronix-no-such-program"}})
	require.ErrorContains(t, err, `program "cronix-no-such-program" not found`)
	require.True(t, pluginapi.IsPermanent(err))
	require.Equal(t, pluginapi.StatusFailed, res.Status)

	_, _, err = run(t, t.Context(), Params{Argv: []string{"/bin/true"}, Dir: "/nonexistent/dir"})
	require.Error(t, err)
	require.True(t, pluginapi.IsPermanent(err))
}

func procsWith(t *testing.T, marker string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), marker) {
			n++
		}
	}
	return n
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	marker := fmt.Sprintf("40.%d", time.Now().UnixNano()%1000000)
	h := &handler{opts: proc.Options{KillGrace: 200 * time.Millisecond}}
	params, _ := json.Marshal(Params{Argv: []string{"sh", "-c", fmt.Sprintf(`trap '' TERM; sleep %[1]s & echo started; sleep %[1]s`, marker)}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var out plugintest.Output
	start := time.Now()
	res, err := h.Run(ctx, pluginapi.Request{Params: params}, &out)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "timeout"}, res)
	require.Equal(t, "started\n", out.String())
	require.Eventually(t, func() bool { return procsWith(t, "sleep "+marker) == 0 }, 5*time.Second, 20*time.Millisecond,
		"processes of the command survived the run")
}
