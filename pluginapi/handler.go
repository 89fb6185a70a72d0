package pluginapi

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Info describes a handler: its name (what jobs put in "handler"), version
// and a JSON Schema (draft 2020-12 subset) of its params object.
type Info struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Description  string          `json:"description,omitempty"`
	ParamsSchema json.RawMessage `json:"params_schema"`
	// HoldsStartAt is set by the host from Describe: the plugin waits for
	// Request.StartAt before calling its handler (every plugin built with
	// this SDK, 1.1 and later, does; a handler does not set it).
	HoldsStartAt bool `json:"-"`
}

// Request is one run of a job handed to a handler.
type Request struct {
	FireID      string
	JobID       int64
	JobName     string
	Params      json.RawMessage // the job's params object
	ScheduledAt time.Time
	Attempt     int // 1 for the first attempt
	// ShardIndex and ShardTotal describe this run's shard of a
	// SHARDING_BROADCAST fire: the index counts from 0 and ShardTotal is the
	// number of shards. Both are 0 when the job is not sharded.
	ShardIndex int
	ShardTotal int
	// StartAt, when set, is the earliest time the handler may be called:
	// the host hands a fire dispatched ahead of its time to the plugin a
	// moment early and the SDK waits until StartAt before calling Run (a
	// cancel meanwhile ends the run without calling it). Zero: at once.
	// Handlers see it already passed, except an EarlyRunner.
	StartAt time.Time
}

// Status is the outcome a handler reports.
type Status string

// Handler outcomes.
const (
	StatusSuccess Status = "success"
	StatusFailed  Status = "failed"
)

// Result is what a run ended with.
type Result struct {
	Status   Status
	ExitCode int
	Message  string
}

// Handler runs jobs of one kind. Run's ctx carries the job timeout as its
// deadline and is cancelled when the run is killed: a handler must stop
// promptly (and stop every process it started) when ctx is done. Output
// written to out is streamed to the node while the run goes on.
type Handler interface {
	Info(ctx context.Context) (Info, error)
	// Validate checks a job's params when the job is saved. Return an error
	// built with InvalidParams to name the offending field.
	Validate(ctx context.Context, params json.RawMessage) error
	Run(ctx context.Context, req Request, out io.Writer) (Result, error)
}

// EarlyRunner is an optional interface of a Handler that prepares a run
// ahead of its start time (SDK 1.2). When RunsBeforeStartAt reports true,
// the SDK calls Run as soon as the request arrives, even before
// Request.StartAt, instead of waiting for StartAt itself. Such a handler
// takes over the SDK's promise: it must do nothing visible (nothing that a
// job's target or the world can observe, such as sending a request's bytes
// or starting a process) before StartAt, and when ctx ends before StartAt
// it must return without having done anything. It may prepare meanwhile
// (parse params, build a request, open a connection). The plugin's
// Describe still says that it holds start times.
type EarlyRunner interface {
	RunsBeforeStartAt() bool
}
