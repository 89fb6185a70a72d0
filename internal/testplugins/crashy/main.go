// Command crashy is a handler plugin for tests of the node's robustness:
// its "crashy" handler writes three lines and then panics in a goroutine
// (crashing the process) when params say {"mode":"crash"}, answers
// normally otherwise, hangs in Validate for {"mode":"hang"}, and hangs in
// Info when CRASHY_HANG_INFO=1 is in its environment. {"mode":"fork",
// "arg":"N"} starts `sleep N` as a plain child (its own process group not
// asked for, no parent-death signal, as a careless third-party handler
// would), writes "forked" and runs until cancelled.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/cronix/cronix/pluginapi"
)

type crashy struct{}

type params struct {
	Mode string `json:"mode"`
	Arg  string `json:"arg"`
}

func (crashy) Info(ctx context.Context) (pluginapi.Info, error) {
	if os.Getenv("CRASHY_HANG_INFO") == "1" {
		<-ctx.Done()
		return pluginapi.Info{}, ctx.Err()
	}
	return pluginapi.Info{Name: "crashy", Version: "0.0.1",
		ParamsSchema: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}}}`)}, nil
}

func (crashy) Validate(ctx context.Context, raw json.RawMessage) error {
	var p params
	if err := json.Unmarshal(raw, &p); err != nil {
		return pluginapi.InvalidParams("mode", err.Error())
	}
	if p.Mode == "hang" {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (crashy) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	var p params
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return pluginapi.Result{}, pluginapi.InvalidParams("mode", err.Error())
	}
	if p.Mode == "crash" {
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(out, "line %d\n", i)
		}
		go func() { panic("crashy: boom in a goroutine") }()
		<-ctx.Done() // never returns: the panic ends the process
		return pluginapi.Result{}, ctx.Err()
	}
	if p.Mode == "fork" {
		cmd := exec.Command("sleep", p.Arg)
		if err := cmd.Start(); err != nil {
			return pluginapi.Result{}, fmt.Errorf("crashy: fork: %w", err)
		}
		go func() { _ = cmd.Wait() }()
		fmt.Fprintln(out, "forked")
		<-ctx.Done()
		return pluginapi.Result{Status: pluginapi.StatusFailed, Message: "killed"}, nil
	}
	fmt.Fprintln(out, "fine")
	return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
}

func main() {
	if err := pluginapi.Serve(crashy{}); err != nil {
		fmt.Fprintln(os.Stderr, "crashy:", err)
		os.Exit(1)
	}
}
