package agent

import (
	"bytes"
	"context"
	"encoding/json"
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
	// queueBytes is the approxSize of queue; queue is followed by the
	// spool's spilled results, if any.
	queueBytes int
	deletes    []string // fires whose run keys await deletion
	// spoolAcks counts delivered results the spool still holds, because
	// the run keys of their fires are not deleted yet.
	spoolAcks int
	spool     *spool.Spool
	closed    bool
	// spooled tells enqueue, before it takes mu, whether to encode the
	// result for the spool.
	spooled atomic.Bool

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

// enqueue queues a result for delivery. The result is encoded for the
// spool before taking mu, and mu is never held across an fsync (see
// syncSpool), so a finishing run does not wait for the disk.
func (r *reporter) enqueue(res cluster.RunResult) {
	var line []byte
	var encErr error
	if r.spooled.Load() {
		line, encErr = spool.Encode(res)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.log.Error("agent: result finished after shutdown is lost", "fire_id", res.FireID, "status", res.Status)
		return
	}
	size := approxSize(&res)
	if r.spool != nil {
		err := encErr
		if err == nil && line == nil { // the spool was set after the check above
			line, err = spool.Encode(res)
		}
		spill := r.memLimit > 0 && len(r.queue) > 0 && (r.spool.Spilled() > 0 || r.queueBytes+size > r.memLimit)
		switch {
		case err != nil:
		case !spill:
			err = r.spool.AppendEncoded(line)
		default:
			if r.spool.Spilled() == 0 {
				r.log.Warn("agent: undelivered results exceed the memory bound; newer ones wait in the spool only",
					"results", len(r.queue), "bytes", r.queueBytes)
			}
			err = r.spool.SpillEncoded(line)
		}
		if err != nil {
			r.dropSpoolLocked(err)
		} else if spill {
			signal(r.kick)
			return
		}
	}
	r.queue = append(r.queue, res)
	r.queueBytes += size
	if len(r.queue) >= r.batch {
		signal(r.kick)
	}
	signal(r.notify)
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
	r.spooled.Store(sp != nil)
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
		batch, full := r.peek()
		if len(batch) > 0 && (due > 0 || full) {
			if err := r.syncSpool(); err != nil {
				r.log.Warn("agent: syncing result spool", "error", err)
			}
			if err := r.post(ctx, batch); err != nil {
				r.log.Warn("agent: delivering results failed; will retry", "results", len(batch), "error", err)
				return false
			}
			due += r.ack(len(batch)) - len(batch) // spilled results read back are due too
		} else {
			batch = nil
		}
		if err := r.deleteRunKeys(ctx); err != nil {
			r.log.Warn("agent: deleting delivered run keys failed; will retry", "error", err)
			return false
		}
		if batch == nil {
			return true
		}
	}
}

// peek returns the oldest queued results that fit in one batch, and
// whether the batch is full (by count or by size).
func (r *reporter) peek() ([]cluster.RunResult, bool) {
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
	return r.queue[:n:n], n == r.batch || n < len(r.queue)
}

func approxSize(res *cluster.RunResult) int {
	return 400 + len(res.Output) + len(res.Message) + len(res.FireID) + len(res.Node)
}

// syncSpool makes every result queued so far durable. Under mu it only
// hands the spool's buffer to the file; the fsync runs without mu, so
// results keep being queued meanwhile (the next sync covers them: one fsync
// per delivery attempt, whatever the number of results). Only the loop's
// goroutine (or stop, after the loop ended) calls it, never concurrently
// with the spool's Ack.
func (r *reporter) syncSpool() error {
	r.mu.Lock()
	sp := r.spool
	if sp == nil {
		r.mu.Unlock()
		return nil
	}
	fsync, err := sp.Flush()
	if err != nil {
		r.dropSpoolLocked(err)
		r.mu.Unlock()
		return err
	}
	r.mu.Unlock()
	if err := fsync(); err != nil {
		r.mu.Lock()
		if r.spool == sp { // not dropped by enqueue meanwhile
			r.dropSpoolLocked(err)
		}
		r.mu.Unlock()
		return err
	}
	return nil
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

// post sends one batch, trying each known server once, starting with the
// one that answered last.
func (r *reporter) post(ctx context.Context, batch []cluster.RunResult) error {
	urls := r.servers()
	if len(urls) == 0 {
		return errNoServer
	}
	body, err := json.Marshal(cluster.ResultBatch{Results: batch})
	if err != nil {
		return fmt.Errorf("encode result batch: %w", err)
	}
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
		if err := r.spool.Close(); err != nil {
			r.log.Error("agent: closing result spool", "error", err)
		}
		r.setSpoolLocked(nil)
	}
}
