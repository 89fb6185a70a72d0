package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/node/spool"
)

// ResultsPath is the server endpoint results are posted to.
const ResultsPath = "/api/v1/internal/results"

// reportStartQuiet is how long after the last start on the node a due
// delivery is sent (see reporter.lastStart).
const reportStartQuiet = 20 * time.Millisecond

// errNoServer means no server URL is known yet.
var errNoServer = errors.New("no server known")

// reporter delivers run results to the servers in batches, in the order they
// were queued, and never drops one: a batch that fails is retried (with
// backoff, trying every known server) until a server answers 200. After a
// 200 it deletes the run keys of the batch's finished fires in one etcd txn.
// With a spool, queued results are also written to disk so a restart keeps
// them, and memory is bounded: past memLimit bytes of queued results, the
// newer ones are left in the spool (spilled) and read back in order as the
// older ones are delivered.
type reporter struct {
	etcd     *clientv3.Client
	keys     cluster.Keys
	node     string
	servers  func() []string
	client   *http.Client
	token    string
	interval time.Duration
	batch    int
	maxBytes int
	memLimit int // see above; applies only with a spool
	txns     *txnLimit
	log      *slog.Logger
	// onDeleted is told which fires' run keys are gone from etcd.
	onDeleted func(fireIDs []string)

	mu    sync.Mutex
	queue []cluster.RunResult // undelivered, oldest first
	// unspooled counts the results at the end of queue not yet written to
	// the spool (with one). Results are encoded by the delivering goroutine
	// (encode), after the node's starts went quiet, not by the runs that
	// finish during a tick's burst: encode writes them before each
	// delivery, a spill or stop before the spool takes anything after them.
	unspooled int
	// queueBytes is the approxSize of queue; queue is followed by the
	// spool's spilled results, if any.
	queueBytes int
	deletes    []string // fires whose run keys await deletion
	// spoolAcks counts delivered results the spool still holds, because
	// the run keys of their fires are not deleted yet.
	spoolAcks int
	spool     *spool.Spool
	closed    bool

	notify chan struct{} // something was queued
	kick   chan struct{} // a full batch is queued

	// preferred is the index of the server that answered last; only the
	// goroutine that flushes touches it.
	preferred int

	// lastStart is when (unix ns) a fire last started on this node: when
	// its handler was called, or its StartAt for a fire handed over ahead
	// (the latest noted wins). A delivery waits until no fire started for
	// startQuiet, for at most maxDefer, so posting results (SQL on the
	// server) and deleting run keys (an etcd txn) do not compete with a
	// tick's batch of starts; the batch sent afterwards is larger.
	lastStart  atomic.Int64
	startQuiet time.Duration
	maxDefer   time.Duration

	cancel context.CancelFunc
	done   chan struct{}
}

// enqueue queues a result for delivery. It neither encodes the result nor
// writes the spool (encode does both before the next delivery, once the
// node's starts went quiet), except when the result is spilled.
func (r *reporter) enqueue(res cluster.RunResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.log.Error("agent: result finished after shutdown is lost", "fire_id", res.FireID, "status", res.Status)
		return
	}
	size := approxSize(&res)
	if r.spool != nil && r.memLimit > 0 && len(r.queue) > 0 && (r.spool.Spilled() > 0 || r.queueBytes+size > r.memLimit) {
		if r.spool.Spilled() == 0 {
			r.log.Warn("agent: undelivered results exceed the memory bound; newer ones wait in the spool only",
				"results", len(r.queue), "bytes", r.queueBytes)
		}
		// Spilled results follow every queued one in the spool.
		err := r.spoolTailLocked(len(r.queue), nil)
		var line []byte
		if err == nil {
			line, err = spool.Encode(res)
		}
		if err == nil {
			err = r.spool.SpillEncoded(line)
		}
		if err == nil {
			signal(r.kick)
			return
		}
		r.dropSpoolLocked(err) // kept in memory below
	}
	r.queue = append(r.queue, res)
	r.queueBytes += size
	if r.spool != nil {
		r.unspooled++
	}
	if len(r.queue) >= r.batch {
		signal(r.kick)
	}
	signal(r.notify)
}

// spoolTailLocked writes the queue's unspooled results before index end
// to the spool's buffer: queue[i] encoded as encoded(i), or, where that is
// nil (or encoded is), by spool.Encode. Caller holds mu; the spool is set.
func (r *reporter) spoolTailLocked(end int, encoded func(i int) []byte) error {
	for i := len(r.queue) - r.unspooled; i < end; i++ {
		var line []byte
		if encoded != nil {
			line = encoded(i)
		}
		if line == nil {
			var err error
			if line, err = spool.Encode(r.queue[i]); err != nil {
				return err
			}
		}
		if err := r.spool.AppendEncoded(line); err != nil {
			return err
		}
		r.unspooled--
	}
	return nil
}

// hold appends results to the queue (the oldest undelivered ones, read
// from the spool). Caller holds mu, or has the only reference.
func (r *reporter) hold(results []cluster.RunResult) {
	for i := range results {
		r.queueBytes += approxSize(&results[i])
	}
	r.queue = append(r.queue, results...)
}

// refillLocked reads spilled results back into the queue once it is down
// to half of memLimit, and returns how many. Caller holds mu.
func (r *reporter) refillLocked() int {
	if r.spool == nil || r.spool.Spilled() == 0 || r.queueBytes > r.memLimit/2 { // (Spilled > 0 implies memLimit > 0)
		return 0
	}
	before := len(r.queue)
	more, err := r.spool.Refill(r.memLimit - r.queueBytes)
	r.hold(more)
	if err != nil {
		r.dropSpoolLocked(err)
	} else if r.spool.Spilled() == 0 {
		r.log.Info("agent: every spilled result is back in memory")
	}
	return len(r.queue) - before
}

// forget asks for the run key of a fire to be deleted without a result
// (a re-dispatch of a fire that already ran).
func (r *reporter) forget(fireID string) {
	r.mu.Lock()
	r.deletes = append(r.deletes, fireID)
	r.mu.Unlock()
	signal(r.notify)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// dropSpoolLocked stops using a spool that failed; results stay in memory.
// Spilled results are read back first; those it cannot read stay in the
// spool file, delivered after the node restarts.
func (r *reporter) dropSpoolLocked(err error) {
	r.log.Error("agent: result spool failed; keeping results in memory only", "error", err)
	if n := r.spool.Spilled(); n > 0 {
		more, rerr := r.spool.Refill(0)
		r.hold(more)
		if rerr != nil || len(more) < n {
			r.log.Error("agent: spilled results stay in the spool file until the node restarts",
				"results", n-len(more), "error", rerr)
		}
	}
	_ = r.spool.Close()
	r.setSpoolLocked(nil)
}

// setSpoolLocked sets the spool (nil: none). Caller holds mu, or has the
// only reference.
func (r *reporter) setSpoolLocked(sp *spool.Spool) {
	r.spool = sp
	r.unspooled = 0 // none while spilled; without a spool, none to write
}

func (r *reporter) start(ctx context.Context) {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.done = make(chan struct{})
	go r.loop(lctx)
}

// loop waits until results were queued for interval (or a batch is full),
// then delivers everything queued; after a failure it waits with backoff.
func (r *reporter) loop(ctx context.Context) {
	defer close(r.done)
	var (
		timer     = time.NewTimer(time.Hour)
		armed     bool
		bo        backoff
		failing   bool
		deferring time.Time // when the due delivery was first held back for starts
	)
	timer.Stop()
	defer timer.Stop()
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed = true
	}
	if r.pending() {
		arm(r.interval) // results loaded from the spool
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.notify:
			if !armed {
				arm(r.interval)
			}
			continue
		case <-r.kick:
			if failing {
				continue // wait out the backoff
			}
			timer.Stop()
		case <-timer.C:
		}
		armed = false
		now := time.Now()
		if wait := r.holdFor(now, deferring); wait > 0 {
			if deferring.IsZero() {
				deferring = now
			}
			arm(wait)
			continue
		}
		deferring = time.Time{}
		if r.flush(ctx) {
			failing = false
			bo.reset()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failing = true
		arm(bo.next())
	}
}

// started notes that a fire's handler starts at at (now, or its StartAt
// when it was handed over ahead); see lastStart. A later time already
// noted is kept.
func (r *reporter) started(at time.Time) {
	n := at.UnixNano()
	for {
		old := r.lastStart.Load()
		if old >= n || r.lastStart.CompareAndSwap(old, n) {
			return
		}
	}
}

// holdFor returns how long a due delivery should still wait for the
// node's starts to go quiet: 0 when no fire started within startQuiet, or
// when the delivery was first held at deferring, maxDefer ago or more.
func (r *reporter) holdFor(now, deferring time.Time) time.Duration {
	if r.startQuiet <= 0 {
		return 0
	}
	quiet := r.startQuiet - now.Sub(time.Unix(0, r.lastStart.Load()))
	if quiet <= 0 {
		return 0
	}
	if !deferring.IsZero() {
		left := r.maxDefer - now.Sub(deferring)
		if left <= 0 {
			return 0
		}
		quiet = min(quiet, left)
	}
	return quiet
}

// pending reports whether results or deletions are waiting (spilled
// results follow queued ones, so a non-empty queue covers them).
func (r *reporter) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue) > 0 || len(r.deletes) > 0
}

// flush delivers what was queued when it was called, and then any further
// full batches; results queued later wait for the next interval. It reports
// false when a delivery or a deletion failed (what failed stays queued).
func (r *reporter) flush(ctx context.Context) bool {
	r.mu.Lock()
	due := len(r.queue)
	r.mu.Unlock()
	for {
		n, full := r.peek()
		deliver := n > 0 && (due > 0 || full)
		if deliver {
			lines, err := r.encode(n)
			if err == nil {
				err = r.post(ctx, lines)
			}
			if err != nil {
				r.log.Warn("agent: delivering results failed; will retry", "results", n, "error", err)
				return false
			}
			due += r.ack(n) - n // spilled results read back are due too
		}
		if err := r.deleteRunKeys(ctx); err != nil {
			r.log.Warn("agent: deleting delivered run keys failed; will retry", "error", err)
			return false
		}
		if !deliver {
			return true
		}
	}
}

// peek returns how many of the oldest queued results fit in one batch,
// and whether the batch is full (by count or by size).
func (r *reporter) peek() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, size := 0, 0
	for n < len(r.queue) && n < r.batch {
		size += approxSize(&r.queue[n])
		if n > 0 && size > r.maxBytes {
			break
		}
		n++
	}
	return n, n == r.batch || n < len(r.queue)
}

func approxSize(res *cluster.RunResult) int {
	return 400 + len(res.Output) + len(res.Message) + len(res.FireID) + len(res.Node)
}

// encode returns the encodings (spool.Encode) of the n oldest results,
// the batch to deliver, and makes every result queued so far durable when
// there is a spool: the results not in it yet are encoded without mu
// (results keep being queued meanwhile), written to the spool's buffer
// under mu, which hands that to the file, and the fsync runs without mu
// (one fsync per delivery attempt, whatever the number of results). A
// result is encoded once, for both, unless it is spooled by one delivery
// and sent by a later one. A spool that fails is dropped (logged; the
// results stay in memory and are delivered all the same). Only the loop's
// goroutine (or stop, after the loop ended) calls it, never concurrently
// with ack or the spool's Ack, so the queue's first elements stay where
// they are.
func (r *reporter) encode(n int) ([][]byte, error) {
	r.mu.Lock()
	end, from := len(r.queue), len(r.queue)
	if r.spool != nil {
		from -= r.unspooled
	}
	q := r.queue[:end:end]
	r.mu.Unlock()
	lo := max(from, n) // the results to spool after the batch: q[lo:end]
	batch, err := encodeAll(q[:n])
	if err != nil {
		return nil, err
	}
	after, err := encodeAll(q[lo:end])
	if err != nil {
		return nil, err
	}
	encoded := func(i int) []byte {
		switch {
		case i < n:
			return batch[i]
		case i >= lo && i < end:
			return after[i-lo]
		}
		return nil
	}
	r.mu.Lock()
	sp := r.spool
	if sp == nil {
		r.mu.Unlock()
		return batch, nil
	}
	// A spill meanwhile wrote the unspooled results itself.
	err = r.spoolTailLocked(end, encoded)
	var fsync func() error
	if err == nil {
		fsync, err = sp.Flush()
	}
	if err != nil {
		r.dropSpoolLocked(err)
		r.mu.Unlock()
		return batch, nil
	}
	r.mu.Unlock()
	if err := fsync(); err != nil {
		r.mu.Lock()
		if r.spool == sp { // not dropped by enqueue meanwhile
			r.dropSpoolLocked(err)
		}
		r.mu.Unlock()
	}
	return batch, nil
}

// encodeAll encodes each result with spool.Encode.
func encodeAll(results []cluster.RunResult) ([][]byte, error) {
	lines := make([][]byte, len(results))
	for i := range results {
		var err error
		if lines[i], err = spool.Encode(results[i]); err != nil {
			return nil, err
		}
	}
	return lines, nil
}

// ack removes the n oldest results, which a server accepted, and queues the
// run keys of the finished ones for deletion. The spool forgets them only
// once those keys are deleted: a crash in between makes the next process
// deliver them again (harmless) rather than run their fires again. It
// returns how many spilled results it read back into the queue.
func (r *reporter) ack(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.queue[:n] {
		res := &r.queue[i]
		if cluster.Terminal(res.Status) {
			r.deletes = append(r.deletes, res.FireID)
		}
		r.queueBytes -= approxSize(res)
	}
	clear(r.queue[:n])
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil
	}
	r.spoolAcks += n
	return r.refillLocked()
}

// post sends one batch (its results' encodings), trying each known server
// once, starting with the one that answered last.
func (r *reporter) post(ctx context.Context, lines [][]byte) error {
	urls := r.servers()
	if len(urls) == 0 {
		return errNoServer
	}
	body := batchBody(lines)
	var errs []error
	for i := range urls {
		idx := (r.preferred + i) % len(urls)
		if err := r.postTo(ctx, urls[idx], body); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		r.preferred = idx
		return nil
	}
	return errors.Join(errs...)
}

// batchBody is the JSON of a cluster.ResultBatch of the results whose
// encodings (json.Marshal of each) are lines, as json.Marshal writes it.
func batchBody(lines [][]byte) []byte {
	const head, tail = `{"results":[`, `]}`
	size := len(head) + len(tail) + len(lines)
	for _, l := range lines {
		size += len(l)
	}
	body := make([]byte, 0, size)
	body = append(body, head...)
	for i, l := range lines {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, l...)
	}
	return append(body, tail...)
}

func (r *reporter) postTo(ctx context.Context, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+ResultsPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post results to %s: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("post results to %s: %w", base, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post results to %s: %s: %s", base, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// deleteRunKeys deletes the queued run keys, one txn per up to the txn
// limit, then lets the spool forget the results delivered before.
func (r *reporter) deleteRunKeys(ctx context.Context) error {
	r.mu.Lock()
	ids := r.deletes[:len(r.deletes):len(r.deletes)]
	acks := r.spoolAcks
	r.mu.Unlock()
	ops := make([]clientv3.Op, len(ids))
	for i, id := range ids {
		ops[i] = clientv3.OpDelete(r.keys.Run(r.node, id))
	}
	if _, err := r.txns.commit(ctx, r.etcd, ops, func(from, n int) {
		r.mu.Lock()
		r.deletes = r.deletes[n:]
		if len(r.deletes) == 0 {
			r.deletes = nil
		}
		r.mu.Unlock()
		r.onDeleted(ids[from : from+n])
	}); err != nil {
		return fmt.Errorf("delete run keys: %w", err)
	}
	if acks > 0 {
		r.mu.Lock()
		r.spoolAcks -= acks
		if r.spool != nil {
			if err := r.spool.Ack(acks); err != nil {
				r.dropSpoolLocked(err)
			}
		}
		r.mu.Unlock()
	}
	return nil
}

// stop ends the loop, then tries until ctx is done to deliver what is
// queued; what is left stays in the spool (if any).
func (r *reporter) stop(ctx context.Context) {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	var bo backoff
	for !r.flush(ctx) {
		if !waitctx.Sleep(ctx, bo.next()) {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if len(r.queue) > 0 {
		spilled := 0
		if r.spool != nil {
			spilled = r.spool.Spilled()
		}
		r.log.Error("agent: stopping with undelivered results", "results", len(r.queue)+spilled, "spooled", r.spool != nil)
	}
	if r.spool != nil {
		if err := r.spoolTailLocked(len(r.queue), nil); err != nil {
			r.log.Error("agent: writing undelivered results to the spool", "error", err)
		}
		if err := r.spool.Close(); err != nil {
			r.log.Error("agent: closing result spool", "error", err)
		}
		r.setSpoolLocked(nil)
	}
}
