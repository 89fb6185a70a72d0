// Package shell is Cronix's built-in "shell" handler: it runs a job's script
// with sh, bash, python3 or another interpreter, streams the script's
// stdout and stderr as the run's output, and maps its exit code to the
// run's outcome.
//
// The script runs as `<interpreter> <file>`, from a private file written
// once per distinct script and shared by its runs (see scripts.go): no file
// is written or removed per run, and the script never shows in a process's
// arguments. The script runs in its own process group. When the run's ctx is done
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
	"io/fs"
	"os/exec"
	"sync"
	"time"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/plugins/internal/proc"
)

// Name is the handler's name: what a job puts in its "handler" field.
const Name = "shell"

// Version is the handler's version.
const Version = "1.0.0"

const (
	// killGrace is how long the script's process group has between SIGTERM
	// and SIGKILL once the run's ctx is done.
	killGrace = proc.DefaultKillGrace
	// outputGrace bounds how long a finished script's output is still read
	// when a process it left behind keeps the output open.
	outputGrace = proc.DefaultOutputGrace
)

type handler struct {
	killGrace time.Duration
	scripts   *scriptCache
	// interps caches the path LookPath found for an interpreter name (the
	// plugin's PATH does not change); an entry whose file is gone when a
	// run starts is dropped, so the next run looks again.
	interps sync.Map // name → path
}

var (
	_ pluginapi.Handler = (*handler)(nil)
	_ io.Closer         = (*handler)(nil)
)

// New returns the shell handler. Close it (pluginapi.Serve does) to remove
// its script files.
func New() pluginapi.Handler { return &handler{killGrace: killGrace, scripts: newScriptCache()} }

// Close removes the handler's script files.
func (h *handler) Close() error { return h.scripts.Close() }

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
		return proc.Failed(-1, err.Error()), err
	}
	if ctx.Err() != nil {
		return proc.CtxResult(ctx), nil
	}
	interp, err := h.resolveInterpreter(p.Interpreter)
	if err != nil {
		return proc.Failed(-1, err.Error()), err
	}
	script, release, err := h.scripts.acquire(p.Script)
	if err != nil {
		err = pluginapi.Retryable(err)
		return proc.Failed(-1, err.Error()), err
	}
	defer release()

	cmd := exec.Command(interp, script)
	cmd.Env = proc.Environ(p.Env, req)
	res, err := proc.Run(ctx, cmd, out, proc.Options{KillGrace: h.killGrace, OutputGrace: outputGrace})
	if errors.Is(err, fs.ErrNotExist) {
		h.interps.Delete(p.Interpreter) // removed since it was looked up
	}
	return res, err
}

// resolveInterpreter is the path of the named interpreter ("" is sh), from
// the cache or LookPath.
func (h *handler) resolveInterpreter(name string) (string, error) {
	if path, ok := h.interps.Load(name); ok {
		return path.(string), nil
	}
	look := name
	if look == "" {
		look = "sh"
	}
	path, err := exec.LookPath(look)
	if err != nil {
		return "", pluginapi.Permanent(fmt.Errorf("interpreter %q not found on this node: %w", look, err))
	}
	h.interps.Store(name, path)
	return path, nil
}
