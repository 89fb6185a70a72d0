package pluginapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// grpcClient is the host side: a Handler that calls a plugin over gRPC.
// Every call's ctx is merged with doneCtx, the plugin connection's
// lifetime, so a call never outlives the plugin.
type grpcClient struct {
	client  wire.HandlerClient
	doneCtx context.Context
	// runs carries every Run over one Runs stream once Info saw that the
	// plugin serves it (DescribeResponse.multiplexes_runs); nil for a v1
	// plugin.
	runs *runsClient
	mux  atomic.Bool
}

func newGRPCClient(client wire.HandlerClient, doneCtx context.Context, v2 bool) *grpcClient {
	c := &grpcClient{client: client, doneCtx: doneCtx}
	if v2 {
		c.runs = &runsClient{client: client, doneCtx: doneCtx}
	}
	return c
}

var _ Handler = (*grpcClient)(nil)

// callCtx derives the context of one call: cancelled when ctx is or when
// the plugin goes away. stop releases it.
func (c *grpcClient) callCtx(ctx context.Context) (callCtx context.Context, stop func()) {
	callCtx, cancel := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(c.doneCtx, func() { cancel(ErrPluginExited) })
	return callCtx, func() {
		stopAfter()
		cancel(nil)
	}
}

// gone reports a plugin that is known to be gone before a call starts.
func (c *grpcClient) gone() error {
	if c.doneCtx.Err() != nil {
		return &PluginExitedError{Cause: errors.New("plugin process is not running")}
	}
	return nil
}

// callError maps an error of a call to what the caller sees: the handler's
// own error (kind preserved), the caller's ctx error, or a
// PluginExitedError for a plugin that is gone or unreachable.
func (c *grpcClient) callError(op string, ctx context.Context, err error) error {
	if herr := handlerErrorFromStatus(err); herr != nil {
		return herr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %w", op, context.Cause(ctx))
	}
	if _, ok := ctx.Deadline(); ok && status.Code(err) == codes.DeadlineExceeded {
		// The deadline passed on the plugin's clock a moment before ours.
		return fmt.Errorf("plugin %s: %w", op, context.DeadlineExceeded)
	}
	if c.doneCtx.Err() != nil {
		return &PluginExitedError{Cause: err}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		// The connection broke (the process died and go-plugin has not
		// noticed yet) or was closed under us.
		return &PluginExitedError{Cause: err}
	}
	return fmt.Errorf("plugin %s: %w", op, err)
}

func (c *grpcClient) Info(ctx context.Context) (Info, error) {
	if err := c.gone(); err != nil {
		return Info{}, err
	}
	callCtx, stop := c.callCtx(ctx)
	defer stop()
	resp, err := c.client.Describe(callCtx, &wire.DescribeRequest{})
	if err != nil {
		return Info{}, c.callError("info", ctx, err)
	}
	c.mux.Store(c.runs != nil && resp.GetMultiplexesRuns())
	return infoFromWire(resp), nil
}

func (c *grpcClient) Validate(ctx context.Context, params json.RawMessage) error {
	if err := c.gone(); err != nil {
		return err
	}
	callCtx, stop := c.callCtx(ctx)
	defer stop()
	if _, err := c.client.Validate(callCtx, &wire.ValidateRequest{Params: params}); err != nil {
		return c.callError("validate", ctx, err)
	}
	return nil
}

// Run streams the plugin's output into out as it arrives and returns the
// plugin's result. When the call fails (ctx done, plugin gone, protocol
// violation) Run returns a failed Result along with the error. If out
// returns an error, the remaining output is discarded, the run goes on and
// Run returns its result together with that write error.
//
// Once Info found that the plugin serves Runs, every run goes over that
// one stream and out is written by the stream's receiver: a Write that
// blocks holds up the output of the plugin's other runs, so out should
// not wait on anything but memory. out is never written after Run
// returned.
func (c *grpcClient) Run(ctx context.Context, req Request, out io.Writer) (Result, error) {
	if err := c.gone(); err != nil {
		return failedResult(err), err
	}
	if c.mux.Load() {
		result, werr, err := c.runs.run(ctx, req, out)
		if err == nil {
			return c.runResult(ctx, result, werr)
		}
		if !unimplemented(err) || ctx.Err() != nil {
			err = c.callError("run", ctx, err)
			return failedResult(err), err
		}
		// The plugin said it serves Runs but does not: the run never
		// started there, so it goes the way of older plugins, as all
		// later ones do.
		c.mux.Store(false)
	}
	return c.runStream(ctx, req, out)
}

// runStream runs req on a Run stream of its own.
func (c *grpcClient) runStream(ctx context.Context, req Request, out io.Writer) (Result, error) {
	callCtx, stop := c.callCtx(ctx)
	defer stop()
	stream, err := c.client.Run(callCtx, requestToWire(req))
	if err != nil {
		err = c.callError("run", ctx, err)
		return failedResult(err), err
	}
	var (
		result *wire.RunResult
		werr   error
	)
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			err = c.callError("run", ctx, err)
			return failedResult(err), err
		}
		switch e := ev.GetEvent().(type) {
		case *wire.RunEvent_Output:
			if result != nil {
				return c.protocolError("output after the result")
			}
			if werr == nil {
				if _, err := out.Write(e.Output); err != nil {
					werr = fmt.Errorf("writing run output: %w", err)
				}
			}
		case *wire.RunEvent_Result:
			if result != nil {
				return c.protocolError("more than one result")
			}
			result = e.Result
		default:
			return c.protocolError("unknown stream event")
		}
	}
	if result == nil {
		return c.protocolError("stream ended without a result")
	}
	return c.runResult(ctx, result, werr)
}

// runResult is what Run returns for the plugin's result of a run and the
// first error of writing its output.
func (c *grpcClient) runResult(ctx context.Context, result *wire.RunResult, werr error) (Result, error) {
	res, herr := resultFromWire(result)
	if herr == nil && res.Status == StatusFailed && deadlineReached(ctx) {
		// The handler stopped at the job's deadline, which on the plugin's
		// clock passes a moment before ours: report it as the deadline, the
		// same way a DeadlineExceeded status is reported.
		herr = fmt.Errorf("plugin run: %w", context.DeadlineExceeded)
	}
	if werr != nil {
		return res, errors.Join(herr, werr)
	}
	return res, herr
}

// deadlineReached reports whether ctx's deadline is (within deadlineSlack)
// reached.
func deadlineReached(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= deadlineSlack
}

func (c *grpcClient) protocolError(what string) (Result, error) {
	err := Permanent(fmt.Errorf("plugin run: protocol violation: %s", what))
	return failedResult(err), err
}

// failedResult is the Result that goes with a failed call: "timeout" for a
// ctx deadline, "killed" for a cancellation, else the error.
func failedResult(err error) Result {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timeout"
	case errors.Is(err, context.Canceled):
		msg = "killed"
	}
	return Result{Status: StatusFailed, ExitCode: -1, Message: msg}
}
