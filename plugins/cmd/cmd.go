// Package cmd is Cronix's built-in "cmd" handler: it runs a program with
// its arguments directly, without a shell (so nothing in an argument is
// expanded, quoted or globbed), streams its stdout and stderr as the run's
// output, and maps its exit code to the run's outcome.
//
// The program runs in its own process group. When the run's ctx is done
// (timeout or kill) the whole group gets SIGTERM, then SIGKILL after a short
// grace (see package plugins/internal/proc).
package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/plugins/internal/proc"
)

// Name is the handler's name: what a job puts in its "handler" field.
const Name = "cmd"

// Version is the handler's version.
const Version = "1.0.0"

// Params are the cmd handler's job params.
type Params struct {
	// Argv is the program and its arguments. Argv[0] is looked up in the
	// plugin's PATH unless it contains a "/". Required.
	Argv []string `json:"argv"`
	// Env holds extra environment variables. The CRONIX_* variables of the
	// run override same-named entries.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the absolute working directory; empty = the plugin's.
	Dir string `json:"dir,omitempty"`
}

const paramsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Command",
  "type": "object",
  "properties": {
    "argv": {
      "type": "array",
      "title": "Command and arguments",
      "description": "The program and its arguments, run without a shell. The program is looked up in PATH unless it contains a slash. Exit code 0 is success.",
      "items": {"type": "string"},
      "minItems": 1,
      "prefixItems": [{"type": "string", "minLength": 1}]
    },
    "env": {
      "type": "object",
      "title": "Environment",
      "description": "Extra environment variables. CRONIX_FIRE_ID, CRONIX_JOB_ID, CRONIX_JOB_NAME, CRONIX_SCHEDULED_AT, CRONIX_ATTEMPT, CRONIX_SHARD_INDEX and CRONIX_SHARD_TOTAL are always set.",
      "additionalProperties": {"type": "string"},
      "propertyNames": {"pattern": "^[^=\u0000]+$"}
    },
    "dir": {
      "type": "string",
      "title": "Working directory",
      "description": "Absolute path of the working directory (default: the plugin's).",
      "pattern": "^/"
    }
  },
  "required": ["argv"],
  "additionalProperties": false
}`

type handler struct {
	opts proc.Options
}

var _ pluginapi.Handler = (*handler)(nil)

// New returns the cmd handler.
func New() pluginapi.Handler { return &handler{} }

func (h *handler) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Runs a program with arguments, without a shell; exit code 0 is success.",
		ParamsSchema: json.RawMessage(paramsSchema),
	}, nil
}

func (h *handler) Validate(_ context.Context, params json.RawMessage) error {
	_, err := parseParams(params)
	return err
}

// Run runs the program. Exit code 0 is success; another exit code fails the
// run with that code; death by a signal fails it with 128+signal. When ctx
// is done the process group is killed and the run fails with "timeout" or
// "killed". An error (permanent unless the node ran out of resources) is
// returned only when the program could not be found or started.
func (h *handler) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	p, err := parseParams(req.Params)
	if err != nil {
		return proc.Failed(-1, err.Error()), err
	}
	if ctx.Err() != nil {
		return proc.CtxResult(ctx), nil //nolint:nilerr // a run stopped by its context is a result, not a handler error
	}
	path := p.Argv[0]
	if !strings.Contains(path, "/") {
		if path, err = exec.LookPath(path); err != nil {
			err = pluginapi.Permanent(fmt.Errorf("program %q not found on this node: %w", p.Argv[0], err))
			return proc.Failed(-1, err.Error()), err
		}
	} else if !filepath.IsAbs(path) && p.Dir != "" {
		path = filepath.Join(p.Dir, path) // relative to the job's working directory
	}
	cmd := &exec.Cmd{Path: path, Args: slices.Clone(p.Argv), Env: proc.Environ(p.Env, req), Dir: p.Dir}
	return proc.Run(ctx, cmd, out, h.opts)
}

// parseParams decodes and validates raw params, reporting the first
// offending field as a pluginapi.InvalidParams error.
func parseParams(raw json.RawMessage) (Params, error) {
	var fields map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return Params{}, pluginapi.InvalidParams("", "params must be a JSON object")
		}
	}
	var p Params
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		switch k {
		case "argv":
			if err := json.Unmarshal(v, &p.Argv); err != nil {
				return Params{}, pluginapi.InvalidParams("argv", "must be an array of strings")
			}
		case "env":
			if err := json.Unmarshal(v, &p.Env); err != nil {
				return Params{}, pluginapi.InvalidParams("env", "must be an object whose values are strings")
			}
		case "dir":
			if err := json.Unmarshal(v, &p.Dir); err != nil {
				return Params{}, pluginapi.InvalidParams("dir", "must be a string")
			}
		default:
			return Params{}, pluginapi.InvalidParams(k, "unknown field (allowed: argv, env, dir)")
		}
	}
	if len(p.Argv) == 0 {
		return Params{}, pluginapi.InvalidParams("argv", "must name a program (a non-empty array)")
	}
	if strings.TrimSpace(p.Argv[0]) == "" {
		return Params{}, pluginapi.InvalidParams("argv", "the program (first element) must not be empty")
	}
	for i, a := range p.Argv {
		if strings.ContainsRune(a, 0) {
			return Params{}, pluginapi.InvalidParams(fmt.Sprintf("argv.%d", i), "must not contain NUL bytes")
		}
	}
	if p.Dir != "" && !filepath.IsAbs(p.Dir) {
		return Params{}, pluginapi.InvalidParams("dir", fmt.Sprintf("%q is not an absolute path", p.Dir))
	}
	if strings.ContainsRune(p.Dir, 0) {
		return Params{}, pluginapi.InvalidParams("dir", "must not contain NUL bytes")
	}
	if err := proc.CheckEnv(p.Env); err != nil {
		return Params{}, err
	}
	return p, nil
}
