package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
)

// run runs one fire and queues its result. It holds a run slot, which it
// frees only after the result is queued, so with MaxConcurrent 1 results
// are queued in dispatch order.
func (a *Agent) run(d cluster.Dispatch, received time.Time) {
	defer a.runs.Done()
	defer func() { <-a.sem }()

	var (
		mu       sync.Mutex
		ended    bool // no "running" report may be queued any more
		reported bool // the final result is queued
	)
	end := func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	}
	// A panic in the agent's own code fails this fire, not the node.
	defer func() {
		if p := recover(); p != nil {
			end()
			a.log.Error("agent: panic while running a fire", "fire_id", d.FireID, "panic", p,
				"stack", string(debug.Stack()))
			if !reported {
				res := a.newResult(d, cluster.StatusFailed)
				res.Message = fmt.Sprintf("node agent panic: %v", p)
				a.reporter.enqueue(res)
				a.finished(d.FireID)
			}
		}
	}()

	ctx, cancel := context.WithCancel(a.runCtx)
	if d.Job.TimeoutSeconds > 0 {
		cancel()
		ctx, cancel = context.WithTimeout(a.runCtx, time.Duration(d.Job.TimeoutSeconds)*time.Second)
	}
	defer cancel()

	out := newCappedOutput(a.cfg.OutputCap)
	req := pluginapi.Request{
		FireID:      d.FireID,
		JobID:       d.Job.JobID,
		JobName:     d.Job.Name,
		Params:      d.Job.Params,
		ScheduledAt: d.ScheduledAt,
		Attempt:     1,
	}
	started := time.Now().UTC()
	// A long run gets one "running" report so the UI shows it; a short one
	// only reports its end. The lock orders it before the final result.
	timer := time.AfterFunc(a.cfg.RunningAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if ended {
			return
		}
		res := a.newResult(d, cluster.StatusRunning)
		res.StartedAt = &started
		a.reporter.enqueue(res)
	})
	result, runErr := a.call(ctx, d.Job.Handler, req, out)
	finished := time.Now().UTC()
	end()
	timer.Stop()

	res := a.newResult(d, cluster.StatusFailed)
	res.StartedAt, res.FinishedAt = &started, &finished
	res.Output, res.OutputTruncated = out.Result()
	if runErr == nil {
		code := result.ExitCode
		res.ExitCode = &code
		res.Message = result.Message
	}
	switch {
	case runErr == nil && result.Status == pluginapi.StatusSuccess:
		res.Status = cluster.StatusSuccess
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Status = cluster.StatusTimeout
		res.Message = joinMessage(fmt.Sprintf("timed out after %ds", d.Job.TimeoutSeconds), res.Message, runErr)
	case a.runCtx.Err() != nil:
		res.Status = cluster.StatusKilled
		res.Message = joinMessage("killed: node agent shutting down", res.Message, runErr)
	case runErr != nil:
		res.Message = runErr.Error()
	case result.Status == pluginapi.StatusFailed:
	default:
		res.Message = joinMessage(fmt.Sprintf("handler returned unknown status %q", result.Status), res.Message, nil)
	}
	a.reporter.enqueue(res)
	reported = true
	a.finished(d.FireID)
	a.log.Debug("agent: fire done", "fire_id", d.FireID, "status", res.Status,
		"latency_ms", started.Sub(received).Milliseconds(), "duration_ms", finished.Sub(started).Milliseconds())
}

// call runs the handler, turning a panic inside an in-process Runner into
// an error.
func (a *Agent) call(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (res pluginapi.Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("agent: runner panicked", "fire_id", req.FireID, "handler", handler, "panic", p,
				"stack", string(debug.Stack()))
			err = fmt.Errorf("handler %q panicked: %v", handler, p)
		}
	}()
	return a.runner.Run(ctx, handler, req, out)
}

// newResult starts the result of a fire with what the dispatch says.
func (a *Agent) newResult(d cluster.Dispatch, status string) cluster.RunResult {
	return cluster.RunResult{
		FireID:      d.FireID,
		JobID:       d.Job.JobID,
		Trigger:     d.Trigger,
		Node:        a.cfg.UUID,
		Status:      status,
		ScheduledAt: d.ScheduledAt,
	}
}

// joinMessage puts the agent's explanation first, then what the handler said.
func joinMessage(what, handlerMsg string, err error) string {
	if err != nil {
		handlerMsg = err.Error()
	}
	if handlerMsg == "" {
		return what
	}
	return what + ": " + handlerMsg
}
