package agent

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/node/trust"
)

// takeFires takes the fires dispatched to this node: everything already under
// the run prefix, then every later PUT from the next revision on, so no
// dispatch is missed or seen twice by the watch. When the watch breaks
// (compaction, lost etcd leader) it lists again and watches again; the
// fire-id dedupe makes the overlap harmless.
func (a *Agent) takeFires(ctx context.Context) {
	held := make(chan struct{})
	go func() {
		defer close(held)
		a.releaseHeld(ctx)
	}()
	defer func() { <-held }()
	prefix := a.cfg.Keys.RunPrefix(a.cfg.UUID)
	var (
		bo  backoff
		kvs []*mvccpb.KeyValue
	)
	for ctx.Err() == nil {
		resp, err := a.etcd.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("agent: listing dispatched fires", "prefix", prefix, "error", err)
				waitctx.Sleep(ctx, bo.next())
			}
			continue
		}
		if !a.acceptAll(ctx, resp.Kvs) {
			return
		}
		// Deletions are not read (this node's own reporter makes almost
		// all of them): filtered by etcd, they cost no watch response.
		wch := a.etcd.Watch(clientv3.WithRequireLeader(ctx), prefix,
			clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterDelete())
		for wresp := range wch {
			if err := wresp.Err(); err != nil {
				a.log.Warn("agent: dispatch watch broke; listing again", "error", err)
				break
			}
			bo.reset()
			kvs = kvs[:0]
			for _, ev := range wresp.Events {
				if ev.Type == clientv3.EventTypePut {
					kvs = append(kvs, ev.Kv)
				}
			}
			if !a.acceptAll(ctx, kvs) {
				return
			}
		}
		if ctx.Err() == nil {
			waitctx.Sleep(ctx, bo.next())
		}
	}
}

// acceptAll accepts the fires of one listing or watch response. The fires
// are sharded by job id over up to GOMAXPROCS goroutines, each accepting its
// shard in order, so the fires of one job are admitted in dispatch order
// (the block strategies depend on it) while the verification, decoding and
// admission of different jobs' fires overlap: the last fire of a large
// batch does not wait for every check before it. It returns when every
// fire was accepted (or ctx ended), so responses are still taken one after
// the other; false when ctx ended first.
func (a *Agent) acceptAll(ctx context.Context, kvs []*mvccpb.KeyValue) bool {
	a.hold.noteArrivals(kvs, time.Now())
	workers := min(runtime.GOMAXPROCS(0), len(kvs)/minIntakeShard)
	if workers <= 1 {
		return a.acceptShard(ctx, kvs)
	}
	shards := make([][]*mvccpb.KeyValue, workers)
	for _, kv := range kvs {
		job, _ := cluster.JobIDOfFire(cluster.LastSegment(string(kv.Key))) // a malformed id goes to shard 0
		i := uint64(job) % uint64(workers)
		shards[i] = append(shards[i], kv)
	}
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
	)
	for _, shard := range shards {
		wg.Go(func() {
			if !a.acceptShard(ctx, shard) {
				stopped.Store(true)
			}
		})
	}
	wg.Wait()
	return !stopped.Load()
}

// minIntakeShard is the fewest fires per intake goroutine: smaller
// responses are accepted by the intake goroutine alone.
const minIntakeShard = 16

// intakeChunk is how many fires are verified and decoded before they are
// claimed and admitted together, under one acquisition of a.mu (which
// finishing runs contend for at the same moment).
const intakeChunk = 64

// acceptShard accepts kvs in order, intakeChunk at a time; false when ctx
// ended first.
func (a *Agent) acceptShard(ctx context.Context, kvs []*mvccpb.KeyValue) bool {
	for len(kvs) > 0 {
		n := min(len(kvs), intakeChunk)
		if !a.acceptChunk(ctx, kvs[:n]) {
			return false
		}
		kvs = kvs[n:]
	}
	return true
}

// opened is a dispatch that passed the Guard; err is set when its body
// could not be decoded.
type opened struct {
	kv  *mvccpb.KeyValue
	d   cluster.Dispatch
	err error
}

// acceptChunk verifies each dispatch of kvs (trust.Guard: signature and
// term) and decodes it; a fire dispatched ahead (StartAt still to come)
// goes to the hold until then; the others are admitted now (admitAll).
// A refused record is deleted and reported, never run. False when ctx
// ended first.
func (a *Agent) acceptChunk(ctx context.Context, kvs []*mvccpb.KeyValue) bool {
	fires := make([]opened, 0, len(kvs))
	for _, kv := range kvs {
		keyFire := cluster.LastSegment(string(kv.Key))
		body, term, ok := a.open(ctx, kv)
		if !ok {
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		d, err := cluster.DecodeDispatch(body, keyFire, term)
		if err != nil {
			d = cluster.Dispatch{FireID: keyFire, Job: cluster.JobConfig{}}
			d.Job.JobID, _ = cluster.JobIDOfFire(keyFire)
		}
		fires = append(fires, opened{kv: kv, d: d, err: err})
	}
	fires = a.holdEarly(fires)
	return a.admitAll(ctx, fires)
}

// admitAll claims and admits fires (verified and decoded, due now) under
// one lock, in order, and starts those their job's lane lets run now. It
// waits for a free run slot for each start; false when ctx ends first.
func (a *Agent) admitAll(ctx context.Context, fires []opened) bool {
	// What to do once a.mu is released, in dispatch order: start e, or
	// run after (report a fire that ended here, forget a replay).
	type step struct {
		e     *execution
		after func()
	}
	steps := make([]step, 0, len(fires))
	received := time.Now()
	a.mu.Lock()
	for _, f := range fires {
		ok, replay := a.claimLocked(f.d.FireID)
		if !ok {
			if replay {
				id := f.d.FireID
				steps = append(steps, step{after: func() {
					a.log.Info("agent: dropping re-dispatch of a fire already run", "fire_id", id)
					a.reporter.forget(id)
				}})
			}
			continue
		}
		if f.err != nil {
			steps = append(steps, step{after: func() {
				a.log.Error("agent: malformed dispatch", "key", string(f.kv.Key), "error", f.err)
				res := a.newResult(f.d, cluster.StatusFailed)
				res.Message = "malformed dispatch: " + f.err.Error()
				a.reporter.enqueue(res)
				a.finished(f.d.FireID)
			}})
			continue
		}
		e, start, after := a.admitLocked(f.d, received)
		if !start {
			e = nil // queued behind a running fire of its job, skipped or killed
		}
		if e != nil || after != nil {
			steps = append(steps, step{e: e, after: after})
		}
	}
	a.mu.Unlock()

	// The fires that have a run slot are journalled and started together;
	// before waiting for a slot, those gathered so far are started.
	var batch []*execution
	for i, st := range steps {
		if st.after != nil {
			st.after()
		}
		if st.e == nil {
			continue
		}
		select {
		case a.sem <- struct{}{}:
		default:
			a.startBatch(batch)
			batch = batch[:0]
			select {
			case a.sem <- struct{}{}:
			case <-ctx.Done():
				for _, rest := range steps[i:] {
					if rest.e != nil {
						a.unadmit(rest.e) // not started; its key stays for the next start
					}
				}
				return false
			}
		}
		batch = append(batch, st.e)
	}
	a.startBatch(batch)
	return true
}

// startBatch starts fires that hold a run slot: their start lines go to
// the journal in one write (startLog.startedBatch) before any of their
// handlers can be called, then each runs in its own goroutine.
func (a *Agent) startBatch(es []*execution) {
	if len(es) == 0 {
		return
	}
	if a.starts != nil {
		now := time.Now().UTC()
		entries := make([]startEntry, len(es))
		for i, e := range es {
			entries[i] = startEntry{FireID: e.d.FireID, JobID: e.d.Job.JobID, Trigger: e.d.Trigger,
				ScheduledAt: e.d.ScheduledAt, StartedAt: now}
			e.journaled = true
		}
		if err := a.starts.startedBatch(entries); err != nil {
			a.log.Warn("agent: recording the start of fires", "fires", len(es), "error", err)
		}
	}
	for _, e := range es {
		a.runs.Add(1)
		go a.run(e)
	}
}

// open verifies a record through the Guard, retrying while the leader key
// cannot be read. ok is false when the record was refused (and handled:
// deleted, logged, reported) or ctx ended.
func (a *Agent) open(ctx context.Context, kv *mvccpb.KeyValue) (body []byte, term uint64, ok bool) {
	for {
		body, term, err := a.guard.Open(ctx, kv)
		switch {
		case err == nil:
			return body, term, true
		case trust.Refused(err):
			a.guard.Refuse(ctx, kv, err)
			return nil, 0, false
		case ctx.Err() != nil:
			return nil, 0, false
		}
		a.log.Warn("agent: checking a record", "key", string(kv.Key), "error", err)
		if !waitctx.Sleep(ctx, time.Second) {
			return nil, 0, false
		}
	}
}
