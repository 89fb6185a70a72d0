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
	"github.com/cronix/cronix/node/trust"
)

// intake takes the fires dispatched to this node: everything already under
// the run prefix, then every later PUT from the next revision on, so no
// dispatch is missed or seen twice by the watch. When the watch breaks
// (compaction, lost etcd leader) it lists again and watches again; the
// fire-id dedupe makes the overlap harmless.
func (a *Agent) intake(ctx context.Context) {
	defer close(a.intakeDone)
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
				sleepCtx(ctx, bo.next())
			}
			continue
		}
		if !a.acceptAll(ctx, resp.Kvs) {
			return
		}
		wch := a.etcd.Watch(clientv3.WithRequireLeader(ctx), prefix,
			clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
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
			sleepCtx(ctx, bo.next())
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
	workers := min(runtime.GOMAXPROCS(0), len(kvs)/minIntakeShard)
	if workers <= 1 {
		for _, kv := range kvs {
			if !a.accept(ctx, kv) {
				return false
			}
		}
		return true
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
			for _, kv := range shard {
				if stopped.Load() || !a.accept(ctx, kv) {
					stopped.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return !stopped.Load()
}

// minIntakeShard is the fewest fires per intake goroutine: smaller
// responses are accepted by the intake goroutine alone.
const minIntakeShard = 16

// accept verifies one dispatch (trust.Guard: signature and term), decodes
// it and starts it unless this process already has it. A refused record is
// deleted and reported, never run. It waits for a free run slot; it returns
// false when ctx ends first.
func (a *Agent) accept(ctx context.Context, kv *mvccpb.KeyValue) bool {
	keyFire := cluster.LastSegment(string(kv.Key))
	body, term, ok := a.open(ctx, kv)
	if !ok {
		return ctx.Err() == nil
	}
	d, err := cluster.DecodeDispatch(body, keyFire, term)
	if err != nil {
		d = cluster.Dispatch{FireID: keyFire, Job: cluster.JobConfig{}}
		d.Job.JobID, _ = cluster.JobIDOfFire(keyFire)
	}
	ok, replay := a.claim(d.FireID)
	if !ok {
		if replay {
			a.log.Info("agent: dropping re-dispatch of a fire already run", "fire_id", d.FireID)
			a.reporter.forget(d.FireID)
		}
		return true
	}
	if err != nil {
		a.log.Error("agent: malformed dispatch", "key", string(kv.Key), "error", err)
		res := a.newResult(d, cluster.StatusFailed)
		res.Message = "malformed dispatch: " + err.Error()
		a.reporter.enqueue(res)
		a.finished(d.FireID)
		return true
	}
	e, start := a.admit(d, time.Now())
	if !start {
		return true // queued behind a running fire of its job, skipped or killed
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		a.unadmit(e) // not started; its key stays for the next start
		return false
	}
	a.runs.Add(1)
	go a.run(e)
	return true
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
		if !sleepCtx(ctx, time.Second) {
			return nil, 0, false
		}
	}
}
