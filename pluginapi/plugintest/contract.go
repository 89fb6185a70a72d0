package plugintest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cronix/cronix/pluginapi"
)

// Option adjusts CheckContract.
type Option func(*contractConfig)

type contractConfig struct {
	longParams json.RawMessage
	within     time.Duration
}

// LongRunning gives params for a run that lasts until it is cancelled (at
// least several seconds, e.g. a script that sleeps). With it, CheckContract
// also asserts that cancellation and a deadline stop a run that is really
// under way.
func LongRunning(params json.RawMessage) Option {
	return func(c *contractConfig) { c.longParams = params }
}

// StopWithin sets how soon a run must return after its ctx is done
// (default 5s).
func StopWithin(d time.Duration) Option {
	return func(c *contractConfig) { c.within = d }
}

// CheckContract asserts that h honours the pluginapi contract, calling it
// through Connect (real gRPC) the way a node does. validParams must be
// params that Validate accepts and whose Run is harmless and short. It
// checks that:
//
//   - Info has a name (no spaces), a version and a params schema that is a
//     JSON object describing an object, whose "required" fields are among
//     its "properties", and that Info survives the wire unchanged;
//   - Validate accepts validParams, rejects params that are not a JSON
//     object, and rejects {} with an InvalidParams error naming a required
//     field when the schema requires fields;
//   - Run returns exactly one result with a valid status, the same one on
//     both sides of the wire, also for several concurrent runs;
//   - Run returns promptly when its ctx is cancelled or already done, and
//     (with LongRunning) when its deadline passes.
func CheckContract(t *testing.T, h pluginapi.Handler, validParams json.RawMessage, opts ...Option) {
	t.Helper()
	cfg := contractConfig{within: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	rec := &recorder{Handler: h, calls: map[string]*call{}}
	remote := Connect(t, rec)
	ctx := t.Context()

	var schema jsonSchema
	t.Run("Info", func(t *testing.T) {
		local, err := h.Info(ctx)
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		if local.Name == "" || strings.ContainsAny(local.Name, " \t\r\n") {
			t.Errorf("Info.Name %q: want a non-empty name without spaces", local.Name)
		}
		if local.Version == "" {
			t.Errorf("Info.Version is empty")
		}
		if err := json.Unmarshal(local.ParamsSchema, &schema); err != nil {
			t.Fatalf("Info.ParamsSchema is not a JSON object: %v", err)
		}
		if schema.Type != "" && schema.Type != "object" {
			t.Errorf("Info.ParamsSchema type %q: params are an object", schema.Type)
		}
		for _, f := range schema.Required {
			if _, ok := schema.Properties[f]; !ok && schema.Properties != nil {
				t.Errorf("Info.ParamsSchema requires %q, which is not among its properties", f)
			}
		}
		got, err := remote.Info(ctx)
		if err != nil {
			t.Fatalf("Info over gRPC: %v", err)
		}
		if got.Name != local.Name || got.Version != local.Version || got.Description != local.Description ||
			string(got.ParamsSchema) != string(local.ParamsSchema) {
			t.Errorf("Info over gRPC = %+v, want %+v", got, local)
		}
	})

	t.Run("ValidateAcceptsValidParams", func(t *testing.T) {
		if err := remote.Validate(ctx, validParams); err != nil {
			t.Errorf("Validate(%s): %v", validParams, err)
		}
	})

	t.Run("ValidateRejectsNonObjects", func(t *testing.T) {
		for _, p := range []string{`"not an object"`, `[1,2]`, `42`} {
			if err := remote.Validate(ctx, json.RawMessage(p)); err == nil {
				t.Errorf("Validate(%s) = nil, want an error", p)
			}
		}
	})

	t.Run("ValidateRejectsMissingRequired", func(t *testing.T) {
		if len(schema.Required) == 0 {
			t.Skip("the schema requires no field")
		}
		err := remote.Validate(ctx, json.RawMessage(`{}`))
		if err == nil {
			t.Fatalf("Validate({}) = nil, but the schema requires %v", schema.Required)
		}
		ip, ok := pluginapi.AsInvalidParams(err)
		if !ok {
			t.Fatalf("Validate({}) = %v, want an InvalidParams error", err)
		}
		if !slices.Contains(schema.Required, ip.Field()) {
			t.Errorf("Validate({}) names field %q, want one of the required %v", ip.Field(), schema.Required)
		}
	})

	t.Run("RunReturnsOneResult", func(t *testing.T) {
		req := request("contract-run", validParams)
		res, err := remote.Run(ctx, req, io.Discard)
		c := rec.get(req.FireID)
		select {
		case <-c.returned:
		case <-time.After(cfg.within):
			t.Fatalf("the handler's Run did not return although the host got a result")
		}
		if err == nil && c.err == nil && c.res.Status != pluginapi.StatusSuccess && c.res.Status != pluginapi.StatusFailed {
			t.Errorf("Run returned status %q, want %q or %q", c.res.Status, pluginapi.StatusSuccess, pluginapi.StatusFailed)
		}
		if c.err == nil && c.res != res {
			t.Errorf("Run result over gRPC = %+v, want the handler's %+v", res, c.res)
		}
		if (err == nil) != (c.err == nil) {
			t.Errorf("Run error over gRPC = %v, want the handler's %v", err, c.err)
		}
	})

	t.Run("ConcurrentRuns", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				req := request(fmt.Sprintf("contract-concurrent-%d", i), validParams)
				res, err := remote.Run(ctx, req, io.Discard)
				if err != nil {
					errs[i] = err
					return
				}
				c := rec.get(req.FireID)
				<-c.returned
				if res != c.res {
					errs[i] = fmt.Errorf("result %+v differs from the handler's %+v", res, c.res)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("concurrent Runs: %v", err)
		}
	})

	t.Run("RunReturnsWhenCtxAlreadyDone", func(t *testing.T) {
		params := validParams
		if cfg.longParams != nil {
			params = cfg.longParams
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			_, _ = h.Run(done, request("contract-predone", params), io.Discard)
		}()
		select {
		case <-returned:
		case <-time.After(cfg.within):
			t.Errorf("Run with a cancelled ctx did not return within %v", cfg.within)
		}
	})

	t.Run("RunStopsWhenCancelled", func(t *testing.T) {
		params := validParams
		if cfg.longParams != nil {
			params = cfg.longParams
		}
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		req := request("contract-cancel", params)
		c := rec.get(req.FireID)
		hostDone := make(chan error, 1)
		go func() {
			_, err := remote.Run(runCtx, req, io.Discard)
			hostDone <- err
		}()
		select {
		case <-c.started:
		case <-time.After(cfg.within):
			t.Fatalf("Run did not reach the handler within %v", cfg.within)
		}
		cancel()
		select {
		case <-c.returned:
		case <-time.After(cfg.within):
			t.Fatalf("handler's Run did not return within %v after its ctx was cancelled", cfg.within)
		}
		if err := <-hostDone; cfg.longParams != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Run: host error = %v, want context.Canceled", err)
		}
	})

	t.Run("RunStopsAtDeadline", func(t *testing.T) {
		if cfg.longParams == nil {
			t.Skip("no LongRunning params")
		}
		runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		req := request("contract-deadline", cfg.longParams)
		c := rec.get(req.FireID)
		res, err := remote.Run(runCtx, req, io.Discard)
		switch {
		case err == nil:
			// The plugin's clock hit the deadline first and its answer
			// arrived before ours did: it must be a failure.
			if res.Status != pluginapi.StatusFailed {
				t.Errorf("Run past its deadline: result = %+v, want failed", res)
			}
		case !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("Run past its deadline: error = %v, want context.DeadlineExceeded", err)
		case res.Status != pluginapi.StatusFailed:
			// The message is "timeout" when the host's deadline ended the
			// call, or the handler's own when it stopped at the deadline
			// on its clock a moment earlier (the host keeps its result).
			t.Errorf("Run past its deadline: result = %+v, want failed", res)
		}
		select {
		case <-c.returned:
		case <-time.After(cfg.within):
			t.Fatalf("handler's Run did not return within %v after its deadline", cfg.within)
		}
	})
}

// jsonSchema is the part of a params schema CheckContract looks at.
type jsonSchema struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

func request(fireID string, params json.RawMessage) pluginapi.Request {
	return pluginapi.Request{
		FireID:      fireID,
		JobID:       1,
		JobName:     "plugintest",
		Params:      params,
		ScheduledAt: time.Now().UTC().Truncate(time.Second),
		Attempt:     1,
	}
}

// recorder wraps the handler under test on the plugin side of the wire and
// records each Run by fire id, so the checker can see what the handler
// itself returned and when.
type recorder struct {
	pluginapi.Handler
	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	started  chan struct{}
	returned chan struct{}
	res      pluginapi.Result // set before returned closes
	err      error
}

func (r *recorder) get(fireID string) *call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.calls[fireID]
	if !ok {
		c = &call{started: make(chan struct{}), returned: make(chan struct{})}
		r.calls[fireID] = c
	}
	return c
}

func (r *recorder) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	c := r.get(req.FireID)
	close(c.started)
	defer close(c.returned)
	c.res, c.err = r.Handler.Run(ctx, req, out)
	return c.res, c.err
}
