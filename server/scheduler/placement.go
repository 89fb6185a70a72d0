package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/server/dispatch"
)

// loadPlaced reads every job config currently placed on any node.
func (l *loop) loadPlaced(ctx context.Context) error {
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.JobRoot(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list placed jobs: %w", err)
	}
	l.placed = make(map[string]placedJob, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		node, id, err := l.cfg.Keys.ParseJobKey(string(kv.Key))
		if err != nil {
			l.log.Warn("ignoring malformed job placement key", "key", string(kv.Key), "err", err)
			continue
		}
		l.placed[string(kv.Key)] = placedJob{node: node, jobID: id, val: string(kv.Value)}
	}
	l.placementDirty = true
	return nil
}

// reconcile publishes the config of every enabled job to the node chosen
// for it and removes placements of deleted or disabled jobs and of nodes no
// longer chosen. Writes are fenced and batched; a transient failure is
// retried with backoff.
func (l *loop) reconcile(ctx context.Context) error {
	if !l.placementDirty {
		return nil
	}
	if !l.retryAt.IsZero() && l.clock.Now().Before(l.retryAt) {
		return nil // backing off; wake clears retryAt
	}
	desired := make(map[string]placedJob, len(l.entries))
	configs := make(map[string]dispatch.Placement, len(l.entries))
	for id, e := range l.entries {
		node, ok := l.home(&e.job)
		if !ok {
			continue
		}
		jc := jobConfig(&e.job)
		b, err := json.Marshal(jc)
		if err != nil {
			l.log.Error("job config not encodable; not placed", "job_id", id, "err", err)
			continue
		}
		key := l.cfg.Keys.Job(node, id)
		desired[key] = placedJob{node: node, jobID: id, val: string(b)}
		configs[key] = dispatch.Placement{Node: node, Job: jc}
	}
	var putKeys, delKeys []string
	for k, d := range desired {
		if p, ok := l.placed[k]; !ok || p.val != d.val {
			putKeys = append(putKeys, k)
		}
	}
	for k := range l.placed {
		if _, ok := desired[k]; !ok {
			delKeys = append(delKeys, k)
		}
	}
	sort.Strings(putKeys)
	sort.Strings(delKeys)

	if len(putKeys) > 0 {
		ps := make([]dispatch.Placement, len(putKeys))
		for i, k := range putKeys {
			ps[i] = configs[k]
		}
		err := l.cfg.Dispatcher.PlaceJob(ctx, l.term, ps...)
		done := len(putKeys)
		if err != nil {
			done = min(dispatch.Committed(err), len(putKeys))
		}
		for _, k := range putKeys[:done] {
			l.placed[k] = desired[k]
		}
		if err != nil {
			return l.placementFailed(ctx, err)
		}
	}
	if len(delKeys) > 0 {
		refs := make([]dispatch.JobRef, len(delKeys))
		for i, k := range delKeys {
			refs[i] = dispatch.JobRef{Node: l.placed[k].node, JobID: l.placed[k].jobID}
		}
		err := l.cfg.Dispatcher.UnplaceJob(ctx, l.term, refs...)
		done := len(delKeys)
		if err != nil {
			done = min(dispatch.Committed(err), len(delKeys))
		}
		for _, k := range delKeys[:done] {
			delete(l.placed, k)
		}
		if err != nil {
			return l.placementFailed(ctx, err)
		}
	}
	if len(putKeys)+len(delKeys) > 0 {
		l.log.Debug("placements updated", "placed", len(putKeys), "removed", len(delKeys))
	}
	l.placementDirty = false
	return nil
}

func (l *loop) placementFailed(ctx context.Context, err error) error {
	if errors.Is(err, dispatch.ErrFenced) {
		return errorf("term %d: %w", l.term, err)
	}
	l.failed(ctx, "place jobs", err)
	return nil
}
