package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// intake takes the fires dispatched to this node: everything already under
// the run prefix, then every later PUT from the next revision on, so no
// dispatch is missed or seen twice by the watch. When the watch breaks
// (compaction, lost etcd leader) it lists again and watches again; the
// fire-id dedupe makes the overlap harmless.
func (a *Agent) intake(ctx context.Context) {
	defer close(a.intakeDone)
	prefix := a.cfg.Keys.RunPrefix(a.cfg.UUID)
	var bo backoff
	for ctx.Err() == nil {
		resp, err := a.etcd.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("agent: listing dispatched fires", "prefix", prefix, "error", err)
				sleepCtx(ctx, bo.next())
			}
			continue
		}
		for _, kv := range resp.Kvs {
			if !a.accept(ctx, kv) {
				return
			}
		}
		wch := a.etcd.Watch(clientv3.WithRequireLeader(ctx), prefix,
			clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wresp := range wch {
			if err := wresp.Err(); err != nil {
				a.log.Warn("agent: dispatch watch broke; listing again", "error", err)
				break
			}
			bo.reset()
			for _, ev := range wresp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				if !a.accept(ctx, ev.Kv) {
					return
				}
			}
		}
		if ctx.Err() == nil {
			sleepCtx(ctx, bo.next())
		}
	}
}

// accept decodes one dispatch and starts it unless this process already has
// it. It waits for a free run slot; it returns false when ctx ends first.
func (a *Agent) accept(ctx context.Context, kv *mvccpb.KeyValue) bool {
	keyFire := cluster.LastSegment(string(kv.Key))
	var d cluster.Dispatch
	err := json.Unmarshal(kv.Value, &d)
	if err == nil && d.FireID == "" {
		d.FireID = keyFire
	}
	if err == nil && d.FireID != keyFire {
		err = fmt.Errorf("fire id %q does not match its key", d.FireID)
	}
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
