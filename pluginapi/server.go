package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// Output batching: the plugin side sends a write at once while fewer than
// immediateSends chunks went out in the current flushInterval, so the last
// lines a handler writes before its process crashes have left it; beyond
// that it sends a chunk when chunkSize bytes are buffered or when the
// oldest buffered byte is flushInterval old, so chatty output costs few
// messages.
const (
	chunkSize      = 32 << 10
	flushInterval  = 50 * time.Millisecond
	immediateSends = 16
)

// grpcServer serves a Handler as the wire.Handler gRPC service (plugin side).
type grpcServer struct {
	wire.UnimplementedHandlerServer
	impl    Handler
	runs    *sync.WaitGroup // counts Runs in flight; may be nil
	tracker *wireTracker    // the connection's writes; nil in-process
}

var _ wire.HandlerServer = (*grpcServer)(nil)

func (s *grpcServer) Describe(ctx context.Context, _ *wire.DescribeRequest) (resp *wire.DescribeResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, errorToStatus(panicError("Info", r))
		}
	}()
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, errorToStatus(err)
	}
	return infoToWire(info), nil
}

func (s *grpcServer) Validate(ctx context.Context, req *wire.ValidateRequest) (resp *wire.ValidateResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, errorToStatus(panicError("Validate", r))
		}
	}()
	if err := s.impl.Validate(ctx, req.GetParams()); err != nil {
		return nil, errorToStatus(err)
	}
	return &wire.ValidateResponse{}, nil
}

// Run runs the handler with the stream's context (its deadline is the job
// timeout; its cancellation is a kill), streams output in batched chunks and
// ends with exactly one result.
func (s *grpcServer) Run(req *wire.RunRequest, stream wire.Handler_RunServer) error {
	if s.runs != nil {
		s.runs.Add(1)
		defer s.runs.Done()
	}
	ctx, release := handlerContext(stream.Context())
	defer release()
	send := func(b []byte) error {
		return stream.Send(&wire.RunEvent{Event: &wire.RunEvent_Output{Output: b}})
	}
	var marks wireMarks
	if s.tracker != nil {
		marks = s.tracker
	}
	res := s.serveRun(ctx, req, send, marks)
	return stream.Send(&wire.RunEvent{Event: &wire.RunEvent_Result{Result: res}})
}

// serveRun runs one run: it waits for its start time (unless the handler
// is an EarlyRunner), calls the handler with its output going to send in
// batched chunks, and returns the run's result. marks, when not nil, lets
// an immediate output chunk wait until it is on the connection.
func (s *grpcServer) serveRun(ctx context.Context, req *wire.RunRequest, send func([]byte) error, marks wireMarks) *wire.RunResult {
	w := newChunkWriter(send)
	w.onWire = marks
	if !s.runsEarly() && !waitStart(ctx, req.GetStartAtUnixNano()) {
		w.Close()
		return resultToWire(Result{Status: StatusFailed, ExitCode: -1, Message: "cancelled before its start time"}, nil)
	}
	res, err := s.run(ctx, requestFromWire(req), w)
	w.Close()
	if err == nil && res.Status != StatusSuccess && res.Status != StatusFailed {
		res = Result{Status: StatusFailed, ExitCode: res.ExitCode, Message: fmt.Sprintf("handler returned invalid status %q", res.Status)}
	}
	if err != nil && res.Status == "" {
		res.Status = StatusFailed
	}
	return resultToWire(res, err)
}

// runsEarly reports whether the handler is an EarlyRunner that waits for
// StartAt itself.
func (s *grpcServer) runsEarly() bool {
	e, ok := s.impl.(EarlyRunner)
	return ok && e.RunsBeforeStartAt()
}

func (s *grpcServer) run(ctx context.Context, req Request, w *chunkWriter) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("Run", r)
			res = Result{Status: StatusFailed, ExitCode: -1, Message: err.Error()}
		}
	}()
	return s.impl.Run(ctx, req, w)
}

// deadlineSlack: a stream cancelled this close to its deadline was cancelled
// by the host's own deadline timer, which fires before ours (ours started
// when the request arrived).
const deadlineSlack = 250 * time.Millisecond

// handlerContext derives the ctx a handler's Run gets from the stream's. A
// cancellation of the stream well before its deadline is a kill and cancels
// it at once; one within deadlineSlack of the deadline is the timeout, so
// the handler's ctx ends by its own deadline and reports
// context.DeadlineExceeded, not context.Canceled.
func handlerContext(stream context.Context) (context.Context, func()) {
	deadline, ok := stream.Deadline()
	if !ok {
		return stream, func() {}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(stream), deadline)
	stop := context.AfterFunc(stream, func() {
		if time.Until(deadline) > deadlineSlack {
			cancel()
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}

// wireMarks tells when a sent chunk is on the connection: mark, taken
// right after a send, and wait(mark), which returns once a connection
// write that began after it finished (or after a bound). *wireTracker is
// one for a Run stream; a Runs stream's sender knows the mark of the
// message that carried a chunk.
type wireMarks interface {
	mark() uint64
	wait(mark uint64) bool
}

// errWriterClosed is returned by writes to a run's output after the
// handler's Run returned.
var errWriterClosed = errors.New("pluginapi: run output written after Run returned")

// chunkWriter batches a run's output into stream messages: a write goes
// out at once while the current flushInterval window has seen fewer than
// immediateSends sends, else a chunk goes out when chunkSize bytes are
// buffered or flushInterval after the first unsent byte. It is safe for
// concurrent use. Sends happen under the lock,
// so a slow host applies back-pressure to the handler and the buffer never
// exceeds chunkSize plus one write.
type chunkWriter struct {
	send func([]byte) error

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // armed while buf holds unsent bytes
	gen    uint64      // identifies the armed timer; a stale one does nothing
	err    error       // first send error; later writes are dropped
	closed bool
	// onWire, when set, lets an immediate send wait until the chunk is on
	// the connection.
	onWire wireMarks
	// The current window of immediate sends.
	windowStart time.Time
	windowSends int
}

func newChunkWriter(send func([]byte) error) *chunkWriter {
	return &chunkWriter{send: send}
}

// Write buffers p. After a send error (the host went away) writes succeed
// and are dropped, so a handler is never failed by its output; ctx tells it
// when to stop.
func (w *chunkWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	if w.err != nil {
		return len(p), nil
	}
	n := len(p)
	for len(p) > 0 {
		room := chunkSize - len(w.buf)
		take := min(room, len(p))
		if w.buf == nil {
			w.buf = make([]byte, 0, min(chunkSize, max(len(p), 512)))
		}
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) >= chunkSize {
			w.flushLocked()
		}
		if w.err != nil {
			return n, nil
		}
	}
	if len(w.buf) > 0 && w.immediateLocked() {
		w.flushLocked()
		if w.onWire != nil && w.err == nil {
			// Wait (briefly) until gRPC's transport put the chunk on the
			// connection: if the handler's next step crashes the process,
			// the host still gets it.
			w.onWire.wait(w.onWire.mark())
		}
		return n, nil
	}
	if len(w.buf) > 0 && w.timer == nil {
		w.gen++
		gen := w.gen
		w.timer = time.AfterFunc(flushInterval, func() { w.timedFlush(gen) })
	}
	return n, nil
}

// immediateLocked reports whether buffered bytes may go out now, and counts
// the send in the current window.
func (w *chunkWriter) immediateLocked() bool {
	now := time.Now()
	if now.Sub(w.windowStart) >= flushInterval {
		w.windowStart, w.windowSends = now, 0
	}
	if w.windowSends >= immediateSends {
		return false
	}
	w.windowSends++
	return true
}

func (w *chunkWriter) timedFlush(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || gen != w.gen || w.timer == nil {
		return // flushed or re-armed since this timer was set
	}
	w.timer = nil
	w.flushLocked()
}

// flushLocked sends the buffered bytes. The buffer is handed to the stream
// and never reused (gRPC may still hold the message).
func (w *chunkWriter) flushLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if len(w.buf) == 0 || w.err != nil {
		w.buf = nil
		return
	}
	b := w.buf
	w.buf = nil
	w.err = w.send(b)
}

// Close sends what is buffered; later writes fail.
func (w *chunkWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.flushLocked()
	w.closed = true
}

// waitStart waits until startAt (Unix ns; 0 = no wait) or ctx ends; false
// when ctx ended first (the run is not to be started). The SDK imports no
// other Cronix package (TestImportsNothingFromCronix), so it does not use
// internal/waitctx.
func waitStart(ctx context.Context, startAt int64) bool {
	if startAt == 0 {
		return true
	}
	d := time.Until(time.Unix(0, startAt))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
