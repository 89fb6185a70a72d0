// Package proc runs the child process of a built-in handler (shell, cmd):
// in its own process group, with stdout and stderr going in order to one
// writer, the whole group stopped (SIGTERM, then SIGKILL after a grace) when
// the run's ctx is done, and the exit status mapped to a pluginapi.Result.
// On Linux the whole group also dies with the plugin process (parent-death
// signal and a guard process, see internal/procgroup) and is listed in the
// node's process-group journal while it runs.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cronix/cronix/internal/procgroup"
	"github.com/cronix/cronix/pluginapi"
)

const (
	// DefaultKillGrace is how long a process group has between SIGTERM and
	// SIGKILL once the run's ctx is done.
	DefaultKillGrace = 2 * time.Second
	// DefaultOutputGrace bounds how long a finished process's output is
	// still read when a process it left behind keeps the output open.
	DefaultOutputGrace = 2 * time.Second
)

// Options tune Run; zero fields take the defaults.
type Options struct {
	// KillGrace is the time between SIGTERM and SIGKILL; 0 = DefaultKillGrace.
	KillGrace time.Duration
	// OutputGrace is how long output is read after the main process exited;
	// 0 = DefaultOutputGrace.
	OutputGrace time.Duration
}

// Run starts cmd (Path, Args, Env and Dir already set) in its own process
// group with out as its stdout and stderr, and waits for it. Exit code 0 is
// success; another exit code fails the run with that code; death by a
// signal fails it with 128+signal. When ctx is done first, the process
// group is stopped and the run fails with the message "timeout" (deadline)
// or "killed" (cancellation). An error is returned only when the process
// could not be started (see StartError).
func Run(ctx context.Context, cmd *exec.Cmd, out io.Writer, opts Options) (pluginapi.Result, error) {
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.OutputGrace <= 0 {
		opts.OutputGrace = DefaultOutputGrace
	}
	if ctx.Err() != nil {
		return CtxResult(ctx), nil //nolint:nilerr // a run stopped by its context is a result, not a handler error
	}
	if cmd.Stdin == nil {
		cmd.Stdin = devNull() // one open file for every run, not one open per run
	}
	w := &outputWriter{w: out}
	cmd.Stdout = w // one writer for both: exec copies them through one pipe, in order
	cmd.Stderr = w
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = opts.OutputGrace
	// On Linux the group is also guarded: it dies with this plugin process
	// and is listed in the node's process-group journal (internal/procgroup).
	if err := procgroup.Start(cmd); err != nil {
		err = StartError(cmd.Path, err)
		return Failed(-1, err.Error()), err
	}
	defer procgroup.Done(cmd.Process.Pid)
	waitErr, stopped := wait(ctx, cmd, opts.KillGrace)
	if stopped {
		return CtxResult(ctx), nil
	}
	return exitResult(cmd.ProcessState, waitErr), nil
}

// devNull is an open os.DevNull shared by the runs' stdin (exec passes an
// *os.File as it is), or nil (exec opens one per run) when it cannot be opened.
var devNull = sync.OnceValue(func() io.Reader {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// outputWriter is a run's output as exec.Cmd sees it: exec copies the
// process's pipe into it with ReadFrom, which takes a pooled buffer instead
// of allocating io.Copy's 32 KiB per run.
type outputWriter struct{ w io.Writer }

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (o *outputWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

func (o *outputWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	// The wrapper hides any ReaderFrom or WriterTo, so the buffer is used.
	return io.CopyBuffer(struct{ io.Writer }{o.w}, struct{ io.Reader }{r}, *bp)
}

// wait waits for cmd; when ctx is done first it stops the process group and
// reports stopped.
func wait(ctx context.Context, cmd *exec.Cmd, killGrace time.Duration) (waitErr error, stopped bool) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return err, false
	case <-ctx.Done():
	}
	pgid := cmd.Process.Pid
	signalGroup(cmd, pgid, syscall.SIGTERM)
	grace := time.NewTimer(killGrace)
	defer grace.Stop()
	select {
	case waitErr = <-waited:
		// The main process is gone and the output closed; whatever else
		// of the group ignored SIGTERM dies now.
		signalGroup(cmd, pgid, syscall.SIGKILL)
	case <-grace.C:
		signalGroup(cmd, pgid, syscall.SIGKILL)
		waitErr = <-waited
	}
	return waitErr, true
}

// Failed is a failed Result with an exit code and message.
func Failed(code int, msg string) pluginapi.Result {
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: code, Message: msg}
}

// CtxResult is the outcome of a run stopped because ctx is done: "timeout"
// for a deadline, "killed" for a cancellation.
func CtxResult(ctx context.Context) pluginapi.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Failed(-1, "timeout")
	}
	return Failed(-1, "killed")
}

func exitResult(st *os.ProcessState, waitErr error) pluginapi.Result {
	if st == nil {
		return Failed(-1, fmt.Sprintf("waiting for the process: %v", waitErr))
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Failed(128+int(ws.Signal()), "killed by signal: "+ws.Signal().String())
	}
	code := st.ExitCode()
	if code != 0 {
		return Failed(code, "exit status "+strconv.Itoa(code))
	}
	res := pluginapi.Result{Status: pluginapi.StatusSuccess}
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		res.Message = "a process it left running kept its output open; output after exit was not captured"
	}
	return res
}

// StartError classifies a failure to start a process: resource exhaustion
// is worth retrying, anything else (not found, not executable, bad working
// directory) is not.
func StartError(path string, err error) error {
	err = fmt.Errorf("starting %s: %w", path, err)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EMFILE) {
		return pluginapi.Retryable(err)
	}
	return pluginapi.Permanent(err)
}

// Environ is a child's environment: the plugin's (without the plugin
// handshake variables), then extra (in key order), then the run's CRONIX_*
// variables (CRONIX_FIRE_ID, CRONIX_JOB_ID, CRONIX_JOB_NAME,
// CRONIX_SCHEDULED_AT, CRONIX_ATTEMPT, CRONIX_SHARD_INDEX,
// CRONIX_SHARD_TOTAL). Later entries win.
func Environ(extra map[string]string, req pluginapi.Request) []string {
	env := slices.DeleteFunc(pluginapi.ProcessEnv(), func(kv string) bool {
		return strings.HasPrefix(kv, procgroup.EnvDir+"=") // the node's, not the job's
	})
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	scheduled := ""
	if !req.ScheduledAt.IsZero() {
		scheduled = req.ScheduledAt.UTC().Format(time.RFC3339)
	}
	return append(env,
		"CRONIX_FIRE_ID="+req.FireID,
		"CRONIX_JOB_ID="+strconv.FormatInt(req.JobID, 10),
		"CRONIX_JOB_NAME="+req.JobName,
		"CRONIX_SCHEDULED_AT="+scheduled,
		"CRONIX_ATTEMPT="+strconv.Itoa(req.Attempt),
		"CRONIX_SHARD_INDEX="+strconv.Itoa(req.ShardIndex),
		"CRONIX_SHARD_TOTAL="+strconv.Itoa(req.ShardTotal),
	)
}

// CheckEnv validates a job's extra environment (the "env" param of the
// process handlers), naming the offending variable.
func CheckEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !validEnvName(k) {
			return pluginapi.InvalidParams("env", fmt.Sprintf("invalid variable name %q", k))
		}
		if strings.ContainsRune(env[k], 0) {
			return pluginapi.InvalidParams("env."+k, "must not contain NUL bytes")
		}
	}
	return nil
}

// validEnvName reports whether k can be an environment variable name.
func validEnvName(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] == '=' || k[i] == 0 {
			return false
		}
	}
	return k != ""
}
