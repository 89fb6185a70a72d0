package pluginapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// blockingHandler's Run writes "started" and blocks until ctx is done.
type blockingHandler struct{ started chan struct{} }

func (blockingHandler) Info(context.Context) (Info, error) {
	return Info{Name: "block", Version: "1", ParamsSchema: json.RawMessage(`{}`)}, nil
}
func (blockingHandler) Validate(context.Context, json.RawMessage) error { return nil }
func (h blockingHandler) Run(ctx context.Context, _ Request, out io.Writer) (Result, error) {
	_, _ = io.WriteString(out, "started")
	close(h.started)
	<-ctx.Done()
	return Result{Status: StatusFailed}, nil
}

// serve wires h over a loopback gRPC server the way go-plugin does and
// returns the client, the server and the cancel of the client's doneCtx.
func serve(t *testing.T, h Handler) (Handler, *grpc.Server, context.CancelFunc) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	p := GRPCPlugin(h)
	require.NoError(t, p.GRPCServer(nil, srv))
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	doneCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	raw, err := p.GRPCClient(doneCtx, nil, conn)
	require.NoError(t, err)
	return raw.(Handler), srv, cancel
}

// serveOnRunsStream serves h as serve does and asks for its Info, as the
// node does first, so that its runs go on the Runs stream.
func serveOnRunsStream(t *testing.T, h Handler) Handler {
	t.Helper()
	c, _, _ := serve(t, h)
	_, err := c.Info(t.Context())
	require.NoError(t, err)
	require.True(t, c.(*grpcClient).mux.Load(), "a current plugin serves Runs")
	return c
}

func TestPluginExitDuringRun(t *testing.T) {
	t.Parallel()
	for name, kill := range map[string]func(*grpc.Server, context.CancelFunc){
		// go-plugin noticed the process exit: its doneCtx is cancelled.
		"done ctx": func(_ *grpc.Server, cancelDone context.CancelFunc) { cancelDone() },
		// The connection broke before go-plugin noticed.
		"connection": func(srv *grpc.Server, _ context.CancelFunc) { srv.Stop() },
	} {
		for _, mux := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/runs stream %v", name, mux), func(t *testing.T) {
				t.Parallel()
				bh := blockingHandler{started: make(chan struct{})}
				h, srv, cancelDone := serve(t, bh)
				if mux {
					_, err := h.Info(t.Context())
					require.NoError(t, err)
				}
				require.Equal(t, mux, h.(*grpcClient).mux.Load())
				errCh := make(chan error, 1)
				var out bytes.Buffer
				go func() {
					_, err := h.Run(t.Context(), Request{}, &out)
					errCh <- err
				}()
				<-bh.started
				kill(srv, cancelDone)
				select {
				case err := <-errCh:
					require.ErrorIs(t, err, ErrPluginExited)
					var pe *PluginExitedError
					require.ErrorAs(t, err, &pe)
					require.ErrorContains(t, err, "plugin exited: ")
				case <-time.After(5 * time.Second):
					t.Fatal("Run did not return after the plugin went away")
				}
				if name == "done ctx" {
					// Once go-plugin knows, calls fail at once.
					_, err := h.Info(t.Context())
					require.ErrorIs(t, err, ErrPluginExited)
				}
			})
		}
	}
}

// echoHandler writes its fire id in two writes and succeeds with the job
// id as exit code.
type echoHandler struct{}

func (echoHandler) Info(context.Context) (Info, error) {
	return Info{Name: "echo", Version: "1", ParamsSchema: json.RawMessage(`{}`)}, nil
}
func (echoHandler) Validate(context.Context, json.RawMessage) error { return nil }
func (echoHandler) Run(_ context.Context, req Request, out io.Writer) (Result, error) {
	_, _ = io.WriteString(out, req.FireID)
	_, _ = io.WriteString(out, "/end")
	return Result{Status: StatusSuccess, ExitCode: int(req.JobID)}, nil
}

func TestRunsStreamKeepsEachRunsOutputAndResultApart(t *testing.T) {
	t.Parallel()
	h := serveOnRunsStream(t, echoHandler{})
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var out bytes.Buffer
			fire := fmt.Sprintf("fire-%d", i)
			res, err := h.Run(t.Context(), Request{FireID: fire, JobID: int64(i)}, &out)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", fire, err)
			case res.Status != StatusSuccess || res.ExitCode != i:
				errs <- fmt.Errorf("%s: result %+v", fire, res)
			case out.String() != fire+"/end":
				errs <- fmt.Errorf("%s: output %q", fire, out.String())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every run went over the one stream.
	rc := h.(*grpcClient).runs
	rc.mu.Lock()
	s := rc.stream
	rc.mu.Unlock()
	require.NotNil(t, s)
	require.Equal(t, uint64(n), s.nextID)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.runs, "a finished run leaves nothing behind")
	require.Empty(t, s.starts)
	require.Empty(t, s.cancels)
}

// noRunsServer says it serves Runs (its Describe is the SDK's) but does not.
type noRunsServer struct{ *grpcServer }

func (noRunsServer) Runs(wire.Handler_RunsServer) error {
	return status.Error(codes.Unimplemented, "no Runs here")
}

func TestHostFallsBackWhenAPluginDoesNotServeRuns(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	wire.RegisterHandlerServer(srv, noRunsServer{&grpcServer{impl: echoHandler{}}})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	raw, err := GRPCPlugin(nil).GRPCClient(t.Context(), nil, conn)
	require.NoError(t, err)
	h := raw.(*grpcClient)
	_, err = h.Info(t.Context())
	require.NoError(t, err)
	require.True(t, h.mux.Load())
	var out bytes.Buffer
	res, err := h.Run(t.Context(), Request{FireID: "f", JobID: 3}, &out)
	require.NoError(t, err)
	require.Equal(t, Result{Status: StatusSuccess, ExitCode: 3}, res)
	require.Equal(t, "f/end", out.String())
	require.False(t, h.mux.Load(), "later runs go a stream per run")
}

func TestRunsMessagesStayUnderTheBatchBound(t *testing.T) {
	t.Parallel()
	// Plugin side: queued events leave in as few messages as fit.
	o := newRunsSender(nil, nil)
	big := make([]byte, 300<<10)
	for i := range 10 {
		o.queue(&wire.RunsEvent{RunId: uint64(i), Event: &wire.RunsEvent_Output{Output: big}})
	}
	var sizes []int
	for {
		batch, _ := o.take()
		if len(batch) == 0 {
			break
		}
		sizes = append(sizes, len(batch))
	}
	require.Equal(t, []int{3, 3, 3, 1}, sizes)
	for range 1000 {
		o.queue(&wire.RunsEvent{RunId: 1, Event: &wire.RunsEvent_Result{Result: &wire.RunResult{Status: "success"}}})
	}
	batch, _ := o.take()
	require.Len(t, batch, 1000, "small events all go in one message")

	// Host side: starts likewise, with the cancels in the first message.
	s := &runsStream{runs: map[uint64]*muxRun{}, kick: make(chan struct{}, 1), ended: make(chan struct{})}
	for range 5 {
		_, err := s.add(&muxRun{}, &wire.RunStart{Request: &wire.RunRequest{Params: big}})
		require.NoError(t, err)
	}
	s.cancels = []uint64{7, 8}
	msg := s.take()
	require.Len(t, msg.GetStarts(), 3)
	require.Equal(t, []uint64{7, 8}, msg.GetCancels())
	require.LessOrEqual(t, proto.Size(msg), runsBatchBytes)
	msg = s.take()
	require.Len(t, msg.GetStarts(), 2)
	require.Empty(t, msg.GetCancels())
	require.Nil(t, s.take())

	// A run given up on while its start is queued is never sent, and no
	// cancel goes out for it; one already sent gets a cancel.
	sent, _ := s.add(&muxRun{}, &wire.RunStart{})
	require.Len(t, s.take().GetStarts(), 1)
	queued, _ := s.add(&muxRun{}, &wire.RunStart{})
	kept, _ := s.add(&muxRun{}, &wire.RunStart{})
	s.abandon(queued)
	s.abandon(sent)
	msg = s.take()
	require.Equal(t, []uint64{sent}, msg.GetCancels())
	require.Len(t, msg.GetStarts(), 1)
	require.Equal(t, kept, msg.GetStarts()[0].GetRunId())
}

func TestLoggerWritesGoPluginJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	newLogger(&buf).Warn("disk almost full", "free_mb", 12)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "warn", line["@level"])
	require.Equal(t, "disk almost full", line["@message"])
	require.EqualValues(t, 12, line["free_mb"])
	ts, ok := line["@timestamp"].(string)
	require.True(t, ok)
	_, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts)
	require.NoError(t, err, "go-plugin parses @timestamp with this layout")
}

func TestChunkWriterFlushesOnTimer(t *testing.T) {
	t.Parallel()
	sent := make(chan []byte, 4)
	w := newChunkWriter(func(b []byte) error { sent <- b; return nil })
	_, err := w.Write([]byte("tick"))
	require.NoError(t, err)
	select {
	case b := <-sent:
		require.Equal(t, "tick", string(b))
	case <-time.After(2 * time.Second):
		t.Fatal("buffered output was not flushed by the timer")
	}
	w.Close()
	require.Empty(t, sent)
	_, err = w.Write([]byte("late"))
	require.ErrorIs(t, err, errWriterClosed)
}

func TestChunkWriterDropsOutputAfterSendError(t *testing.T) {
	t.Parallel()
	calls := 0
	w := newChunkWriter(func([]byte) error { calls++; return errors.New("host gone") })
	for range 4 {
		n, err := w.Write(make([]byte, chunkSize))
		require.NoError(t, err)
		require.Equal(t, chunkSize, n)
	}
	w.Close()
	require.Equal(t, 1, calls)
}

// TestWireTrackerReleasesOnlyWaitersPastTheirMark: a finished write wakes the
// waiters whose mark it passes, not the others, and a waiter with no write
// after its mark gives up after maxWait.
func TestWireTrackerReleasesOnlyWaitersPastTheirMark(t *testing.T) {
	tr := newWireTracker()
	tr.maxWait = time.Minute
	tr.begin() // write 1 in progress when the messages are handed over
	mark := tr.mark()
	require.Equal(t, uint64(1), mark)
	const n = 50
	released := make(chan bool, n)
	for range n {
		go func() { released <- tr.wait(mark) }()
	}
	waiting := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.waiters)
	}
	require.Eventually(t, func() bool { return waiting() == n }, 10*time.Second, time.Millisecond)
	tr.end() // write 1 began before the mark: it carries none of the messages
	require.Equal(t, n, waiting(), "a write that began before the mark releases nobody")
	require.Empty(t, released)
	require.True(t, tr.wait(0), "a mark already passed returns at once")

	tr.begin()
	tr.end() // write 2 began after the mark
	for range n {
		select {
		case ok := <-released:
			require.True(t, ok, "released by the write, not by maxWait")
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was not released by the write after its mark")
		}
	}
	require.Zero(t, waiting())

	tr.maxWait = time.Millisecond
	require.False(t, tr.wait(tr.mark()), "no write after the mark: gives up after maxWait")
}

// killableHandler writes "started", then either succeeds at once (params
// "quick") or waits for its ctx and reports how it ended; entered and
// returned count the waiting runs that started and returned.
type killableHandler struct {
	entered, returned *atomic.Int64
}

func (killableHandler) Info(context.Context) (Info, error) {
	return Info{Name: "killable", Version: "1", ParamsSchema: json.RawMessage(`{}`)}, nil
}
func (killableHandler) Validate(context.Context, json.RawMessage) error { return nil }
func (h killableHandler) Run(ctx context.Context, req Request, out io.Writer) (Result, error) {
	_, _ = io.WriteString(out, "started")
	if string(req.Params) == `"quick"` {
		return Result{Status: StatusSuccess}, nil
	}
	h.entered.Add(1)
	<-ctx.Done()
	h.returned.Add(1)
	return Result{Status: StatusFailed, ExitCode: -1, Message: ctx.Err().Error()}, nil
}

// startedWriter closes started on the first write.
type startedWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

func TestRunsStreamKillsAndTimeoutsAmongManyRuns(t *testing.T) {
	t.Parallel()
	var entered, returned atomic.Int64
	h := serveOnRunsStream(t, killableHandler{entered: &entered, returned: &returned})
	const n = 150
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			switch i % 3 {
			case 0: // killed once it started
				ctx, cancel := context.WithCancel(t.Context())
				w := &startedWriter{started: make(chan struct{})}
				go func() {
					select {
					case <-w.started:
					case <-ctx.Done():
					}
					cancel()
				}()
				res, err := h.Run(ctx, Request{FireID: fmt.Sprint(i), Params: json.RawMessage(`"wait"`)}, w)
				if !errors.Is(err, context.Canceled) || res.Message != "killed" {
					errs <- fmt.Errorf("run %d (kill): %+v, %w", i, res, err)
				}
			case 1: // its deadline passes while it waits
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				defer cancel()
				res, err := h.Run(ctx, Request{FireID: fmt.Sprint(i), Params: json.RawMessage(`"wait"`)}, io.Discard)
				if !errors.Is(err, context.DeadlineExceeded) || res.Status != StatusFailed {
					errs <- fmt.Errorf("run %d (timeout): %+v, %w", i, res, err)
				}
			default:
				res, err := h.Run(t.Context(), Request{FireID: fmt.Sprint(i), Params: json.RawMessage(`"quick"`)}, io.Discard)
				if err != nil || res.Status != StatusSuccess {
					errs <- fmt.Errorf("run %d (quick): %+v, %w", i, res, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A timeout run whose deadline passed while its start was still queued
	// on the host never reaches the plugin (its start is dropped, and no
	// cancel is sent), so not every waiting run enters the handler; every
	// kill run did, as it was killed only once it had started. A quick run
	// after all the others is a barrier: the stream is ordered, so once its
	// result is back the plugin has received every start sent before it.
	res, err := h.Run(t.Context(), Request{FireID: "barrier", Params: json.RawMessage(`"quick"`)}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, StatusSuccess, res.Status)
	require.GreaterOrEqual(t, entered.Load(), int64(n/3), "every kill run entered the handler")
	// Every waiting handler that entered saw its ctx end on the plugin
	// side: the kills reached it and the deadlines applied there. (A
	// timeout run received before the barrier whose goroutine has not yet
	// entered when this first holds is not covered; every kill run is.)
	require.Eventually(t, func() bool { return returned.Load() == entered.Load() }, 10*time.Second, 10*time.Millisecond)
	require.LessOrEqual(t, entered.Load(), int64(2*n/3))
}
