package agent

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// procKey is the proc key of one long run: written once the run passes
// ProcThreshold, under the registration lease, and deleted when it ends.
// The writes go through the agent's procWriter, which batches them.
type procKey struct {
	w       *procWriter
	e       *execution
	started time.Time
	timer   *time.Timer

	mu    sync.Mutex
	ended bool   // stop was called
	key   string // set once its put committed
}

// startProc arms the proc key of a run that just started.
func (a *Agent) startProc(e *execution, started time.Time) *procKey {
	p := &procKey{w: a.procs, e: e, started: started}
	p.timer = time.AfterFunc(a.cfg.ProcThreshold, p.register)
	return p
}

// register queues the proc key's put, unless the run ended already.
func (p *procKey) register() {
	p.mu.Lock()
	ended := p.ended
	p.mu.Unlock()
	if !ended {
		p.w.put(p)
	}
}

// stop ends the proc key: a put still queued is dropped, a written key is
// queued for deletion, and one in flight is deleted by the writer once its
// txn returns.
func (p *procKey) stop() {
	p.timer.Stop()
	p.mu.Lock()
	p.ended = true
	key := p.key
	p.mu.Unlock()
	if key != "" {
		p.w.del(key)
	}
}

// procWriter writes and deletes the node's proc keys, batched: what was
// queued while a txn was in flight goes in the next one (one txn per up to
// MaxTxnOps operations). A tick's batch of runs that all pass
// ProcThreshold together (a slow handler, a loaded machine) then costs a
// few etcd txns instead of one put and one delete per run, which at
// thousands of runs had etcd answering in hundreds of milliseconds and
// delayed the next tick's dispatch. A failed put leaves its run without a
// proc key (it can still be killed through a kill key); a failed delete
// leaves the key to the registration lease, as an unbatched one did.
type procWriter struct {
	a *Agent

	mu   sync.Mutex
	puts []*procKey
	dels []string

	wake chan struct{}
	bg   background

	beforePut func() // tests: called once flush has taken its puts, before their txn
}

func newProcWriter(a *Agent) *procWriter {
	return &procWriter{a: a, wake: make(chan struct{}, 1)}
}

func (w *procWriter) put(p *procKey) {
	w.mu.Lock()
	w.puts = append(w.puts, p)
	w.mu.Unlock()
	signal(w.wake)
}

func (w *procWriter) del(key string) {
	w.mu.Lock()
	w.dels = append(w.dels, key)
	w.mu.Unlock()
	signal(w.wake)
}

// start runs the writer until stop.
func (w *procWriter) start(ctx context.Context) {
	w.bg.start(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
				w.flush(ctx)
			}
		}
	})
}

// stop ends the writer after one last flush (the deletions of the runs
// that ended last; what fails is left to the registration lease, which
// the agent revokes next).
func (w *procWriter) stop(ctx context.Context) {
	if w.bg.stop() {
		w.flush(ctx)
	}
}

// flush writes what is queued: deletions first, then the puts of runs not
// ended meanwhile.
func (w *procWriter) flush(ctx context.Context) {
	w.mu.Lock()
	puts, dels := w.puts, w.dels
	w.puts, w.dels = nil, nil
	w.mu.Unlock()

	if len(dels) > 0 {
		ops := make([]clientv3.Op, len(dels))
		for i, key := range dels {
			ops[i] = clientv3.OpDelete(key)
		}
		if _, err := w.commit(ctx, ops); err != nil {
			w.a.log.Warn("agent: deleting proc keys (their lease will remove them)", "keys", len(dels), "error", err)
		}
	}

	lease := w.a.reg.leaseID()
	ops := make([]clientv3.Op, 0, len(puts))
	keys := make([]string, 0, len(puts))
	taken := puts[:0]
	for _, p := range puts {
		key := w.a.cfg.Keys.Proc(w.a.cfg.UUID, p.e.d.Job.JobID, p.e.num)
		v, err := json.Marshal(cluster.ProcInfo{PID: p.e.num, FireID: p.e.d.FireID, Started: p.started})
		if err != nil {
			w.a.log.Error("agent: encode proc info", "error", err)
			continue
		}
		p.mu.Lock()
		if !p.ended {
			taken = append(taken, p)
			ops = append(ops, clientv3.OpPut(key, string(v), clientv3.WithLease(lease)))
			keys = append(keys, key)
		}
		p.mu.Unlock()
	}
	if len(ops) == 0 {
		return
	}
	if w.beforePut != nil {
		w.beforePut()
	}
	applied, err := w.commit(ctx, ops)
	if err != nil {
		w.a.log.Warn("agent: registering proc keys", "keys", len(ops)-applied, "error", err)
	}
	var late []string // runs that ended while their put was in flight
	for i, p := range taken[:applied] {
		p.mu.Lock()
		p.key = keys[i]
		if p.ended {
			late = append(late, keys[i])
		}
		p.mu.Unlock()
	}
	if len(late) > 0 {
		w.mu.Lock()
		w.dels = append(w.dels, late...)
		w.mu.Unlock()
		signal(w.wake)
	}
}

// commit applies ops in txns of at most the agent's txn limit and returns
// how many it applied.
func (w *procWriter) commit(ctx context.Context, ops []clientv3.Op) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return w.a.txns.commit(ctx, w.a.etcd, ops, nil)
}
