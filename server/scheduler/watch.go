package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

func withPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

// --- nodes

// resyncNodes reads every live node and watches node changes after that.
func (l *loop) resyncNodes(ctx context.Context) error {
	l.nodeW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.NodePrefix(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	l.nodes = map[string]cluster.NodeInfo{}
	for _, kv := range resp.Kvs {
		l.putNode(kv)
	}
	l.rebuildGroups()
	storeMax(&l.seen.nodes, resp.Header.Revision)
	l.startWatch(ctx, &l.nodeW, l.cfg.Keys.NodePrefix(), resp.Header.Revision+1)
	l.log.Info("nodes loaded", "nodes", len(l.nodes))
	return nil
}

func (l *loop) putNode(kv *mvccpb.KeyValue) {
	uuid := cluster.LastSegment(string(kv.Key))
	var n cluster.NodeInfo
	if err := json.Unmarshal(kv.Value, &n); err != nil {
		l.log.Warn("ignoring malformed node registration", "node", uuid, "err", err)
		delete(l.nodes, uuid)
		return
	}
	n.UUID = uuid
	l.nodes[uuid] = n
}

// watchBroken reports whether a watch response means the watch must be
// re-established (closed channel, compaction, lost etcd leader).
func watchBroken(wr clientv3.WatchResponse, ok bool) bool {
	return !ok || wr.Err() != nil || wr.Canceled
}

// resyncLater marks a watch for resync at the next retry.
func (l *loop) resyncLater(ctx context.Context, name string, w *watch, err error) {
	w.close()
	l.needResync[name] = true
	l.failed(ctx, "watch "+name, err)
}

func (l *loop) onNodes(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if ctx.Err() != nil {
		return
	}
	if watchBroken(wr, ok) {
		if err := l.resyncNodes(ctx); err != nil {
			l.resyncLater(ctx, syncNodes, &l.nodeW, err)
		}
		return
	}
	if len(wr.Events) == 0 {
		return
	}
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.PUT {
			l.putNode(ev.Kv)
		} else {
			delete(l.nodes, cluster.LastSegment(string(ev.Kv.Key)))
		}
	}
	l.rebuildGroups()
	storeMax(&l.seen.nodes, wr.Events[len(wr.Events)-1].Kv.ModRevision)
}

// --- job signals

// resyncSignals relists every job and watches signals after that.
func (l *loop) resyncSignals(ctx context.Context) error {
	l.sigW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.JobSignalPrefix(), withPrefixCount()...)
	if err != nil {
		return fmt.Errorf("read job signal revision: %w", err)
	}
	if err := l.relistJobs(ctx); err != nil {
		return err
	}
	l.startWatch(ctx, &l.sigW, l.cfg.Keys.JobSignalPrefix(), resp.Header.Revision+1)
	return nil
}

func (l *loop) onSignals(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if ctx.Err() != nil {
		return
	}
	if watchBroken(wr, ok) {
		if err := l.resyncSignals(ctx); err != nil {
			l.resyncLater(ctx, syncSignals, &l.sigW, err)
		}
		return
	}
	var ids []int64 // changed jobs, in event order
	for _, ev := range wr.Events {
		id, err := cluster.JobIDFromKey(string(ev.Kv.Key))
		if err != nil {
			l.log.Warn("ignoring malformed job signal", "key", string(ev.Kv.Key), "err", err)
			continue
		}
		if ev.Type == mvccpb.DELETE {
			if err := l.reloadJobs(ctx, ids); err != nil {
				l.resyncLater(ctx, syncSignals, &l.sigW, err)
				return
			}
			ids = ids[:0]
			l.forgetJob(id) // the signal key goes with the job
			continue
		}
		ids = append(ids, id)
	}
	if err := l.reloadJobs(ctx, ids); err != nil {
		// Relisting everything later catches these changes too.
		l.resyncLater(ctx, syncSignals, &l.sigW, err)
	}
}

// --- once requests

// resyncOnce handles every once request present and watches new ones.
func (l *loop) resyncOnce(ctx context.Context) error {
	l.onceW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.OncePrefix(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list once requests: %w", err)
	}
	for _, kv := range resp.Kvs {
		if err := l.onceRequest(ctx, kv); err != nil {
			return err
		}
	}
	l.startWatch(ctx, &l.onceW, l.cfg.Keys.OncePrefix(), resp.Header.Revision+1)
	return nil
}

func (l *loop) onOnce(ctx context.Context, wr clientv3.WatchResponse, ok bool) error {
	if ctx.Err() != nil {
		return nil //nolint:nilerr // leadership ended: not an error of the loop
	}
	if watchBroken(wr, ok) {
		if err := l.resyncOnce(ctx); err != nil {
			l.resyncLater(ctx, syncOnce, &l.onceW, err)
		}
		return l.commit(ctx)
	}
	for _, ev := range wr.Events {
		if ev.Type != mvccpb.PUT {
			continue
		}
		if err := l.onceRequest(ctx, ev.Kv); err != nil {
			l.resyncLater(ctx, syncOnce, &l.onceW, err)
			break
		}
	}
	return l.commit(ctx)
}

// onceRequest adds the manual fire of a once request to the pending batch
// (fire id "<job>-m<mod_revision>", so each request fires once).
func (l *loop) onceRequest(ctx context.Context, kv *mvccpb.KeyValue) error {
	key := string(kv.Key)
	if rev, ok := l.onceSeen[key]; ok && rev >= kv.ModRevision {
		return nil
	}
	id, err := cluster.JobIDFromKey(key)
	if err != nil {
		l.log.Warn("deleting malformed once request", "key", key, "err", err)
		l.onceSeen[key] = kv.ModRevision
		l.onceDelete = append(l.onceDelete, onceKey{key, kv.ModRevision})
		return nil
	}
	var req cluster.OnceRequest
	if len(kv.Value) > 0 {
		if err := json.Unmarshal(kv.Value, &req); err != nil {
			l.log.Warn("once request is not JSON; using normal routing", "job_id", id, "err", err)
			req = cluster.OnceRequest{}
		}
	}
	j, err := l.cfg.Jobs.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		l.log.Warn("once request for a missing job; deleting it", "job_id", id)
		l.onceSeen[key] = kv.ModRevision
		l.onceDelete = append(l.onceDelete, onceKey{key, kv.ModRevision})
		return nil
	}
	if err != nil {
		return fmt.Errorf("load job %d for a once request: %w", id, err)
	}
	now := l.clock.Now()
	spec := l.spec(j)
	fs := l.newFires(&spec, now, cluster.ManualFireID(id, kv.ModRevision), req.Node, now)
	if len(req.Params) > 0 {
		for _, f := range fs {
			if f.item != nil {
				f.item.Dispatch.Job.Params = req.Params // this fire only; the job keeps its params
			}
		}
	}
	fs[len(fs)-1].once = &onceKey{key, kv.ModRevision} // deleted once every fire committed
	l.pending = append(l.pending, fs...)
	l.onceSeen[key] = kv.ModRevision
	l.log.Info("manual fire", "job_id", id, "fire_id", fs[0].run.FireID, "node", fs[0].run.Node,
		"targets", len(fs), "requested_by", req.RequestedBy, "params_override", len(req.Params) > 0)
	return nil
}

// flushOnceDeletes deletes handled once requests, each only if it was not
// rewritten meanwhile (a new request then fires on its own).
func (l *loop) flushOnceDeletes(ctx context.Context) {
	const chunk = 64
	for len(l.onceDelete) > 0 {
		n := min(chunk, len(l.onceDelete))
		ops := make([]clientv3.Op, 0, n)
		for _, o := range l.onceDelete[:n] {
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(o.key), "=", o.rev)},
				[]clientv3.Op{clientv3.OpDelete(o.key)}, nil))
		}
		if _, err := l.cfg.Etcd.Txn(ctx).Then(ops...).Commit(); err != nil {
			l.failed(ctx, "delete once requests", err)
			return
		}
		l.onceDelete = l.onceDelete[n:]
	}
	l.onceDelete = nil
}

// --- groups

// resyncGroups reloads every group definition and watches group signals
// after that.
func (l *loop) resyncGroups(ctx context.Context) error {
	l.grpW.close()
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.GroupSignalPrefix(), withPrefixCount()...)
	if err != nil {
		return fmt.Errorf("read group signal revision: %w", err)
	}
	if err := l.relistGroups(ctx); err != nil {
		return err
	}
	storeMax(&l.seen.groups, resp.Header.Revision)
	l.startWatch(ctx, &l.grpW, l.cfg.Keys.GroupSignalPrefix(), resp.Header.Revision+1)
	return nil
}

// relistGroups reloads every group definition; routing and placement
// follow (manual groups route to their Addresses).
func (l *loop) relistGroups(ctx context.Context) error {
	gs, err := l.cfg.Jobs.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	defs := make(map[string]store.Group, len(gs))
	for _, g := range gs {
		defs[g.AppName] = g
	}
	l.defs = defs
	l.rings = map[string]*hashRing{}
	l.placementDirty = true
	return nil
}

// onGroups applies group signals: any change reloads every group (there
// are few, and a rename changes two).
func (l *loop) onGroups(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if ctx.Err() != nil {
		return
	}
	if watchBroken(wr, ok) {
		if err := l.resyncGroups(ctx); err != nil {
			l.resyncLater(ctx, syncGroups, &l.grpW, err)
		}
		return
	}
	if len(wr.Events) == 0 {
		return
	}
	if err := l.relistGroups(ctx); err != nil {
		l.resyncLater(ctx, syncGroups, &l.grpW, err)
		return
	}
	storeMax(&l.seen.groups, wr.Events[len(wr.Events)-1].Kv.ModRevision)
}
