package scheduler

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// runRef is what a run or proc key says: which node runs which job.
type runRef struct {
	node  string
	jobID int64
}

// runCache mirrors the pending run keys (/Cronix/run/<node>/<fire_id>) and
// process keys (/Cronix/proc/<node>/<job_id>/<pid>) of every node, fed by
// watches, so BUSYOVER and fixed_delay never read etcd per fire.
type runCache struct {
	runs  map[string]runRef // run key → node, job
	procs map[string]runRef // proc key → node, job
	count map[runRef]int    // (node, job) → run + proc keys
}

func newRunCache() runCache {
	return runCache{runs: map[string]runRef{}, procs: map[string]runRef{}, count: map[runRef]int{}}
}

// busy reports whether the node has a pending run or a process of the job.
func (c *runCache) busy(node string, jobID int64) bool { return c.count[runRef{node, jobID}] > 0 }

func (c *runCache) put(m map[string]runRef, key string, r runRef) {
	if _, ok := m[key]; ok {
		return
	}
	m[key] = r
	c.count[r]++
}

func (c *runCache) del(m map[string]runRef, key string) (runRef, bool) {
	r, ok := m[key]
	if !ok {
		return runRef{}, false
	}
	delete(m, key)
	if c.count[r]--; c.count[r] <= 0 {
		delete(c.count, r)
	}
	return r, true
}

// pendingRuns lists the run keys of a job.
func (c *runCache) pendingRuns(jobID int64) []string {
	var out []string
	for k, r := range c.runs {
		if r.jobID == jobID {
			out = append(out, k)
		}
	}
	return out
}

func (l *loop) parseRun(key string) (runRef, bool) {
	node, fireID, err := l.cfg.Keys.ParseRunKey(key)
	if err != nil {
		return runRef{}, false
	}
	id, err := cluster.JobIDOfFire(fireID)
	if err != nil {
		return runRef{}, false
	}
	return runRef{node, id}, true
}

func (l *loop) parseProc(key string) (runRef, bool) {
	node, id, _, err := l.cfg.Keys.ParseProcKey(key)
	if err != nil {
		return runRef{}, false
	}
	return runRef{node, id}, true
}

// resyncRuns reads every pending run key and then watches run changes.
// Runs that ended while the watch was down are found by the difference.
func (l *loop) resyncRuns(ctx context.Context) error {
	l.runW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.RunRoot(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list pending runs: %w", err)
	}
	present := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if r, ok := l.parseRun(key); ok {
			present[key] = true
			l.runs.put(l.runs.runs, key, r)
		}
	}
	for key := range l.runs.runs {
		if !present[key] {
			l.runEnded(key)
		}
	}
	storeMax(&l.seen.runs, resp.Header.Revision)
	// Only deletions: this leader is the only writer of run keys once it
	// holds the fence (a deposed leader's writes are refused), and it puts
	// every key it dispatches into the cache itself (newFires,
	// checkReplays) before the key exists. A put event would carry the
	// whole signed dispatch, decoded here only to be dropped: one more copy
	// of every fire through etcd's gRPC (encode, send, decode) per fire.
	l.startWatch(ctx, &l.runW, l.cfg.Keys.RunRoot(), resp.Header.Revision+1, clientv3.WithFilterPut())
	return nil
}

// resyncProcs reads every process key and then watches process changes.
func (l *loop) resyncProcs(ctx context.Context) error {
	l.procW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.ProcRoot(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	for key := range l.runs.procs {
		l.runs.del(l.runs.procs, key)
	}
	for _, kv := range resp.Kvs {
		if r, ok := l.parseProc(string(kv.Key)); ok {
			l.runs.put(l.runs.procs, string(kv.Key), r)
		}
	}
	storeMax(&l.seen.procs, resp.Header.Revision)
	l.startWatch(ctx, &l.procW, l.cfg.Keys.ProcRoot(), resp.Header.Revision+1)
	return nil
}

func (l *loop) onRuns(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if ctx.Err() != nil {
		return
	}
	if watchBroken(wr, ok) {
		if err := l.resyncRuns(ctx); err != nil {
			l.resyncLater(ctx, syncRuns, &l.runW, err)
		}
		return
	}
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE { // the watch filters puts (resyncRuns)
			l.runEnded(string(ev.Kv.Key))
		}
	}
	if n := len(wr.Events); n > 0 {
		storeMax(&l.seen.runs, wr.Events[n-1].Kv.ModRevision)
	}
}

func (l *loop) onProcs(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if ctx.Err() != nil {
		return
	}
	if watchBroken(wr, ok) {
		if err := l.resyncProcs(ctx); err != nil {
			l.resyncLater(ctx, syncProcs, &l.procW, err)
		}
		return
	}
	for _, ev := range wr.Events {
		key := string(ev.Kv.Key)
		if ev.Type == mvccpb.PUT {
			if r, ok := l.parseProc(key); ok {
				l.runs.put(l.runs.procs, key, r)
			}
			continue
		}
		l.runs.del(l.runs.procs, key)
	}
	if n := len(wr.Events); n > 0 {
		storeMax(&l.seen.procs, wr.Events[n-1].Kv.ModRevision)
	}
}

// runEnded handles a run key that is gone: its node stored the result. A
// fixed_delay job waiting for it is scheduled delay after now.
func (l *loop) runEnded(key string) {
	r, ok := l.runs.del(l.runs.runs, key)
	if !ok {
		return
	}
	e, ok := l.entries[r.jobID]
	if !ok || e.waitRuns == nil || !e.waitRuns[key] {
		return
	}
	delete(e.waitRuns, key)
	if len(e.waitRuns) > 0 {
		return
	}
	e.waitRuns = nil
	if e.delay > 0 && !e.inFlight {
		e.next = l.afterDelay(e, l.clock.Now())
		l.heap.set(e)
	}
}
