package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

func TestContract(t *testing.T) {
	t.Parallel()
	plugintest.CheckContract(t, newHandler(t), json.RawMessage(`{"script":"echo hello"}`),
		plugintest.LongRunning(json.RawMessage(`{"script":"sleep 30"}`)))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for params, field := range map[string]string{
		`{"script":"echo hi"}`:                                         "-",
		`{"script":"print(1)","interpreter":"python3"}`:                "-",
		`{"script":"echo $A","interpreter":"/bin/sh","env":{"A":"b"}}`: "-",
		`{}`:                                    "script",
		`null`:                                  "script",
		`{"script":"  \n"}`:                     "script",
		`{"script":42}`:                         "script",
		`{"script":"x","interpreter":"perl"}`:   "interpreter",
		`{"script":"x","interpreter":"bin/sh"}`: "interpreter",
		`{"script":"x","env":{"A":1}}`:          "env",
		`{"script":"x","env":{"A=B":"c"}}`:      "env",
		`{"script":"x","workdir":"/tmp"}`:       "workdir",
		`["script"]`:                            "",
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

// newHandler returns a shell handler that is closed when the test ends:
// its script directory (in the system's temp dir) goes with it.
func newHandler(t *testing.T) *handler {
	t.Helper()
	h := New().(*handler)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// run runs params through the shell handler in-process.
func run(t *testing.T, ctx context.Context, params string) (pluginapi.Result, string, error) {
	t.Helper()
	var out plugintest.Output
	res, err := newHandler(t).Run(ctx, pluginapi.Request{
		FireID: "7-1767225600", JobID: 7, JobName: "backup db", Params: json.RawMessage(params),
		ScheduledAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Attempt: 2,
	}, &out)
	return res, out.String(), err
}

func TestRunCapturesStdoutAndStderrInOrder(t *testing.T) {
	t.Parallel()
	res, out, err := run(t, t.Context(), `{"script":"echo one; echo two >&2; echo three"}`)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess}, res)
	require.Equal(t, "one\ntwo\nthree\n", out)
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	res, out, err := run(t, t.Context(), `{"script":"echo failing; exit 3"}`)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 3, Message: "exit status 3"}, res)
	require.Equal(t, "failing\n", out)

	res, _, err = run(t, t.Context(), `{"script":"kill -9 $$"}`)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.Equal(t, 137, res.ExitCode)
	require.Contains(t, res.Message, "killed by signal")
}

func TestRunEnvironment(t *testing.T) {
	t.Setenv(pluginapi.Handshake.MagicCookieKey, pluginapi.Handshake.MagicCookieValue)
	t.Setenv("PLUGIN_PROTOCOL_VERSIONS", "1")
	script := `echo "$CRONIX_FIRE_ID|$CRONIX_JOB_ID|$CRONIX_JOB_NAME|$CRONIX_SCHEDULED_AT|$CRONIX_ATTEMPT|$GREETING|$CRONIX_PLUGIN|$PLUGIN_PROTOCOL_VERSIONS"`
	params, err := json.Marshal(Params{Script: script, Env: map[string]string{"GREETING": "hi there", "CRONIX_JOB_ID": "spoofed"}})
	require.NoError(t, err)
	res, out, err := run(t, t.Context(), string(params))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
	require.Equal(t, "7-1767225600|7|backup db|2026-01-01T00:00:00Z|2|hi there||\n", out)
}

func TestRunInterpreters(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"script":"echo ${BASH_VERSION:+bash}","interpreter":"bash"}`:                "bash\n",
		`{"script":"import sys\nprint(sys.version_info[0])","interpreter":"python3"}`: "3\n",
		`{"script":"echo abs","interpreter":"/bin/sh"}`:                               "abs\n",
	}
	for params, want := range cases {
		var p Params
		require.NoError(t, json.Unmarshal([]byte(params), &p))
		if _, err := exec.LookPath(p.Interpreter); err != nil {
			t.Logf("skipping %s: %v", p.Interpreter, err)
			continue
		}
		res, out, err := run(t, t.Context(), params)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
		require.Equal(t, want, out)
	}

	res, _, err := run(t, t.Context(), `{"script":"x","interpreter":"/nonexistent/interp"}`)
	require.Error(t, err)
	require.True(t, pluginapi.IsPermanent(err))
	require.Equal(t, pluginapi.StatusFailed, res.Status)
}

func TestRunInvalidParams(t *testing.T) {
	t.Parallel()
	res, _, err := run(t, t.Context(), `{"script":""}`)
	ip, ok := pluginapi.AsInvalidParams(err)
	require.True(t, ok)
	require.Equal(t, "script", ip.Field())
	require.Equal(t, pluginapi.StatusFailed, res.Status)
}

func TestRunStreamsOutput(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "gate")
	script := fmt.Sprintf(`echo first; while [ ! -e %q ]; do sleep 0.01; done; echo second`, gate)
	params, err := json.Marshal(Params{Script: script})
	require.NoError(t, err)
	out := &gateWriter{onFirst: func() { _ = os.WriteFile(gate, nil, 0o600) }}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := newHandler(t).Run(ctx, pluginapi.Request{Params: params}, out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, "the script waits for its first line to be seen: %s", res.Message)
	require.Equal(t, "first\nsecond\n", out.String())
}

// gateWriter calls onFirst when "first" arrives, i.e. while the script is
// still running.
type gateWriter struct {
	plugintest.Output
	want    string // default "first\n"
	onFirst func()
	once    sync.Once
}

func (w *gateWriter) Write(p []byte) (int, error) {
	n, err := w.Output.Write(p)
	want := w.want
	if want == "" {
		want = "first\n"
	}
	if strings.Contains(w.String(), want) {
		w.once.Do(w.onFirst)
	}
	return n, err
}

// procsWith returns the pids of processes whose command line contains marker.
func procsWith(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // not a pid, or gone
		}
		// Arguments are NUL-separated; match them space-separated.
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), marker) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func requireNoProcs(t *testing.T, marker string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(procsWith(t, marker)) == 0 }, 5*time.Second, 20*time.Millisecond,
		"processes with %q survived the run", marker)
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	marker := fmt.Sprintf("30.%d", time.Now().UnixNano()%1000000)
	// A background child, a grandchild in a subshell and the foreground sleep.
	script := fmt.Sprintf(`sleep %[1]s & (sleep %[1]s; echo never) & echo started; sleep %[1]s`, marker)
	params, _ := json.Marshal(Params{Script: script})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	res, out, err := run(t, ctx, string(params))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "timeout"}, res)
	require.Equal(t, "started\n", out)
	requireNoProcs(t, "sleep "+marker)
}

func TestKillEscalatesToSIGKILL(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	marker := fmt.Sprintf("31.%d", time.Now().UnixNano()%1000000)
	// The script and its child ignore SIGTERM.
	script := fmt.Sprintf(`trap '' TERM; sleep %[1]s & echo started; sleep %[1]s`, marker)
	params, _ := json.Marshal(Params{Script: script})
	h := newHandler(t)
	h.killGrace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	out := &gateWriter{want: "started\n", onFirst: cancel}
	start := time.Now()
	res, err := h.Run(ctx, pluginapi.Request{Params: params}, out)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "killed"}, res)
	requireNoProcs(t, "sleep "+marker)
}

func TestBackgroundProcessHoldingOutputDoesNotHangTheRun(t *testing.T) {
	t.Parallel()
	// The background sleep keeps stdout open after the script exits.
	params, _ := json.Marshal(Params{Script: `sleep 3 & echo done`})
	start := time.Now()
	res, out, err := run(t, t.Context(), string(params))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Contains(t, res.Message, "kept its output open")
	require.Equal(t, "done\n", out)
	require.Less(t, time.Since(start), outputGrace+2*time.Second)
}

// TestRunReusesOnePrivateFilePerScript: every run of a script reads the
// same private, read-only file (no file written per run); another script
// has its own; Close removes them.
func TestRunReusesOnePrivateFilePerScript(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	h := New().(*handler)
	runScript := func(script string) string {
		t.Helper()
		params, err := json.Marshal(Params{Script: script})
		require.NoError(t, err)
		var out plugintest.Output
		res, err := h.Run(t.Context(), pluginapi.Request{Params: params}, &out)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
		return strings.TrimSpace(out.String())
	}
	first := runScript(`echo "$0"`)
	require.Equal(t, first, runScript(`echo "$0"`), "the second run reads the same file")
	st, err := os.Stat(first)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o500), st.Mode().Perm())
	dirSt, err := os.Stat(filepath.Dir(first))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dirSt.Mode().Perm())
	other := runScript(`echo "$0" # another script`)
	require.NotEqual(t, first, other)
	require.Equal(t, filepath.Dir(first), filepath.Dir(other))

	// A file removed behind the plugin's back, even by the script itself,
	// is written again.
	require.Equal(t, "bye", runScript(`rm -- "$0"; echo bye`))
	require.Equal(t, "bye", runScript(`rm -- "$0"; echo bye`))
	require.NoError(t, os.Remove(first))
	again := runScript(`echo "$0"`)
	_, err = os.Stat(again)
	require.NoError(t, err)
	// One changed behind its back too.
	require.NoError(t, os.Chmod(again, 0o700))
	require.NoError(t, os.WriteFile(again, []byte("echo tampered"), 0o700))
	require.NotEqual(t, "tampered", runScript(`echo "$0"`))

	require.NoError(t, h.Close())
	_, err = os.Stat(filepath.Dir(first))
	require.True(t, os.IsNotExist(err), "Close removes the script directory")
	require.NotEmpty(t, runScript(`echo "$0"`), "a run after Close still runs")
	require.NoError(t, h.Close())
}

// TestScriptCacheEvictsOnlyUnusedFiles: over its bounds the cache removes
// the least recently used files, never one a run still uses.
func TestScriptCacheEvictsOnlyUnusedFiles(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	c := newScriptCache()
	defer c.Close()
	held, releaseHeld, err := c.acquire("held")
	require.NoError(t, err)
	var paths []string
	for i := range maxScripts + 10 {
		path, release, err := c.acquire(fmt.Sprintf("script %d", i))
		require.NoError(t, err)
		release()
		paths = append(paths, path)
	}
	require.LessOrEqual(t, len(c.files), maxScripts)
	_, err = os.Stat(held)
	require.NoError(t, err, "a file in use is kept")
	_, err = os.Stat(paths[0])
	require.True(t, os.IsNotExist(err), "the least recently used file is removed")
	_, err = os.Stat(paths[len(paths)-1])
	require.NoError(t, err, "the most recent file is kept")
	ents, err := os.ReadDir(c.dir)
	require.NoError(t, err)
	require.Len(t, ents, len(c.files), "no file outside the cache")

	// Dropped while in use: removed when its run is over.
	c.mu.Lock()
	c.dropLocked("held", c.files["held"])
	c.mu.Unlock()
	_, err = os.Stat(held)
	require.NoError(t, err)
	releaseHeld()
	_, err = os.Stat(held)
	require.True(t, os.IsNotExist(err))
}

// TestStaleScriptDirsAreRemoved: the script directory of a plugin process
// that is gone is removed when another plugin starts its own; a live one's
// stays.
func TestStaleScriptDirsAreRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	stale := filepath.Join(tmp, fmt.Sprintf("%s%d-123", scriptDirPrefix, dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-456", scriptDirPrefix, os.Getppid()))
	for _, d := range []string{stale, live} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "x"), 0o700))
	}
	c := newScriptCache()
	defer c.Close()
	_, release, err := c.acquire("echo hi")
	require.NoError(t, err)
	release()
	require.Eventually(t, func() bool { _, err := os.Stat(stale); return os.IsNotExist(err) },
		10*time.Second, 10*time.Millisecond, "the dead plugin's directory is removed")
	_, err = os.Stat(live)
	require.NoError(t, err)
}
