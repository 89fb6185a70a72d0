package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// runsBatchBytes bounds the encoded size of one Runs message in either
// direction; gRPC's default receive limit is 4 MiB.
const runsBatchBytes = 1 << 20

// runsClient is the host side of the Runs RPC: every run of one plugin
// connection goes over one bidirectional stream. Starts and cancels queued
// while the stream's sender is busy go out together in one message; the
// plugin sends output and results of many runs per message, and one
// receiver goroutine hands them to the runs. It saves a gRPC stream (its
// headers, trailers, flow-control updates and server goroutine) per run.
type runsClient struct {
	client  wire.HandlerClient
	doneCtx context.Context // the plugin connection's lifetime

	mu     sync.Mutex
	stream *runsStream // nil until the first run or after one broke
}

// runsStream is one open Runs stream with its sender and receiver.
type runsStream struct {
	cancel context.CancelFunc
	stream grpc.BidiStreamingClient[wire.RunsRequest, wire.RunsEvents]

	mu      sync.Mutex
	runs    map[uint64]*muxRun // started and not yet finished
	nextID  uint64
	starts  []*wire.RunStart // queued for the sender
	cancels []uint64
	err     error         // why the stream ended; set once
	kick    chan struct{} // cap 1: the sender has something to send
	ended   chan struct{} // closed when err is set
}

// muxRun is one run on a Runs stream. The receiver writes its output
// under mu until Run gives up on it (closed), so out is never written
// after Run returned.
type muxRun struct {
	out io.Writer

	mu     sync.Mutex
	closed bool
	werr   error // first error of out.Write; later output is dropped

	result *wire.RunResult // set before done is closed, unless err is
	err    error           // the stream ended before the result
	done   chan struct{}
}

// run starts req on the connection's Runs stream and waits for its result
// or for ctx to end (then the plugin is told to cancel it and Run returns
// at once, as a cancelled Run stream does).
func (c *runsClient) run(ctx context.Context, req Request, out io.Writer) (*wire.RunResult, error, error) {
	start := &wire.RunStart{Request: requestToWire(req)}
	if dl, ok := ctx.Deadline(); ok {
		start.DeadlineUnixNano = dl.UnixNano()
	}
	r := &muxRun{out: out, done: make(chan struct{})}
	var (
		s   *runsStream
		id  uint64
		err error
	)
	// A stream that ended between open and add is replaced once.
	for range 2 {
		if s, err = c.open(); err != nil {
			return nil, nil, err
		}
		if id, err = s.add(r, start); err == nil {
			break
		}
	}
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-r.done:
		if r.err != nil {
			return nil, nil, r.err
		}
		return r.result, r.werr, nil
	case <-ctx.Done():
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		s.abandon(id)
		return nil, nil, ctx.Err()
	}
}

// open returns the open stream, opening one if there is none.
func (c *runsClient) open() (*runsStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.stream; s != nil {
		select {
		case <-s.ended:
		default:
			return s, nil
		}
	}
	ctx, cancel := context.WithCancel(c.doneCtx)
	stream, err := c.client.Runs(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &runsStream{
		cancel: cancel,
		stream: stream,
		runs:   make(map[uint64]*muxRun),
		kick:   make(chan struct{}, 1),
		ended:  make(chan struct{}),
	}
	c.stream = s
	go s.send()
	go s.receive()
	return s, nil
}

// add registers r and queues its start.
func (s *runsStream) add(r *muxRun, start *wire.RunStart) (uint64, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	s.nextID++
	id := s.nextID
	start.RunId = id
	s.runs[id] = r
	s.starts = append(s.starts, start)
	s.mu.Unlock()
	s.wake()
	return id, nil
}

// abandon forgets a run Run gave up on and asks the plugin to cancel it,
// or, while its start is still queued, drops the start: a cancel never
// reaches the plugin before its start.
func (s *runsStream) abandon(id uint64) {
	s.mu.Lock()
	if _, ok := s.runs[id]; !ok || s.err != nil {
		s.mu.Unlock()
		return
	}
	delete(s.runs, id)
	for i, st := range s.starts {
		if st.GetRunId() == id {
			s.starts = append(s.starts[:i:i], s.starts[i+1:]...)
			s.mu.Unlock()
			return
		}
	}
	s.cancels = append(s.cancels, id)
	s.mu.Unlock()
	s.wake()
}

func (s *runsStream) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// end fails every run still waiting with err and cancels the stream. Only
// the first call counts.
func (s *runsStream) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	runs := s.runs
	s.runs = nil
	s.starts, s.cancels = nil, nil
	close(s.ended)
	s.mu.Unlock()
	s.cancel()
	for _, r := range runs {
		r.err = err
		close(r.done)
	}
}

// send sends what is queued whenever there is something, up to
// runsBatchBytes a message.
func (s *runsStream) send() {
	for {
		select {
		case <-s.kick:
		case <-s.ended:
			return
		}
		for {
			msg := s.take()
			if msg == nil {
				break
			}
			if err := s.stream.Send(msg); err != nil {
				// io.EOF: the stream ended, and the receiver gets its
				// status (the plugin's Unimplemented, an exit) and ends
				// it with that. Any other error is local: end it here.
				if !errors.Is(err, io.EOF) {
					s.end(fmt.Errorf("sending runs: %w", err))
				}
				return
			}
		}
	}
}

// take dequeues the next message: all queued cancels and as many starts as
// fit runsBatchBytes (at least one). nil when nothing is queued.
func (s *runsStream) take() *wire.RunsRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.starts) == 0 && len(s.cancels) == 0 {
		return nil
	}
	msg := &wire.RunsRequest{Cancels: s.cancels}
	s.cancels = nil
	size := 8 * len(msg.Cancels)
	n := 0
	for n < len(s.starts) {
		size += proto.Size(s.starts[n]) + 8
		if n > 0 && size > runsBatchBytes {
			break
		}
		n++
	}
	msg.Starts = s.starts[:n:n]
	s.starts = s.starts[n:]
	if len(s.starts) == 0 {
		s.starts = nil
	}
	return msg
}

// receive hands each event to its run until the stream ends.
func (s *runsStream) receive() {
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("plugin ended the runs stream")
			}
			s.end(err)
			return
		}
		for _, ev := range msg.GetEvents() {
			s.deliver(ev)
		}
	}
}

// deliver hands one event to its run; events of runs Run gave up on are
// dropped.
func (s *runsStream) deliver(ev *wire.RunsEvent) {
	s.mu.Lock()
	r := s.runs[ev.GetRunId()]
	var res *wire.RunResult
	switch e := ev.GetEvent().(type) {
	case *wire.RunsEvent_Result:
		res = e.Result
		if r != nil {
			delete(s.runs, ev.GetRunId())
		}
	case *wire.RunsEvent_Output:
	default:
		res = resultToWire(Result{Status: StatusFailed, ExitCode: -1},
			Permanent(errors.New("plugin run: protocol violation: unknown stream event")))
		if r != nil {
			delete(s.runs, ev.GetRunId())
		}
	}
	s.mu.Unlock()
	if r == nil {
		return
	}
	if res != nil {
		r.result = res
		close(r.done)
		return
	}
	r.mu.Lock()
	if !r.closed && r.werr == nil {
		if _, err := r.out.Write(ev.GetOutput()); err != nil {
			r.werr = fmt.Errorf("writing run output: %w", err)
		}
	}
	r.mu.Unlock()
}

// unimplemented reports a plugin that said it serves Runs but does not.
func unimplemented(err error) bool {
	return status.Code(err) == codes.Unimplemented
}
