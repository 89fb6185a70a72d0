package pluginapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// connectFunc connects a handler the way plugintest.Connect does.
type connectFunc func(testing.TB, pluginapi.Handler) pluginapi.Handler

// forEachWire runs test twice in parallel: with runs on the connection's
// one Runs stream, as a node runs them on a current plugin, and with a
// Run stream per run, as on plugins that do not serve Runs.
func forEachWire(t *testing.T, test func(t *testing.T, connect connectFunc)) {
	t.Helper()
	for _, wire := range []struct {
		name    string
		connect connectFunc
	}{
		{"runs stream", func(t testing.TB, h pluginapi.Handler) pluginapi.Handler {
			c := plugintest.Connect(t, h)
			require.True(t, pluginapi.UsesRunsStream(c), "a current plugin serves Runs")
			return c
		}},
		{"stream per run", func(t testing.TB, h pluginapi.Handler) pluginapi.Handler {
			c := plugintest.Connect(t, h)
			pluginapi.UseStreamPerRun(c)
			return c
		}},
	} {
		t.Run(wire.name, func(t *testing.T) {
			t.Parallel()
			test(t, wire.connect)
		})
	}
}

// funcHandler is a Handler built from functions, for tests.
type funcHandler struct {
	info     pluginapi.Info
	validate func(ctx context.Context, params json.RawMessage) error
	run      func(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error)
}

func (h *funcHandler) Info(context.Context) (pluginapi.Info, error) { return h.info, nil }

func (h *funcHandler) Validate(ctx context.Context, params json.RawMessage) error {
	if h.validate == nil {
		return nil
	}
	return h.validate(ctx, params)
}

func (h *funcHandler) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	return h.run(ctx, req, out)
}

var testInfo = pluginapi.Info{
	Name:         "test",
	Version:      "0.0.1",
	Description:  "a test handler",
	ParamsSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`),
}

// syncBuffer is a goroutine-safe bytes.Buffer that counts writes.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []int
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, len(p))
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestInfoAndRequestCrossTheWire(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		var got pluginapi.Request
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, req pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
			got = req
			return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 7, Message: "seven"}, nil
		}})
		info, err := h.Info(t.Context())
		require.NoError(t, err)
		require.Equal(t, testInfo.Name, info.Name)
		require.Equal(t, testInfo.Version, info.Version)
		require.Equal(t, testInfo.Description, info.Description)
		require.JSONEq(t, string(testInfo.ParamsSchema), string(info.ParamsSchema))

		req := pluginapi.Request{
			FireID: "42-1700000000", JobID: 42, JobName: "nightly", Params: json.RawMessage(`{"x":"y"}`),
			ScheduledAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Attempt: 3, ShardIndex: 2, ShardTotal: 5,
		}
		res, err := h.Run(t.Context(), req, io.Discard)
		require.NoError(t, err)
		require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 7, Message: "seven"}, res)
		require.Equal(t, req, got)
	})
}

func TestErrorKindsCrossTheWire(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		errFor := map[string]error{
			"retryable": pluginapi.Retryable(errors.New("db down")),
			"permanent": pluginapi.Permanent(errors.New("no such host")),
			"invalid":   fmt.Errorf("checking: %w", pluginapi.InvalidParams("url", "must be absolute")),
			"plain":     errors.New("just failed"),
		}
		kindOf := func(params json.RawMessage) error {
			var p struct{ Kind string }
			_ = json.Unmarshal(params, &p)
			return errFor[p.Kind]
		}
		h := connect(t, &funcHandler{
			info:     testInfo,
			validate: func(_ context.Context, params json.RawMessage) error { return kindOf(params) },
			run: func(_ context.Context, req pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
				return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 1}, kindOf(req.Params)
			},
		})
		check := func(t *testing.T, kind string, err error) {
			t.Helper()
			require.Error(t, err)
			switch kind {
			case "retryable":
				require.True(t, pluginapi.IsRetryable(err))
				require.False(t, pluginapi.IsPermanent(err))
				require.Equal(t, "db down", err.Error())
			case "permanent":
				require.True(t, pluginapi.IsPermanent(err))
				require.False(t, pluginapi.IsRetryable(err))
				require.Equal(t, "no such host", err.Error())
			case "invalid":
				ip, ok := pluginapi.AsInvalidParams(err)
				require.True(t, ok, "want InvalidParams, got %v", err)
				require.Equal(t, "url", ip.Field())
				require.Equal(t, "must be absolute", ip.Message())
				require.True(t, pluginapi.IsPermanent(err))
				require.Equal(t, "invalid params: url: must be absolute", err.Error())
			case "plain":
				require.False(t, pluginapi.IsRetryable(err))
				require.False(t, pluginapi.IsPermanent(err))
				_, ok := pluginapi.AsInvalidParams(err)
				require.False(t, ok)
				require.Equal(t, "just failed", err.Error())
			}
			require.NotErrorIs(t, err, pluginapi.ErrPluginExited)
		}
		for kind := range errFor {
			params := json.RawMessage(`{"kind":"` + kind + `"}`)
			t.Run("Validate/"+kind, func(t *testing.T) {
				check(t, kind, h.Validate(t.Context(), params))
			})
			t.Run("Run/"+kind, func(t *testing.T) {
				res, err := h.Run(t.Context(), pluginapi.Request{Params: params}, io.Discard)
				check(t, kind, err)
				require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 1}, res)
			})
		}
		require.NoError(t, h.Validate(t.Context(), json.RawMessage(`{"kind":"none"}`)))
	})
}

func TestRunStreamsOutputWhileRunning(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		seen := make(chan struct{})
		out := &notifyWriter{want: "first\n", seen: seen}
		h := connect(t, &funcHandler{info: testInfo, run: func(ctx context.Context, _ pluginapi.Request, w io.Writer) (pluginapi.Result, error) {
			_, _ = io.WriteString(w, "first\n")
			select { // the host must get "first" while Run is still going
			case <-seen:
			case <-ctx.Done():
				return pluginapi.Result{Status: pluginapi.StatusFailed, Message: "host never saw the first line"}, nil
			}
			_, _ = io.WriteString(w, "second\n")
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}})
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		res, err := h.Run(ctx, pluginapi.Request{}, out)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
		require.Equal(t, "first\nsecond\n", out.String())
	})
}

// notifyWriter closes seen once its content contains want.
type notifyWriter struct {
	syncBuffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func TestRunBatchesOutput(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		const lines = 20000
		var want strings.Builder
		for i := range lines {
			fmt.Fprintf(&want, "line %05d\n", i)
		}
		big := bytes.Repeat([]byte("x"), 1<<20)
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, req pluginapi.Request, w io.Writer) (pluginapi.Result, error) {
			if req.JobName == "big" {
				_, err := w.Write(big)
				return pluginapi.Result{Status: pluginapi.StatusSuccess}, err
			}
			for i := range lines {
				if _, err := fmt.Fprintf(w, "line %05d\n", i); err != nil {
					return pluginapi.Result{}, err
				}
			}
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}})

		var out syncBuffer
		_, err := h.Run(t.Context(), pluginapi.Request{}, &out)
		require.NoError(t, err)
		require.Equal(t, want.String(), out.String())
		require.Less(t, len(out.writes), lines/20, "small writes must be batched into chunks")
		for _, n := range out.writes {
			require.LessOrEqual(t, n, 32<<10)
		}

		var bigOut syncBuffer
		_, err = h.Run(t.Context(), pluginapi.Request{JobName: "big"}, &bigOut)
		require.NoError(t, err)
		require.Equal(t, string(big), bigOut.String())
		require.Len(t, bigOut.writes, (1<<20)/(32<<10))
	})
}

func TestRunDeadlineAndCancelReachTheHandler(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		type seen struct {
			deadline time.Time
			hasDL    bool
			err      error
		}
		seenCh := make(chan seen, 2)
		started := make(chan struct{}, 2)
		h := connect(t, &funcHandler{info: testInfo, run: func(ctx context.Context, _ pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
			started <- struct{}{}
			dl, ok := ctx.Deadline()
			<-ctx.Done()
			seenCh <- seen{deadline: dl, hasDL: ok, err: ctx.Err()}
			return pluginapi.Result{Status: pluginapi.StatusFailed, Message: "stopped"}, nil
		}})

		t.Run("deadline", func(t *testing.T) {
			deadline := time.Now().Add(200 * time.Millisecond)
			ctx, cancel := context.WithDeadline(t.Context(), deadline)
			defer cancel()
			res, err := h.Run(ctx, pluginapi.Request{}, io.Discard)
			// Run reports the deadline either way (pluginapi doc): with its own
			// "timeout" result when our ctx ended first, or with the handler's
			// failed answer when the plugin's copy of the deadline fired a
			// moment earlier and that answer won the race.
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Contains(t, []pluginapi.Result{
				{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "timeout"},
				{Status: pluginapi.StatusFailed, Message: "stopped"},
			}, res)
			<-started
			s := <-seenCh
			require.True(t, s.hasDL, "the handler's ctx must carry the deadline")
			require.WithinDuration(t, deadline, s.deadline, 100*time.Millisecond)
			require.ErrorIs(t, s.err, context.DeadlineExceeded)
		})
		t.Run("cancel", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			errCh := make(chan error, 1)
			go func() {
				res, err := h.Run(ctx, pluginapi.Request{}, io.Discard)
				if err == nil || res.Message != "killed" {
					err = fmt.Errorf("got %+v, %w; want killed, context.Canceled", res, err)
				} else if errors.Is(err, context.Canceled) {
					err = nil
				}
				errCh <- err
			}()
			<-started
			cancel()
			s := <-seenCh
			require.False(t, s.hasDL)
			require.ErrorIs(t, s.err, context.Canceled)
			require.NoError(t, <-errCh)
		})
	})
}

func TestRunPanicsAndBadStatusesBecomeFailedResults(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, req pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
			switch req.JobName {
			case "panic":
				panic("boom")
			case "bad-status":
				return pluginapi.Result{Status: "great"}, nil
			default:
				return pluginapi.Result{}, errors.New("no status")
			}
		}})
		res, err := h.Run(t.Context(), pluginapi.Request{JobName: "panic"}, io.Discard)
		require.ErrorContains(t, err, "boom")
		require.True(t, pluginapi.IsPermanent(err))
		require.Equal(t, pluginapi.StatusFailed, res.Status)

		res, err = h.Run(t.Context(), pluginapi.Request{JobName: "bad-status"}, io.Discard)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusFailed, res.Status)
		require.Contains(t, res.Message, `invalid status "great"`)

		res, err = h.Run(t.Context(), pluginapi.Request{JobName: "error"}, io.Discard)
		require.EqualError(t, err, "no status")
		require.Equal(t, pluginapi.StatusFailed, res.Status)

		// The plugin still serves after a panic.
		_, err = h.Info(t.Context())
		require.NoError(t, err)
	})
}

func TestOutputAfterRunReturnsFails(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		leaked := make(chan io.Writer, 1)
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, _ pluginapi.Request, w io.Writer) (pluginapi.Result, error) {
			leaked <- w
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}})
		_, err := h.Run(t.Context(), pluginapi.Request{}, io.Discard)
		require.NoError(t, err)
		_, err = (<-leaked).Write([]byte("late"))
		require.Error(t, err)
	})
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestHostWriterErrorDoesNotStopTheRun(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, _ pluginapi.Request, w io.Writer) (pluginapi.Result, error) {
			for range 3 {
				_, _ = w.Write(bytes.Repeat([]byte("y"), 40<<10))
			}
			return pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "done"}, nil
		}})
		w := &failingWriter{}
		res, err := h.Run(t.Context(), pluginapi.Request{}, w)
		require.ErrorContains(t, err, "disk full")
		require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "done"}, res)
		require.Equal(t, 1, w.n, "after a write error the rest of the output is discarded")
	})
}

func TestServeRefusesToRunWithoutAHost(t *testing.T) {
	t.Setenv(pluginapi.Handshake.MagicCookieKey, "")
	require.ErrorIs(t, pluginapi.Serve(&funcHandler{info: testInfo}), pluginapi.ErrNotStartedByHost)
}

// TestMainExitsWithTheErrorWithoutAHost runs Main in a child process (this
// test binary again) that was not started by a node: it must print why on
// stderr and exit 1.
func TestMainExitsWithTheErrorWithoutAHost(t *testing.T) {
	if os.Getenv("PLUGINAPI_TEST_MAIN") == "1" {
		pluginapi.Main(&funcHandler{info: testInfo})
		return // not reached: Main exits
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMainExitsWithTheErrorWithoutAHost$")
	cmd.Env = append(pluginapi.ProcessEnv(), "PLUGINAPI_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "Main must exit non-zero; stderr: %s", stderr.String())
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, stderr.String(), pluginapi.ErrNotStartedByHost.Error())
}

func TestProcessEnvDropsHandshakeVariables(t *testing.T) {
	t.Setenv(pluginapi.Handshake.MagicCookieKey, pluginapi.Handshake.MagicCookieValue)
	t.Setenv("PLUGIN_PROTOCOL_VERSIONS", "1")
	t.Setenv("PLUGIN_MIN_PORT", "10000")
	t.Setenv("CRONIX_TEST_KEEP", "yes")
	env := pluginapi.ProcessEnv()
	require.Contains(t, env, "CRONIX_TEST_KEEP=yes")
	for _, kv := range env {
		require.NotContains(t, []string{pluginapi.Handshake.MagicCookieKey, "PLUGIN_PROTOCOL_VERSIONS", "PLUGIN_MIN_PORT"},
			strings.SplitN(kv, "=", 2)[0])
	}
}

func TestContractOfAWellBehavedHandler(t *testing.T) {
	t.Parallel()
	h := &funcHandler{
		info: testInfo,
		validate: func(_ context.Context, params json.RawMessage) error {
			var p map[string]any
			if err := json.Unmarshal(params, &p); err != nil {
				return pluginapi.InvalidParams("", "not an object")
			}
			if _, ok := p["x"].(string); !ok {
				return pluginapi.InvalidParams("x", "required")
			}
			return nil
		},
		run: func(ctx context.Context, req pluginapi.Request, w io.Writer) (pluginapi.Result, error) {
			var p map[string]string
			_ = json.Unmarshal(req.Params, &p)
			if p["x"] == "long" {
				<-ctx.Done()
				return pluginapi.Result{Status: pluginapi.StatusFailed, Message: "stopped"}, nil
			}
			_, _ = io.WriteString(w, "hello\n")
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		},
	}
	plugintest.CheckContract(t, h, json.RawMessage(`{"x":"short"}`), plugintest.LongRunning(json.RawMessage(`{"x":"long"}`)))
}

// A run handed over before its StartAt reaches the handler only at
// StartAt; cancelled before then, the handler is never called. Plugins
// built with this SDK say so in Describe (HoldsStartAt).
func TestRunWaitsForStartAt(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		var (
			mu    sync.Mutex
			calls = map[string]time.Time{}
		)
		h := connect(t, &funcHandler{info: testInfo, run: func(_ context.Context, req pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
			mu.Lock()
			calls[req.FireID] = time.Now()
			mu.Unlock()
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}})
		info, err := h.Info(t.Context())
		require.NoError(t, err)
		require.True(t, info.HoldsStartAt)

		at := time.Now().Add(300 * time.Millisecond)
		res, err := h.Run(t.Context(), pluginapi.Request{FireID: "1-1", JobID: 1, Attempt: 1, StartAt: at}, io.Discard)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status)
		mu.Lock()
		called := calls["1-1"]
		mu.Unlock()
		require.False(t, called.Before(at), "handler called %s before StartAt", at.Sub(called))

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		res, _ = h.Run(ctx, pluginapi.Request{FireID: "1-2", JobID: 1, Attempt: 1, StartAt: time.Now().Add(time.Hour)}, io.Discard)
		require.Equal(t, pluginapi.StatusFailed, res.Status)
		mu.Lock()
		_, ran := calls["1-2"]
		mu.Unlock()
		require.False(t, ran, "a run cancelled before its StartAt never reaches the handler")
	})
}

// earlyHandler is a funcHandler that is an EarlyRunner when early is set.
type earlyHandler struct {
	funcHandler
	early bool
}

func (h *earlyHandler) RunsBeforeStartAt() bool { return h.early }

// An EarlyRunner is called as soon as the run arrives, before its StartAt,
// with StartAt still ahead and the run's ctx; it waits for StartAt itself
// and, cancelled before it, returns having done nothing. One that says
// false is held by the SDK like any other handler.
func TestEarlyRunnerIsCalledBeforeStartAt(t *testing.T) {
	t.Parallel()
	forEachWire(t, func(t *testing.T, connect connectFunc) {
		type call struct{ at, startAt time.Time }
		var (
			mu    sync.Mutex
			calls = map[string]call{}
			acted = map[string]time.Time{}
		)
		run := func(ctx context.Context, req pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
			mu.Lock()
			calls[req.FireID] = call{at: time.Now(), startAt: req.StartAt}
			mu.Unlock()
			if d := time.Until(req.StartAt); d > 0 {
				tm := time.NewTimer(d)
				defer tm.Stop()
				select {
				case <-tm.C:
				case <-ctx.Done():
					return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "killed"}, nil
				}
			}
			mu.Lock()
			acted[req.FireID] = time.Now()
			mu.Unlock()
			return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
		}
		for _, early := range []bool{true, false} {
			t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
				h := connect(t, &earlyHandler{funcHandler: funcHandler{info: testInfo, run: run}, early: early})
				info, err := h.Info(t.Context())
				require.NoError(t, err)
				require.True(t, info.HoldsStartAt)

				id := fmt.Sprintf("%v-1", early)
				at := time.Now().Add(500 * time.Millisecond)
				res, err := h.Run(t.Context(), pluginapi.Request{FireID: id, JobID: 1, Attempt: 1, StartAt: at}, io.Discard)
				require.NoError(t, err)
				require.Equal(t, pluginapi.StatusSuccess, res.Status)
				mu.Lock()
				c, a := calls[id], acted[id]
				mu.Unlock()
				require.True(t, c.startAt.Equal(at), "the handler sees the StartAt")
				require.False(t, a.Before(at), "acted %s before StartAt", at.Sub(a))
				if early {
					require.True(t, c.at.Before(at), "an EarlyRunner is called before StartAt")
				} else {
					require.False(t, c.at.Before(at), "called %s before StartAt", at.Sub(c.at))
				}

				id = fmt.Sprintf("%v-2", early)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan pluginapi.Result, 1)
				go func() {
					res, _ := h.Run(ctx, pluginapi.Request{FireID: id, JobID: 1, Attempt: 1, StartAt: time.Now().Add(time.Hour)}, io.Discard)
					done <- res
				}()
				if early { // cancel only once the handler has it
					require.Eventually(t, func() bool {
						mu.Lock()
						defer mu.Unlock()
						_, ok := calls[id]
						return ok
					}, 10*time.Second, 5*time.Millisecond)
				}
				cancel()
				require.Equal(t, pluginapi.StatusFailed, (<-done).Status)
				mu.Lock()
				_, called := calls[id]
				_, didAct := acted[id]
				mu.Unlock()
				require.Equal(t, early, called)
				require.False(t, didAct, "a run cancelled before its StartAt does nothing")
			})
		}
	})
}
