package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
	"github.com/cronix/cronix/plugins/shell"
)

// shellBin and notifyBin are the plugin binaries TestMain builds: the
// shell plugin and the third-party example plugin (its own go build).
var shellBin, notifyBin, crashyBin, frozenBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if bin := os.Getenv("PLUGINHOST_CRASH_HELPER"); bin != "" {
		return crashHelper(bin, os.Getenv("PLUGINHOST_CRASH_MARKER"))
	}
	dir, err := os.MkdirTemp("", "pluginhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := harness.PluginSocketsIn(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if shellBin, err = harness.BuildPackage(ctx, filepath.Join(dir, "cronix-plugin-shell"),
		"./plugins/shell/cmd/cronix-plugin-shell"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if notifyBin, err = harness.BuildPackage(ctx, filepath.Join(dir, "cronix-plugin-notify"), "./plugins/example"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if frozenBin, err = harness.BuildPackage(ctx, filepath.Join(dir, "cronix-plugin-frozen"), "./internal/testplugins/v1frozen"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if crashyBin, err = harness.BuildPackage(ctx, filepath.Join(dir, "cronix-plugin-crashy"), "./internal/testplugins/crashy"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func shellSpec() Spec { return Spec{Name: "shell", Cmd: []string{shellBin}} }

// startHost starts a Host for specs, stopped when the test ends; logs go to
// the returned buffer.
func startHost(t *testing.T, specs ...Spec) (*Host, *plugintest.Output) {
	t.Helper()
	logs := &plugintest.Output{}
	h := New(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})), specs)
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)
	return h, logs
}

func shellReq(fireID, script string) pluginapi.Request {
	params, _ := json.Marshal(map[string]string{"script": script})
	return pluginapi.Request{FireID: fireID, JobID: 1, JobName: "test", Params: params, ScheduledAt: time.Now(), Attempt: 1}
}

func TestRunCapturesOutput(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	require.Equal(t, []cluster.PluginInfo{{Name: shell.Name, Version: shell.Version}}, h.Handlers())
	infos := h.Infos()
	require.Len(t, infos, 1)
	require.True(t, json.Valid(infos[0].ParamsSchema))
	require.Contains(t, string(infos[0].ParamsSchema), `"script"`)

	var out plugintest.Output
	res, err := h.Run(t.Context(), "shell", shellReq("f-echo", `echo "hello $CRONIX_FIRE_ID"; echo oops >&2`), &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess}, res)
	require.Equal(t, "hello f-echo\noops\n", out.String())
}

func TestRunExitCode(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	res, err := h.Run(t.Context(), "shell", shellReq("f-exit", "exit 3"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.Equal(t, 3, res.ExitCode)
}

func TestValidateKeepsErrorKinds(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	require.NoError(t, h.Validate(t.Context(), "shell", json.RawMessage(`{"script":"true"}`)))
	err := h.Validate(t.Context(), "shell", json.RawMessage(`{"script":""}`))
	ip, ok := pluginapi.AsInvalidParams(err)
	require.True(t, ok, "want InvalidParams, got %v", err)
	require.Equal(t, "script", ip.Field())
}

func TestUnknownHandler(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	res, err := h.Run(t.Context(), "nope", shellReq("f-nope", "true"), io.Discard)
	require.ErrorIs(t, err, ErrUnknownHandler)
	require.ErrorContains(t, err, `"nope"`)
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.ErrorIs(t, h.Validate(t.Context(), "nope", nil), ErrUnknownHandler)
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
		"processes with %q survived", marker)
}

func uniqueMarker(prefix int) string {
	return fmt.Sprintf("%d.%06d", prefix, time.Now().UnixNano()%1000000)
}

func TestTimeoutKillsTheScript(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	marker := uniqueMarker(30)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := h.Run(ctx, "shell", shellReq("f-timeout", "sleep "+marker+" & sleep "+marker), io.Discard)
	require.Less(t, time.Since(start), 5*time.Second)
	if err != nil { // else the plugin's own "timeout" answer beat our deadline timer
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "timeout"}, res)
	requireNoProcs(t, "sleep "+marker)

	// The plugin is fine afterwards.
	res, err = h.Run(t.Context(), "shell", shellReq("f-after", "true"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	bin, err := os.ReadFile(shellBin)
	require.NoError(t, err)
	sum := sha256.Sum256(bin)
	h, logs := startHost(t,
		Spec{Name: "bad", Cmd: []string{shellBin}, SHA256: strings.Repeat("ab", 32)},
		Spec{Name: "shell", Cmd: []string{shellBin}, SHA256: hex.EncodeToString(sum[:])},
	)
	require.Equal(t, []cluster.PluginInfo{{Name: shell.Name, Version: shell.Version}}, h.Handlers())
	failures := h.Failures()
	require.Len(t, failures, 1)
	require.ErrorContains(t, failures[0], `plugin "bad"`)
	require.ErrorContains(t, failures[0], "checksum")
	require.Contains(t, logs.String(), "plugin not loaded")
	require.Contains(t, logs.String(), "plugin=bad")

	res, err := h.Run(t.Context(), "shell", shellReq("f-sum", "echo ok"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
}

func TestBrokenSpecsAreSkipped(t *testing.T) {
	t.Parallel()
	h, logs := startHost(t,
		Spec{Name: "missing", Cmd: []string{filepath.Join(t.TempDir(), "no-such-plugin")}},
		// Stays up: go-plugin v1.7.0 has a WaitGroup race (fixed in v1.8.0)
		// when a process exits before its handshake, which -race reports.
		Spec{Name: "not-a-plugin", Cmd: []string{"/bin/sh", "-c", "echo not a plugin; exec sleep 5"}},
		Spec{Name: "badsum", Cmd: []string{shellBin}, SHA256: "xyz"},
		Spec{Name: "empty"},
		shellSpec(),
		Spec{Name: "shell-again", Cmd: []string{shellBin}},
	)
	require.Equal(t, []cluster.PluginInfo{{Name: shell.Name, Version: shell.Version}}, h.Handlers())
	var msgs []string
	for _, err := range h.Failures() {
		msgs = append(msgs, err.Error())
	}
	require.Len(t, msgs, 5, "%q", msgs)
	t.Logf("failures:\n%s", strings.Join(msgs, "\n"))
	for i, name := range []string{"missing", "not-a-plugin", "badsum", "empty", "shell-again"} {
		require.Contains(t, msgs[i], fmt.Sprintf("plugin %q", name))
		require.Contains(t, logs.String(), "plugin="+name)
	}
	require.Contains(t, msgs[4], `already served by plugin "shell"`)
}

// pluginPid is the pid of the running process of the handler's plugin.
func pluginPid(t *testing.T, h *Host, handler string) int {
	t.Helper()
	m, err := h.lookup(handler)
	require.NoError(t, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	require.NotNil(t, m.client)
	p := pid(m.client)
	require.NotZero(t, p)
	return p
}

// gateWriter calls onMatch once its content contains want.
type gateWriter struct {
	plugintest.Output
	want    string
	onMatch func()
	once    sync.Once
}

func (w *gateWriter) Write(p []byte) (int, error) {
	n, err := w.Output.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(w.onMatch)
	}
	return n, err
}

func TestPluginKilledDuringRun(t *testing.T) {
	t.Parallel()
	h, logs := startHost(t, shellSpec())
	oldPid := pluginPid(t, h, "shell")
	marker := uniqueMarker(32)
	out := &gateWriter{want: "started", onMatch: func() { _ = syscall.Kill(oldPid, syscall.SIGKILL) }}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := h.Run(ctx, "shell", shellReq("f-crash", "echo started; exec sleep "+marker), out)
	t.Logf("run on a killed plugin: %v", err)
	require.ErrorIs(t, err, pluginapi.ErrPluginExited)
	require.ErrorContains(t, err, `plugin "shell" crashed`)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the run must fail because of the crash, not time out")
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.Contains(t, res.Message, `plugin "shell" crashed`)
	// The script dies with its plugin (parent-death signal).
	requireNoProcs(t, "sleep "+marker)

	var out2 plugintest.Output
	res, err = h.Run(t.Context(), "shell", shellReq("f-next", "echo back"), &out2)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Equal(t, "back\n", out2.String())
	require.NotEqual(t, oldPid, pluginPid(t, h, "shell"))
	require.Equal(t, []cluster.PluginInfo{{Name: shell.Name, Version: shell.Version}}, h.Handlers())
	require.Contains(t, logs.String(), "plugin restarted")
}

// TestPluginLeftoversDieWithIt: a child a plugin left in its process
// group (no group or parent-death signal of its own) is killed when the
// plugin dies, and when the host stops it.
func TestPluginLeftoversDieWithIt(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, Spec{Name: "crashy", Cmd: []string{crashyBin}})
	for _, stop := range []string{"crash", "stop"} {
		marker := uniqueMarker(34)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		forked := make(chan struct{})
		out := &gateWriter{want: "forked", onMatch: func() { close(forked) }}
		done := make(chan struct{})
		go func() {
			defer close(done)
			params, _ := json.Marshal(map[string]string{"mode": "fork", "arg": marker})
			_, _ = h.Run(ctx, "crashy", pluginapi.Request{FireID: "f-" + stop, JobID: 1, Params: params}, out)
		}()
		select {
		case <-forked:
		case <-time.After(10 * time.Second):
			t.Fatal("the plugin did not fork")
		}
		require.Len(t, procsWith(t, "sleep "+marker), 1)
		if stop == "crash" {
			require.NoError(t, syscall.Kill(pluginPid(t, h, "crashy"), syscall.SIGKILL))
		} else {
			h.Stop()
		}
		<-done
		cancel()
		requireNoProcs(t, "sleep "+marker)
	}
}

func TestPluginKilledWhileIdle(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	// A run first: get caches the live process for the runs that follow
	// within aliveRecheck; the restart below must not be skipped by it.
	res, err := h.Run(t.Context(), "shell", shellReq("f-before", "echo ok"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	oldPid := pluginPid(t, h, "shell")
	require.NoError(t, syscall.Kill(oldPid, syscall.SIGKILL))
	m, err := h.lookup("shell")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.client.Exited()
	}, 5*time.Second, 10*time.Millisecond) // at least 10 ms: past aliveRecheck

	res, err = h.Run(t.Context(), "shell", shellReq("f-idle", "echo ok"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.NotEqual(t, oldPid, pluginPid(t, h, "shell"))
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out plugintest.Output
			fireID := fmt.Sprintf("f-%02d", i)
			res, err := h.Run(t.Context(), "shell", shellReq(fireID, `echo "$CRONIX_FIRE_ID"`), &out)
			switch {
			case err != nil:
				errs[i] = err
			case res.Status != pluginapi.StatusSuccess:
				errs[i] = fmt.Errorf("%s: %+v", fireID, res)
			case out.String() != fireID+"\n":
				errs[i] = fmt.Errorf("%s: output %q", fireID, out.String())
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// TestThousandsOfRunsAtOnceDoNotDeadlockTheConnection keeps thousands of
// runs in flight on one plugin, each worker starting its next run as soon
// as the last ends, as a node does when thousands of jobs fire every
// second. grpc-go 1.82.1 to 1.84 counted every stream's set-up and
// clean-up towards the transport's 100-item throttle: with enough streams
// starting and ending at once over the unix socket, both sides' readers
// stopped while both writers waited for the peer to read, and every run on
// the plugin hung for good (grpc/grpc-go#9330; the node stopped firing at
// 3,000 http jobs/s). All runs must finish by a deadline.
func TestThousandsOfRunsAtOnceDoNotDeadlockTheConnection(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, Spec{Name: "crashy", Cmd: []string{crashyBin}})
	const workers, each = 2000, 5
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []error
	)
	for i := range workers {
		wg.Go(func() {
			for j := range each {
				var out plugintest.Output
				res, err := h.Run(ctx, "crashy", pluginapi.Request{FireID: fmt.Sprintf("f-%04d-%d", i, j),
					Params: json.RawMessage(`{"mode":"","arg":"` + strings.Repeat("x", 200) + `"}`)}, &out)
				if err == nil && (res.Status != pluginapi.StatusSuccess || out.String() != "fine\n") {
					err = fmt.Errorf("run %d/%d: %+v, output %q", i, j, res, out.String())
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, failed, "%d of %d workers failed (a hung connection ends them at the deadline); first: %v",
		len(failed), workers, firstErr(failed))
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestStopKillsAFrozenPlugin: go-plugin's Kill asks the plugin to shut
// down over its connection and waits for the answer without a deadline; a
// plugin that does not read (here SIGSTOPped; a wedged connection does the
// same) held the node's Stop for good.
func TestStopKillsAFrozenPlugin(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	p := pluginPid(t, h, "shell")
	require.NoError(t, syscall.Kill(p, syscall.SIGSTOP))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.Stop()
	}()
	select {
	case <-stopped:
	case <-time.After(killGrace + 25*time.Second):
		_ = syscall.Kill(p, syscall.SIGKILL)
		t.Fatal("Stop waited for a frozen plugin to answer")
	}
	require.Eventually(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", p))
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 10*time.Millisecond, "the frozen plugin process survived Stop")
}

func TestStop(t *testing.T) {
	t.Parallel()
	h, _ := startHost(t, shellSpec())
	p := pluginPid(t, h, "shell")
	h.Stop()
	h.Stop() // idempotent
	_, err := h.Run(t.Context(), "shell", shellReq("f-stopped", "true"), io.Discard)
	require.ErrorIs(t, err, ErrStopped)
	require.Eventually(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", p))
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 10*time.Millisecond, "the plugin process survived Stop")
	require.Error(t, h.Start(t.Context()), "a stopped host cannot start again")
}

func TestRestartFailureBacksOffAndRecovers(t *testing.T) {
	t.Parallel()
	// Hard links, not copies: writing an executable while other tests fork
	// can make exec fail with ETXTBSY.
	bin := filepath.Join(t.TempDir(), "cronix-plugin-shell")
	require.NoError(t, os.Link(shellBin, bin))
	h, _ := startHost(t, Spec{Name: "shell", Cmd: []string{bin}})
	m, err := h.lookup("shell")
	require.NoError(t, err)

	// The plugin dies and its executable is broken: restarts fail.
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho not a plugin\nexec sleep 5\n"), 0o755))
	require.NoError(t, syscall.Kill(pluginPid(t, h, "shell"), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.client.Exited()
	}, 5*time.Second, 10*time.Millisecond)
	_, err = h.Run(t.Context(), "shell", shellReq("f-down", "true"), io.Discard)
	require.ErrorContains(t, err, `plugin "shell" is down and could not be restarted`)
	m.mu.Lock()
	retryAt := m.retryAt
	m.mu.Unlock()
	require.True(t, time.Now().Before(retryAt), "a failed restart must back off")
	_, err = h.Run(t.Context(), "shell", shellReq("f-down2", "true"), io.Discard)
	require.ErrorContains(t, err, "could not be restarted")
	m.mu.Lock()
	require.Equal(t, retryAt, m.retryAt, "no restart attempt during the backoff")
	m.mu.Unlock()

	// Once the executable is fixed, a run after the backoff restarts it.
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.Link(shellBin, bin))
	require.Eventually(t, func() bool {
		res, err := h.Run(t.Context(), "shell", shellReq("f-up", "true"), io.Discard)
		return err == nil && res.Status == pluginapi.StatusSuccess
	}, 10*time.Second, 50*time.Millisecond)
}

// crashHelper plays a node for TestNodeCrashKillsPluginsAndScripts: it
// starts the shell plugin, prints its pid, starts a long script, prints
// "started" once the script runs, and waits to be killed.
// With the crashy plugin it has it fork a plain child instead.
func crashHelper(bin, marker string) int {
	name, req, gate := "shell", shellReq("f-node-crash", "echo started; exec sleep "+marker), "started"
	if strings.HasSuffix(bin, "crashy") {
		params, _ := json.Marshal(map[string]string{"mode": "fork", "arg": marker})
		name, req, gate = "crashy", pluginapi.Request{FireID: "f-node-crash", JobID: 1, Params: params}, "forked"
	}
	h := New(nil, []Spec{{Name: name, Cmd: []string{bin}}})
	if err := h.Start(context.Background()); err != nil || len(h.Handlers()) != 1 {
		fmt.Println("start failed:", err, h.Failures())
		return 1
	}
	m, _ := h.lookup(name)
	m.mu.Lock()
	fmt.Println("pid", pid(m.client))
	m.mu.Unlock()
	started := &gateWriter{want: gate, onMatch: func() { fmt.Println("started") }}
	_, _ = h.Run(context.Background(), name, req, started)
	return 1 // not reached: the test kills this process first
}

func TestNodeCrashKillsPluginsAndScripts(t *testing.T) {
	t.Parallel()
	nodeCrash(t, shellBin, uniqueMarker(33))
}

// TestNodeCrashKillsPluginLeftovers: a plain child a plugin started (in
// the plugin's process group) dies with the node too, through the node's
// guard.
func TestNodeCrashKillsPluginLeftovers(t *testing.T) {
	t.Parallel()
	nodeCrash(t, crashyBin, uniqueMarker(35))
}

// nodeCrash runs crashHelper as a node with the plugin bin, kills it with
// SIGKILL once the plugin's child `sleep marker` runs, and checks that
// neither the plugin nor the child outlives it.
func nodeCrash(t *testing.T, bin, marker string) {
	t.Helper()
	node := exec.Command(os.Args[0], "-test.run=^$")
	node.Env = append(os.Environ(), "PLUGINHOST_CRASH_HELPER="+bin, "PLUGINHOST_CRASH_MARKER="+marker)
	stdout, err := node.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, node.Start())
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		buf := make([]byte, 0, 256)
		tmp := make([]byte, 256)
		for {
			n, err := stdout.Read(tmp)
			buf = append(buf, tmp[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the helper node exited early")
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("the helper node did not report in time")
			return ""
		}
	}
	var plugin int
	line := next()
	_, err = fmt.Sscanf(line, "pid %d", &plugin)
	require.NoError(t, err, "helper said %q", line)
	require.Equal(t, "started", next())
	require.Eventually(t, func() bool { return len(procsWith(t, "sleep "+marker)) > 0 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, node.Process.Signal(syscall.SIGKILL)) // the node crashes
	require.Eventually(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", plugin))
		return errors.Is(err, os.ErrNotExist)
	}, 5*time.Second, 20*time.Millisecond, "the plugin outlived its node")
	requireNoProcs(t, "sleep "+marker)
}

// lateCtx is a context whose deadline has passed but whose timer has not
// run yet: Err is still nil, as it is for a moment after the deadline.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
func (lateCtx) Err() error                  { return nil }

// TestInfoTimedOutReadsTheClock: an Info error that arrives at the deadline
// is the describe timeout even while the call's ctx does not say so yet
// (the plugin's own deadline error, read before our timer ran); one long
// before the deadline, or after the caller gave up, is not.
func TestInfoTimedOutReadsTheClock(t *testing.T) {
	t.Parallel()
	fromPlugin := errors.New("context deadline exceeded") // a handler error: not context.DeadlineExceeded
	require.True(t, infoTimedOut(t.Context(), lateCtx{t.Context()}, fromPlugin))

	early, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	require.False(t, infoTimedOut(t.Context(), early, errors.New("no handler configured")))
	require.True(t, infoTimedOut(t.Context(), early, context.DeadlineExceeded))
	require.False(t, infoTimedOut(t.Context(), early, nil))

	gone, stop := context.WithCancel(t.Context())
	stop()
	require.False(t, infoTimedOut(gone, lateCtx{gone}, fromPlugin), "the caller's ctx ended: not our timeout")
}

// TestHungDescribeAndValidateAreBounded: a plugin that hangs in Info is
// refused after the describe timeout; one that hangs in Validate fails the
// call after the validate timeout, and the plugin keeps serving.
func TestHungDescribeAndValidateAreBounded(t *testing.T) {
	t.Parallel()
	logs := &plugintest.Output{}
	h := New(slog.New(slog.NewTextHandler(logs, nil)), []Spec{
		{Name: "hangs", Cmd: []string{crashyBin}, Env: []string{"CRASHY_HANG_INFO=1"}},
		{Name: "crashy", Cmd: []string{crashyBin}},
	}, Options{DescribeTimeout: 500 * time.Millisecond, ValidateTimeout: 500 * time.Millisecond})
	started := time.Now()
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(h.Stop)
	require.Less(t, time.Since(started), 20*time.Second)
	require.Equal(t, []cluster.PluginInfo{{Name: "crashy", Version: "0.0.1"}}, h.Handlers())
	st := h.Status()
	require.Len(t, st, 2)
	require.Equal(t, "hangs", st[1].Name)
	require.Equal(t, cluster.PluginRefused, st[1].State)
	require.Equal(t, cluster.PluginReasonDescribeFailed, st[1].Reason)
	require.Contains(t, st[1].Message, "no answer to Info within 500ms")

	begin := time.Now()
	err := h.Validate(t.Context(), "crashy", json.RawMessage(`{"mode":"hang"}`))
	require.ErrorContains(t, err, `plugin "crashy" did not answer Validate within 500ms`)
	require.Less(t, time.Since(begin), 5*time.Second)
	require.NoError(t, h.Validate(t.Context(), "crashy", json.RawMessage(`{"mode":"ok"}`)))
}
