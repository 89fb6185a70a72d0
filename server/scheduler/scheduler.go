package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/server/dispatch"
)

// ErrRunning is returned by Run while another Run of the same Scheduler is
// active.
var ErrRunning = errors.New("scheduler: already running")

// Scheduler is the trigger loop. It keeps no state between terms: every Run
// reloads jobs, cursors, nodes and placements.
type Scheduler struct {
	cfg     Config
	log     *slog.Logger
	running atomic.Bool
	seen    seenRevs
}

// seenRevs is the etcd revision up to which the running loop has applied
// node, run and process changes (tests wait on it).
// groups is the revision of the latest group signal applied; beats counts
// completed FAILOVER beat rounds; firing is true from the end of a loop's
// start-up (fence claimed, jobs and state loaded) until its Run returns.
type seenRevs struct {
	nodes, runs, procs, groups, beats atomic.Int64
	firing                            atomic.Bool
}

func storeMax(a *atomic.Int64, rev int64) {
	for {
		old := a.Load()
		if rev <= old || a.CompareAndSwap(old, rev) {
			return
		}
	}
}

// New returns a Scheduler; Run starts it for a term.
func New(cfg Config) *Scheduler {
	cfg.setDefaults()
	return &Scheduler{cfg: cfg, log: cfg.Logger}
}

// Run claims the leader fence for term and fires jobs until ctx is
// cancelled (leadership lost or shutdown), returning nil then. It returns
// an error wrapping dispatch.ErrFenced as soon as a write is refused
// because another server claimed a newer term, and a configuration error
// before starting. Transient failures (SQL, etcd, raft) are retried with
// backoff without losing or repeating fires.
func (s *Scheduler) Run(ctx context.Context, term uint64) error {
	if err := s.cfg.Validate(); err != nil {
		return err
	}
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	defer s.seen.firing.Store(false)
	l := newLoop(s.cfg, term, &s.seen)
	defer l.stop()
	s.log.Info("trigger loop starting", "term", term)
	err := l.run(ctx)
	switch {
	case errors.Is(err, dispatch.ErrFenced):
		s.log.Warn("trigger loop fenced: another server leads", "term", term, "err", err)
		return err
	case ctx.Err() != nil:
		s.log.Info("trigger loop stopped", "term", term)
		return nil
	default:
		return err
	}
}

// Firing reports whether a Run is past its start-up: it holds the fence
// for its term and has loaded the jobs, cursors, nodes and runs it fires
// from. At 100,000 jobs loading takes a second or two; a Run that was
// fenced or is restarting after an error is not firing either.
func (s *Scheduler) Firing() bool { return s.seen.firing.Load() }

// watch is one etcd watch of a prefix; ch is nil while it must be resynced.
type watch struct {
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

func (w *watch) close() {
	if w.cancel != nil {
		w.cancel()
	}
	w.ch, w.cancel = nil, nil
}

// Names of the resyncable watches.
const (
	syncNodes   = "nodes"
	syncSignals = "signals"
	syncOnce    = "once"
	syncRuns    = "runs"
	syncProcs   = "procs"
	syncGroups  = "groups"
)

// forgetDelay bounds how long the cursor and route state of a deleted job
// wait for a tick's raft entry to ride along with.
const forgetDelay = time.Second

func (l *loop) startWatch(ctx context.Context, w *watch, prefix string, rev int64, opts ...clientv3.OpOption) {
	w.close()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w.ch = l.cfg.Etcd.Watch(wctx, prefix, append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev)}, opts...)...)
	w.cancel = cancel
}

// run is the loop body: start-up, then one select over time and watches.
// All loop state is owned by this one goroutine.
func (l *loop) run(ctx context.Context) error {
	if err := l.startup(ctx); err != nil {
		return err
	}
	l.seen.firing.Store(true)
	l.beat.start(ctx)
	for {
		l.arm()
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.timer.C():
			err = l.wake(ctx)
		case <-l.relist.C():
			if err := l.relistJobs(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("relisting jobs failed", "err", err)
			}
			if err := l.relistGroups(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("relisting groups failed", "err", err)
			}
			l.pruneAhead(l.clock.Now())
			l.relist.Reset(l.cfg.RelistInterval)
		case wr, ok := <-l.nodeW.ch:
			l.onNodes(ctx, wr, ok)
		case wr, ok := <-l.sigW.ch:
			l.onSignals(ctx, wr, ok)
			err = l.flushForgotten(ctx)
		case wr, ok := <-l.onceW.ch:
			err = l.onOnce(ctx, wr, ok)
		case wr, ok := <-l.runW.ch:
			l.onRuns(ctx, wr, ok)
		case wr, ok := <-l.procW.ch:
			l.onProcs(ctx, wr, ok)
		case wr, ok := <-l.grpW.ch:
			l.onGroups(ctx, wr, ok)
		case wr, ok := <-l.leaderW.ch:
			err = l.onLeader(ctx, wr, ok)
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := l.flushCancels(ctx); err != nil {
			return err
		}
		if err := l.reconcile(ctx); err != nil {
			return err
		}
	}
}

// startup claims the fence and loads everything, retrying transient errors.
func (l *loop) startup(ctx context.Context) error {
	steps := []struct {
		what string
		fn   func() error
	}{
		{"claim leader key", func() error { return l.cfg.Dispatcher.Claim(ctx, l.term) }},
		{"watch leader key", func() error { return l.watchLeader(ctx) }},
		{"load nodes", func() error { return l.resyncNodes(ctx) }},
		{"load pending runs", func() error { return l.resyncRuns(ctx) }},
		{"load processes", func() error { return l.resyncProcs(ctx) }},
		{"load groups", func() error { return l.resyncGroups(ctx) }},
		{"load route state", func() error { l.loadRoutes(); return nil }},
		{"load jobs", func() error { return l.loadJobs(ctx) }},
		{"load placements", func() error { return l.loadPlaced(ctx) }},
		{"load once requests", func() error { return l.resyncOnce(ctx) }},
	}
	for _, st := range steps {
		if err := l.retry(ctx, st.what, st.fn); err != nil {
			return err
		}
	}
	l.timer = l.clock.NewTimer(time.Hour)
	l.timer.Stop()
	l.relist = l.clock.NewTimer(l.cfg.RelistInterval)
	if err := l.reconcile(ctx); err != nil {
		return err
	}
	return l.commit(ctx)
}

// flushForgotten writes the deletion of forgotten jobs' cursors and route
// state now unless a tick due within forgetDelay will carry it.
func (l *loop) flushForgotten(ctx context.Context) error {
	if len(l.forget) == 0 || len(l.pending) > 0 || !l.retryAt.IsZero() {
		return nil
	}
	if e := l.heap.peek(); e != nil && !e.next.After(l.clock.Now().Add(forgetDelay)) {
		return nil
	}
	return l.commit(ctx)
}

// retry runs fn until it succeeds, is fenced, or ctx ends.
func (l *loop) retry(ctx context.Context, what string, fn func() error) error {
	backoff := l.cfg.RetryMin
	for {
		err := fn()
		if err == nil || errors.Is(err, dispatch.ErrFenced) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.log.Warn("trigger loop start-up step failed; retrying", "step", what, "err", err, "backoff", backoff)
		t := l.clock.NewTimer(backoff)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(2*backoff, l.cfg.RetryMax)
	}
}

// failed logs a transient failure and schedules a retry with backoff.
func (l *loop) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	if l.backoff == 0 {
		l.backoff = l.cfg.RetryMin
	} else {
		l.backoff = min(2*l.backoff, l.cfg.RetryMax)
	}
	at := l.clock.Now().Add(l.backoff)
	if l.retryAt.IsZero() || at.Before(l.retryAt) {
		l.retryAt = at
	}
	l.log.Warn("trigger loop step failed; retrying", "step", what, "err", err, "backoff", l.backoff)
}

// arm sets the timer to the next thing to do: the retry time while a batch
// is pending or something must be retried, else the earliest fire.
func (l *loop) arm() {
	var wake time.Time
	if len(l.pending) == 0 {
		if e := l.heap.peek(); e != nil {
			wake = e.next.Add(-l.ahead())
		}
	}
	if !l.retryAt.IsZero() && (wake.IsZero() || l.retryAt.Before(wake)) {
		wake = l.retryAt
	}
	if wake.IsZero() && len(l.pending) > 0 {
		wake = l.clock.Now()
	}
	if len(l.forget) > 0 {
		if at := l.clock.Now().Add(forgetDelay); wake.IsZero() || at.Before(wake) {
			wake = at
		}
	}
	l.timer.Stop()
	if !wake.IsZero() {
		l.timer.Reset(wake.Sub(l.clock.Now()))
	}
}

// wake runs due retries, then fires every due job in one batch.
func (l *loop) wake(ctx context.Context) error {
	now := l.clock.Now()
	if !l.retryAt.IsZero() && !now.Before(l.retryAt) {
		l.retryAt = time.Time{}
		for name, need := range l.needResync {
			if need {
				if err := l.resync(ctx, name); err != nil {
					return err
				}
			}
		}
		l.flushOnceDeletes(ctx)
	}
	return l.tick(ctx, now)
}

// resync re-reads and re-watches one watched prefix; it returns only
// ErrFenced (other failures are retried later).
func (l *loop) resync(ctx context.Context, name string) error {
	var err error
	switch name {
	case syncNodes:
		err = l.resyncNodes(ctx)
	case syncSignals:
		err = l.resyncSignals(ctx)
	case syncOnce:
		err = l.resyncOnce(ctx)
	case syncRuns:
		err = l.resyncRuns(ctx)
	case syncProcs:
		err = l.resyncProcs(ctx)
	case syncGroups:
		err = l.resyncGroups(ctx)
	case syncLeader:
		err = l.watchLeader(ctx)
	}
	if isFenced(err) {
		return err
	}
	if err != nil {
		l.needResync[name] = true
		l.failed(ctx, "resync "+name, err)
		return nil
	}
	l.needResync[name] = false
	return nil
}

// tick collects every job due at now, or within DispatchAhead of now
// (ahead), at most one fire per job, into the pending batch and commits it.
// A fire whose time is still to come is dispatched with StartAt = its time.
func (l *loop) tick(ctx context.Context, now time.Time) error {
	if len(l.pending) > 0 && !l.retryAt.IsZero() && now.Before(l.retryAt) {
		return nil // backing off
	}
	horizon := now.Add(l.ahead())
	collected := 0
	var missed misfireTally
	for e := l.heap.peek(); e != nil && !e.next.After(horizon); e = l.heap.peek() {
		l.heap.pop()
		e.inFlight = true
		var fs []*fire
		if e.delay == 0 && !e.next.After(now) && (e.misfired || e.next.Before(now.Add(-l.cfg.MisfireThreshold))) {
			var changed bool
			if fs, changed = l.misfire(e, e.next, now); changed {
				missed.add(e.job.MisfirePolicy, e.job.ID, e.next)
			}
		} else {
			fs = l.newFires(&e.job, e.next, "", "", now)
		}
		e.misfired = false
		for _, f := range fs {
			f.entry = e
		}
		l.pending = append(l.pending, fs...)
		collected += len(fs)
	}
	missed.report(l, now)
	if collected > 0 {
		l.lastBatch = collected
	}
	return l.commit(ctx)
}

// ahead is how long before their time fires are dispatched now, while
// every live node holds fires until their StartAt (cluster.FeatureStartAt;
// else 0): Config.DispatchAhead, or with Config.DispatchAheadMin set,
// a second per aheadFiresPerSecond fires of the last batch, at least
// DispatchAheadMin and at most DispatchAhead, brought forward when the
// write path needs it (writeAhead).
func (l *loop) ahead() time.Duration {
	if !l.holdOK {
		return 0
	}
	if lo := l.cfg.DispatchAheadMin; lo > 0 && lo < l.cfg.DispatchAhead {
		base := min(l.cfg.DispatchAhead, max(lo, time.Duration(l.lastBatch)*time.Second/aheadFiresPerSecond))
		return max(base, l.writeAhead(base))
	}
	return l.cfg.DispatchAhead
}

// writeAhead is how far ahead a batch must start for the node to get it
// at least half of base before its time: the slowest of the last
// aheadWrites write paths (SQL insert and etcd dispatch, noteWrite) plus
// base/2, at most twice DispatchAhead and MaxDispatchAhead. The size rule
// of ahead assumes a write path of about 100-250 ms for 3,000 fires; on a
// slower machine, or with a runs table whose per-job index no longer
// fits SQLite's cache, the insert alone took 400-650 ms and the dispatch
// 100-250 more, so batches committed 850 ms ahead reached the node
// after their time (3,000 http jobs/s, 180 s on a 2-core 2.1 GHz EPYC:
// p99 480 -> 279 ms, at the receiver's socket 385 -> 102 ms with a fixed
// 1.25 s; alternating runs without and with writeAhead: p99 2,783 and
// 340 ms against 287 and 615). It cannot help once the write path itself
// takes a second: the loop then falls behind (docs/performance.md, stop 33).
func (l *loop) writeAhead(base time.Duration) time.Duration {
	var slowest time.Duration
	for _, w := range l.writes {
		slowest = max(slowest, w)
	}
	if slowest == 0 {
		return 0
	}
	return min(slowest+base/2, 2*l.cfg.DispatchAhead, MaxDispatchAhead)
}

// noteWrite records how long a batch's write path took (writeAhead).
func (l *loop) noteWrite(d time.Duration) {
	l.writes[l.writeAt%aheadWrites] = d
	l.writeAt++
}

// aheadWrites is how many recent write paths writeAhead looks at: the
// slowest of a few, so one fast second does not undo it.
const aheadWrites = 4

// aheadFiresPerSecond sets how much earlier a batch is dispatched for
// each of its fires (a third of a millisecond), between
// Config.DispatchAheadMin and DispatchAhead. The leader's insert and etcd
// transaction and the node's intake take about this much of this 2-core
// machine per fire: 3,000 fires need the whole second
// (http, 3,000/s: p99 135 -> 123 ms, max 199 -> 141 ms with 1 s instead
// of 500 ms). A smaller batch is better dispatched later: that work then
// competes less with the previous second's runs (shell, 500/s: p50 267
// and 278 ms with 1 s, 244 and 250 ms with 500 ms).
const aheadFiresPerSecond = 3000

func (l *loop) stop() {
	for _, w := range []*watch{&l.nodeW, &l.sigW, &l.onceW, &l.runW, &l.procW, &l.grpW, &l.leaderW} {
		w.close()
	}
	l.beat.stop()
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.relist != nil {
		l.relist.Stop()
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf("scheduler: "+format, args...) }
