// Package shell is Cronix's built-in "shell" handler: it runs a job's script
// with sh, bash, python3 or another interpreter, streams the script's
// stdout and stderr as the run's output, and maps its exit code to the
// run's outcome.
//
// The script runs in its own process group. When the run's ctx is done
// (timeout or kill) the whole group gets SIGTERM, then SIGKILL after a short
// grace, so no process of the script survives the run. On Linux the script's
// main process also dies with the plugin process (parent-death signal).
//
// The handler is served by the standalone binary cmd/cronix-plugin-shell or
// by any binary that calls pluginapi.Serve(shell.New()).
package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cronix/cronix/pluginapi"
)

// Name is the handler's name: what a job puts in its "handler" field.
const Name = "shell"

// Version is the handler's version.
const Version = "1.0.0"

const (
	// killGrace is how long the script's process group has between SIGTERM
	// and SIGKILL once the run's ctx is done.
	killGrace = 2 * time.Second
	// outputGrace bounds how long a finished script's output is still read
	// when a process it left behind keeps the output open.
	outputGrace = 2 * time.Second
)

type handler struct {
	killGrace time.Duration
}

var _ pluginapi.Handler = (*handler)(nil)

// New returns the shell handler.
func New() pluginapi.Handler { return &handler{killGrace: killGrace} }

func (h *handler) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Runs a script with sh, bash, python3 or another interpreter; exit code 0 is success.",
		ParamsSchema: json.RawMessage(paramsSchema),
	}, nil
}

func (h *handler) Validate(_ context.Context, params json.RawMessage) error {
	_, err := parseParams(params)
	return err
}

// Run runs the script. Exit code 0 is success; another exit code fails the
// run with that code; death by a signal fails it with 128+signal. When ctx
// is done the process group is killed and the run fails with the message
// "timeout" (deadline) or "killed" (cancellation). An error is returned only
// when the script could not be started.
func (h *handler) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return failed(-1, err.Error()), err
	}
	if ctx.Err() != nil {
		return ctxResult(ctx), nil
	}
	interp, err := resolveInterpreter(p.Interpreter)
	if err != nil {
		return failed(-1, err.Error()), err
	}
	script, err := writeScript(p.Script)
	if err != nil {
		err = pluginapi.Retryable(err)
		return failed(-1, err.Error()), err
	}
	defer os.Remove(script)

	cmd := exec.Command(interp, script)
	cmd.Env = environment(p.Env, req)
	cmd.Stdout = out // one writer for both: exec copies them through one pipe, in order
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = outputGrace
	if err := cmd.Start(); err != nil {
		err = startError(interp, err)
		return failed(-1, err.Error()), err
	}
	waitErr, stopped := h.wait(ctx, cmd)
	if stopped {
		return ctxResult(ctx), nil
	}
	return exitResult(cmd.ProcessState, waitErr), nil
}

// wait waits for cmd; when ctx is done first it stops the process group and
// reports stopped.
func (h *handler) wait(ctx context.Context, cmd *exec.Cmd) (waitErr error, stopped bool) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return err, false
	case <-ctx.Done():
	}
	pgid := cmd.Process.Pid
	signalGroup(cmd, pgid, syscall.SIGTERM)
	grace := time.NewTimer(h.killGrace)
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

func failed(code int, msg string) pluginapi.Result {
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: code, Message: msg}
}

// ctxResult is the outcome of a run stopped because ctx is done.
func ctxResult(ctx context.Context) pluginapi.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return failed(-1, "timeout")
	}
	return failed(-1, "killed")
}

func exitResult(st *os.ProcessState, waitErr error) pluginapi.Result {
	if st == nil {
		return failed(-1, fmt.Sprintf("waiting for the script: %v", waitErr))
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return failed(128+int(ws.Signal()), "killed by signal: "+ws.Signal().String())
	}
	code := st.ExitCode()
	if code != 0 {
		return failed(code, "exit status "+strconv.Itoa(code))
	}
	res := pluginapi.Result{Status: pluginapi.StatusSuccess}
	if errors.Is(waitErr, exec.ErrWaitDelay) {
		res.Message = "a process the script left running kept its output open; output after exit was not captured"
	}
	return res
}

func resolveInterpreter(name string) (string, error) {
	if name == "" {
		name = "sh"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", pluginapi.Permanent(fmt.Errorf("interpreter %q not found on this node: %w", name, err))
	}
	return path, nil
}

// writeScript stores the script in a private temp file the interpreter
// reads; the caller removes it.
func writeScript(src string) (string, error) {
	f, err := os.CreateTemp("", "cronix-shell-*")
	if err != nil {
		return "", fmt.Errorf("creating the script file: %w", err)
	}
	_, werr := f.WriteString(src)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o700)); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("writing the script file: %w", err)
	}
	return f.Name(), nil
}

// environment is the script's environment: the plugin's (without the
// plugin handshake variables), then the job's env, then the run's CRONIX_*
// variables. Later entries win.
func environment(extra map[string]string, req pluginapi.Request) []string {
	env := pluginapi.ProcessEnv()
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
	)
}

// startError classifies a failure to start the interpreter: resource
// exhaustion is worth retrying, anything else is not.
func startError(interp string, err error) error {
	err = fmt.Errorf("starting %s: %w", interp, err)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EMFILE) {
		return pluginapi.Retryable(err)
	}
	return pluginapi.Permanent(err)
}
