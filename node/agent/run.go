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
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/pluginapi"
)

// run runs one fire, with its retries, and queues its final result. It
// holds a run slot, which release frees (or hands to the next fire of the
// job) only after the result is queued, so with MaxConcurrent 1 results are
// queued in dispatch order.
func (a *Agent) run(e *execution) {
	defer a.runs.Done()
	defer a.release(e)
	d := e.d

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
	defer e.out.Close()

	started := time.Now().UTC()
	if d.StartAt.After(started) { // handed over ahead (releaseAt): the handler starts at StartAt
		started = d.StartAt.UTC()
	}
	a.reporter.started(started)
	a.cfg.Metrics.ObserveLateness(metrics.StageStarted, started.Sub(d.ScheduledAt))
	a.cfg.Metrics.RunStarted(d.Job.Handler)
	finalStatus := cluster.StatusFailed // unless the fire ends normally
	defer func() { a.cfg.Metrics.RunFinished(d.Job.Handler, finalStatus) }()
	if a.starts != nil {
		if !e.journaled {
			if err := a.starts.started(startEntry{FireID: d.FireID, JobID: d.Job.JobID, Trigger: d.Trigger,
				ScheduledAt: d.ScheduledAt, StartedAt: started}); err != nil {
				a.log.Warn("agent: recording the start of a fire", "fire_id", d.FireID, "error", err)
			}
		}
		defer a.starts.ended(d.FireID) // after the result is queued (deferred before release runs)
	}
	proc := a.startProc(e, started)
	defer proc.stop()

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
		res.Attempt = 1
		a.reporter.enqueue(res)
	})
	defer timer.Stop()

	attempts := 1 + max(d.Job.RetryCount, 0)
	var out attemptOutcome
	attempt := 1
	for ; ; attempt++ {
		if attempt > 1 {
			pause := a.retryPause(d.Job, attempt-1)
			_, _ = fmt.Fprintf(e.out, "\n--- attempt %d/%d (after %s) ---\n", attempt, attempts, out.why())
			if !waitctx.Sleep(e.ctx, pause) {
				out = a.killedOutcome(e, attemptOutcome{}, nil)
				break
			}
			mu.Lock()
			if !ended {
				res := a.newResult(d, cluster.StatusRunning)
				res.StartedAt = &started
				res.Attempt = attempt
				res.Message = fmt.Sprintf("attempt %d/%d after %s", attempt, attempts, out.why())
				a.reporter.enqueue(res)
			}
			mu.Unlock()
		}
		out = a.attempt(e, attempt)
		if out.status == cluster.StatusSuccess || out.status == cluster.StatusKilled ||
			out.permanent || attempt >= attempts {
			break
		}
		a.log.Info("agent: attempt failed; will retry", "fire_id", d.FireID, "attempt", attempt,
			"attempts", attempts, "status", out.status, "message", out.message)
	}
	finished := time.Now().UTC()
	end()

	res := a.newResult(d, out.status)
	res.StartedAt, res.FinishedAt = &started, &finished
	res.ExitCode = out.exitCode
	res.Message = out.message
	res.Attempt = min(attempt, attempts)
	if attempts > 1 && res.Message != "" && out.status != cluster.StatusSuccess {
		res.Message = fmt.Sprintf("attempt %d/%d: %s", res.Attempt, attempts, res.Message)
	}
	res.Output, res.OutputTruncated = e.out.Result()
	a.reporter.enqueue(res)
	reported = true
	finalStatus = out.status
	e.done = true // release moves it from running to finished, under the lock it takes anyway
	a.log.Debug("agent: fire done", "fire_id", d.FireID, "status", res.Status, "attempts", res.Attempt,
		"latency_ms", started.Sub(e.received).Milliseconds(), "duration_ms", finished.Sub(started).Milliseconds())
}

// attemptOutcome is how one attempt ended.
type attemptOutcome struct {
	status    string
	exitCode  *int
	message   string
	permanent bool // the handler said retrying cannot help
}

// why describes a failed attempt for the retry marker line.
func (o attemptOutcome) why() string {
	switch {
	case o.status == cluster.StatusTimeout:
		return "timeout"
	case o.exitCode != nil:
		return fmt.Sprintf("exit code %d", *o.exitCode)
	default:
		return "error: " + o.message
	}
}

// attempt runs the handler once with the job timeout and classifies the end.
func (a *Agent) attempt(e *execution, n int) attemptOutcome {
	d := e.d
	// A first attempt handed over before its start time (dispatch ahead,
	// releaseAt) starts at StartAt: its timeout counts from then.
	var startAt time.Time
	if n == 1 && d.StartAt.After(time.Now()) {
		startAt = d.StartAt
	}
	ctx, cancel := context.WithCancel(e.ctx)
	if d.Job.TimeoutSeconds > 0 {
		cancel()
		ctx, cancel = context.WithDeadline(e.ctx, maxTime(time.Now(), startAt).Add(time.Duration(d.Job.TimeoutSeconds)*time.Second))
	}
	defer cancel()
	req := pluginapi.Request{
		StartAt:     startAt,
		FireID:      d.FireID,
		JobID:       d.Job.JobID,
		JobName:     d.Job.Name,
		Params:      d.Job.Params,
		ScheduledAt: d.ScheduledAt,
		Attempt:     n,
		ShardIndex:  d.ShardIndex,
		ShardTotal:  d.ShardTotal,
	}
	result, runErr := a.call(ctx, d.Job.Handler, req, e.out)

	out := attemptOutcome{status: cluster.StatusFailed}
	if runErr == nil {
		code := result.ExitCode
		out.exitCode = &code
		out.message = result.Message
	}
	switch {
	case runErr == nil && result.Status == pluginapi.StatusSuccess:
		out.status = cluster.StatusSuccess
	case e.ctx.Err() != nil:
		return a.killedOutcome(e, out, runErr)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(runErr, context.DeadlineExceeded):
		// The second: the plugin hit the deadline on its clock first (the
		// SDK reports that as context.DeadlineExceeded).
		out.status = cluster.StatusTimeout
		out.message = joinMessage(fmt.Sprintf("timed out after %ds", d.Job.TimeoutSeconds), out.message, runErr)
	case runErr != nil:
		out.message = runErr.Error()
		out.permanent = pluginapi.IsPermanent(runErr)
	case result.Status == pluginapi.StatusFailed:
	default:
		out.message = joinMessage(fmt.Sprintf("handler returned unknown status %q", result.Status), out.message, nil)
	}
	return out
}

// killedOutcome is the end of a fire cancelled by a kill, a newer fire
// (COVER_EARLY) or shutdown.
func (a *Agent) killedOutcome(e *execution, out attemptOutcome, err error) attemptOutcome {
	out.status = cluster.StatusKilled
	out.permanent = true
	if kc, ok := killedCause(e.ctx); ok {
		out.message = joinMessage(kc.msg, out.message, err)
	} else {
		out.message = joinMessage("killed: node agent shutting down", out.message, err)
	}
	return out
}

// retryPause is the wait before retry number n (1 = the first retry): the
// job's fixed interval, or RetryBackoffBase doubling per retry up to
// RetryBackoffMax.
func (a *Agent) retryPause(job cluster.JobConfig, n int) time.Duration {
	if job.RetryIntervalSeconds > 0 {
		return time.Duration(job.RetryIntervalSeconds) * time.Second
	}
	d := a.cfg.RetryBackoffBase
	for i := 1; i < n && d < a.cfg.RetryBackoffMax; i++ {
		d *= 2
	}
	return min(d, a.cfg.RetryBackoffMax)
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
		Attempt:     1,
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

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
