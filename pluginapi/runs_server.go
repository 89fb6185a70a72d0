package pluginapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// Runs serves many runs on one stream (the plugin side of
// runsClient): each start becomes a goroutine that runs exactly as Run
// does, and one sender puts the events of all runs on the stream, as many
// to a message as queued up while it was sending the last one. The call
// returns once the host ended the stream and every run started on it
// returned and had its result queued and sent (or the stream failed).
func (s *grpcServer) Runs(stream wire.Handler_RunsServer) error {
	ctx, cancelAll := context.WithCancel(stream.Context())
	defer cancelAll()
	out := newRunsSender(stream, s.tracker)
	go out.loop()

	var (
		mu    sync.Mutex
		kills = make(map[uint64]func())
		wg    sync.WaitGroup
	)
	for {
		req, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// The host went away: its runs are cancelled.
				cancelAll()
			}
			break
		}
		for _, st := range req.GetStarts() {
			id := st.GetRunId()
			runCtx, kill, release := runContext(ctx, st.GetDeadlineUnixNano())
			mu.Lock()
			kills[id] = kill
			mu.Unlock()
			wg.Add(1)
			if s.runs != nil {
				s.runs.Add(1)
			}
			go func() {
				defer func() {
					if s.runs != nil {
						s.runs.Done()
					}
					wg.Done()
				}()
				res := s.serveMuxRun(runCtx, id, st.GetRequest(), out)
				release()
				mu.Lock()
				delete(kills, id)
				mu.Unlock()
				out.queue(&wire.RunsEvent{RunId: id, Event: &wire.RunsEvent_Result{Result: res}})
			}()
		}
		for _, id := range req.GetCancels() {
			mu.Lock()
			kill := kills[id]
			mu.Unlock()
			if kill != nil {
				kill()
			}
		}
	}
	wg.Wait()
	return out.close()
}

// serveMuxRun runs one run of a Runs stream; its output chunks go to out
// as events of run id.
func (s *grpcServer) serveMuxRun(ctx context.Context, id uint64, req *wire.RunRequest, out *runsSender) *wire.RunResult {
	m := &sentMark{t: s.tracker}
	send := func(b []byte) error {
		mark, err := out.sendWait(&wire.RunsEvent{RunId: id, Event: &wire.RunsEvent_Output{Output: b}})
		m.last = mark
		return err
	}
	var marks wireMarks
	if s.tracker != nil {
		marks = m
	}
	return s.serveRun(ctx, req, send, marks)
}

// runContext is the handler context of one run on a Runs stream: it ends
// at the run's deadline (Unix ns; 0 = none) or when the stream ends. kill
// is the host's cancel: at once when it comes well before the deadline,
// ignored within deadlineSlack of it (the host's own deadline timer, which
// fires before ours), as handlerContext does for Run.
func runContext(parent context.Context, deadlineNano int64) (ctx context.Context, kill, release func()) {
	ctx, cancel := context.WithCancel(parent)
	if deadlineNano == 0 {
		return ctx, cancel, cancel
	}
	deadline := time.Unix(0, deadlineNano)
	dctx, dcancel := context.WithDeadline(ctx, deadline)
	kill = func() {
		if time.Until(deadline) > deadlineSlack {
			cancel()
		}
	}
	return dctx, kill, func() {
		dcancel()
		cancel()
	}
}

// sentMark is a run's wireMarks on a Runs stream: the tracker's mark taken
// right after the message that carried the run's last output chunk was
// handed to gRPC. last is written and read under the run's chunkWriter
// lock.
type sentMark struct {
	t    *wireTracker
	last uint64
}

func (m *sentMark) mark() uint64          { return m.last }
func (m *sentMark) wait(mark uint64) bool { return m.t.wait(mark) }

// runsSender is the one goroutine that sends on a Runs stream.
type runsSender struct {
	stream  wire.Handler_RunsServer
	tracker *wireTracker // nil in-process

	mu      sync.Mutex
	items   []runsItem
	err     error // the first send error; later events are dropped
	closing bool
	kick    chan struct{} // cap 1
	done    chan struct{} // closed when loop returned
}

// runsItem is one queued event; sent, when set, gets the send's outcome.
type runsItem struct {
	ev   *wire.RunsEvent
	size int
	sent chan sendOutcome
}

type sendOutcome struct {
	mark uint64
	err  error
}

func newRunsSender(stream wire.Handler_RunsServer, tracker *wireTracker) *runsSender {
	return &runsSender{stream: stream, tracker: tracker, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// queue queues ev to be sent. After a send error it is dropped: the
// stream is gone, and the host fails the runs it had on it.
func (o *runsSender) queue(ev *wire.RunsEvent) {
	_ = o.enqueue(runsItem{ev: ev})
}

// sendWait queues ev and waits until the message carrying it was handed
// to gRPC (so a slow host slows the handler's output, as on a Run
// stream); it returns the tracker's mark right after that send.
func (o *runsSender) sendWait(ev *wire.RunsEvent) (uint64, error) {
	sent := make(chan sendOutcome, 1)
	if err := o.enqueue(runsItem{ev: ev, sent: sent}); err != nil {
		return 0, err
	}
	r := <-sent
	return r.mark, r.err
}

func (o *runsSender) enqueue(it runsItem) error {
	it.size = proto.Size(it.ev) + 8
	o.mu.Lock()
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	o.items = append(o.items, it)
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return nil
}

// loop sends what is queued, up to runsBatchBytes a message, until close.
func (o *runsSender) loop() {
	defer close(o.done)
	for {
		<-o.kick
		for {
			batch, closing := o.take()
			if len(batch) == 0 {
				if closing {
					return
				}
				break
			}
			evs := make([]*wire.RunsEvent, len(batch))
			for i, it := range batch {
				evs[i] = it.ev
			}
			err := o.stream.Send(&wire.RunsEvents{Events: evs})
			var mark uint64
			if o.tracker != nil {
				mark = o.tracker.mark()
			}
			for _, it := range batch {
				if it.sent != nil {
					it.sent <- sendOutcome{mark: mark, err: err}
				}
			}
			if err != nil {
				o.fail(err)
				return
			}
		}
	}
}

// take dequeues as many items as fit runsBatchBytes (at least one).
func (o *runsSender) take() ([]runsItem, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	size, n := 0, 0
	for n < len(o.items) {
		size += o.items[n].size
		if n > 0 && size > runsBatchBytes {
			break
		}
		n++
	}
	batch := o.items[:n:n]
	o.items = o.items[n:]
	if len(o.items) == 0 {
		o.items = nil
	}
	return batch, o.closing && len(o.items) == 0
}

// fail records the stream's send error and fails everything queued.
func (o *runsSender) fail(err error) {
	o.mu.Lock()
	o.err = err
	items := o.items
	o.items = nil
	o.mu.Unlock()
	for _, it := range items {
		if it.sent != nil {
			it.sent <- sendOutcome{err: err}
		}
	}
}

// close sends what is queued and stops the loop; it returns the stream's
// send error, if any.
func (o *runsSender) close() error {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	select {
	case o.kick <- struct{}{}:
	default:
	}
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
