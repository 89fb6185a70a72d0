package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	wirev1 "github.com/cronix/cronix/pluginapi/internal/wire"
	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// This file maps pluginapi types to and from the internal wire types.

func infoToWire(i Info) *wire.DescribeResponse {
	return &wire.DescribeResponse{
		Name:            i.Name,
		Version:         i.Version,
		Description:     i.Description,
		ParamsSchema:    i.ParamsSchema,
		Sdk:             "cronix-pluginapi-go/" + SDKVersion,
		HoldsStartAt:    true, // grpcServer.Run waits for start_at
		MultiplexesRuns: true, // grpcServer serves Runs
	}
}

func infoFromWire(w *wire.DescribeResponse) Info {
	return Info{
		Name:         w.GetName(),
		Version:      w.GetVersion(),
		Description:  w.GetDescription(),
		ParamsSchema: w.GetParamsSchema(),
		HoldsStartAt: w.GetHoldsStartAt(),
	}
}

func requestToWire(r Request) *wire.RunRequest {
	var at int64
	if !r.ScheduledAt.IsZero() {
		at = r.ScheduledAt.UnixNano()
	}
	var start int64
	if !r.StartAt.IsZero() {
		start = r.StartAt.UnixNano()
	}
	return &wire.RunRequest{
		StartAtUnixNano:     start,
		FireId:              r.FireID,
		JobId:               r.JobID,
		JobName:             r.JobName,
		Params:              r.Params,
		ScheduledAtUnixNano: at,
		Attempt:             int32(r.Attempt),
		ShardIndex:          int32(r.ShardIndex),
		ShardTotal:          int32(r.ShardTotal),
	}
}

func requestFromWire(w *wire.RunRequest) Request {
	var at time.Time
	if n := w.GetScheduledAtUnixNano(); n != 0 {
		at = time.Unix(0, n).UTC()
	}
	var start time.Time
	if n := w.GetStartAtUnixNano(); n != 0 {
		start = time.Unix(0, n).UTC()
	}
	return Request{
		StartAt:     start,
		FireID:      w.GetFireId(),
		JobID:       w.GetJobId(),
		JobName:     w.GetJobName(),
		Params:      w.GetParams(),
		ScheduledAt: at,
		Attempt:     int(w.GetAttempt()),
		ShardIndex:  int(w.GetShardIndex()),
		ShardTotal:  int(w.GetShardTotal()),
	}
}

func resultToWire(r Result, err error) *wire.RunResult {
	return &wire.RunResult{
		Status:   string(r.Status),
		ExitCode: int64(r.ExitCode),
		Message:  r.Message,
		Error:    errorToWire(err),
	}
}

func resultFromWire(w *wire.RunResult) (Result, error) {
	return Result{
		Status:   Status(w.GetStatus()),
		ExitCode: int(w.GetExitCode()),
		Message:  w.GetMessage(),
	}, errorFromWire(w.GetError())
}

func errorToWire(err error) *wire.Error {
	if err == nil {
		return nil
	}
	if ip, ok := AsInvalidParams(err); ok {
		return &wire.Error{Kind: wire.ErrorKind_ERROR_KIND_INVALID_PARAMS, Field: ip.Field(), Message: ip.Message()}
	}
	kind := wire.ErrorKind_ERROR_KIND_UNSPECIFIED
	switch kindOf(err) {
	case kindRetryable:
		kind = wire.ErrorKind_ERROR_KIND_RETRYABLE
	case kindPermanent:
		kind = wire.ErrorKind_ERROR_KIND_PERMANENT
	}
	return &wire.Error{Kind: kind, Message: err.Error()}
}

func errorFromWire(w *wire.Error) error {
	if w == nil {
		return nil
	}
	switch w.GetKind() {
	case wire.ErrorKind_ERROR_KIND_INVALID_PARAMS:
		return InvalidParams(w.GetField(), w.GetMessage())
	case wire.ErrorKind_ERROR_KIND_RETRYABLE:
		return Retryable(errors.New(w.GetMessage()))
	case wire.ErrorKind_ERROR_KIND_PERMANENT:
		return Permanent(errors.New(w.GetMessage()))
	default:
		return errors.New(w.GetMessage())
	}
}

// errorToStatus turns a handler error into a gRPC status error whose details
// carry the wire.Error, so the client can tell a handler's answer from a
// transport failure.
func errorToStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	switch {
	case isInvalidParams(err):
		code = codes.InvalidArgument
	case IsRetryable(err):
		code = codes.Aborted
	case IsPermanent(err):
		code = codes.FailedPrecondition
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	st := status.New(code, err.Error())
	if ds, derr := st.WithDetails(errorToWire(err)); derr == nil {
		st = ds
	}
	return st.Err()
}

func isInvalidParams(err error) bool {
	_, ok := AsInvalidParams(err)
	return ok
}

// handlerErrorFromStatus returns the handler error carried in a gRPC status's
// details, or nil when err is not a handler's answer.
func handlerErrorFromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		switch we := d.(type) {
		case *wire.Error:
			return errorFromWire(we)
		case *wirev1.Error: // from a protocol v1 plugin
			return errorFromWire(recast(we, &wire.Error{}))
		}
	}
	return nil
}

// PluginExitedError is returned by a Handler from Dispense when the call
// failed because the plugin process is gone or unreachable, not because the
// handler answered. errors.Is(err, ErrPluginExited) holds for it.
type PluginExitedError struct {
	// Cause is the transport error (or a description of why the plugin is
	// known to be gone).
	Cause error
}

func (e *PluginExitedError) Error() string { return "plugin exited: " + e.Cause.Error() }

// Unwrap returns the cause.
func (e *PluginExitedError) Unwrap() error { return e.Cause }

// Is matches ErrPluginExited.
func (e *PluginExitedError) Is(target error) bool { return target == ErrPluginExited }

// panicError turns a recovered panic into a permanent handler error.
func panicError(what string, r any) error {
	return Permanent(fmt.Errorf("handler panicked in %s: %v", what, r))
}
