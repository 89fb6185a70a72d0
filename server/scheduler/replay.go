package scheduler

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// maxGetsPerTxn bounds the Gets of one etcd transaction (etcd's default
// --max-txn-ops is 128).
const maxGetsPerTxn = 128

// checkReplays decides, for every fire whose fire id was already in SQL
// (a replay: an earlier leader, or an earlier attempt of this batch,
// recorded it), whether it must still be dispatched. Replays are rare, so
// this is off the hot path: one SQL read, one etcd read of the run keys,
// and one more SQL read of the fires whose key is absent.
//
// A replayed fire is dispatched only when its run is still "triggered" and
// its run key is absent. The key is read BEFORE the status: a node deletes
// a run key only after a server stored the run's final result, and the
// fence (claimed before this loop started) keeps a deposed leader from
// writing a key, so "no key at T1, triggered at T2 > T1" means no node ever
// received the fire. Read the other way round a run could finish and drop
// its key between the two reads and run twice.
//
// The fire goes to the node recorded in SQL (where the earlier leader sent
// it); when that node is no longer live it is not dispatched and the
// lost-run monitor marks the run lost.
func (l *loop) checkReplays(ctx context.Context) error {
	var fs []*fire
	for _, f := range l.pending {
		if f.stage == stageReplayed {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.run.FireID
	}
	recorded, err := l.runsByFireID(ctx, ids)
	if err != nil {
		return err
	}
	// Only fires still triggered on a node can need a dispatch.
	var keys []string
	for _, f := range fs {
		if r, ok := recorded[f.run.FireID]; ok && r.Status == cluster.StatusTriggered && r.Node != "" {
			keys = append(keys, l.cfg.Keys.Run(r.Node, r.FireID))
		}
	}
	present, err := l.runKeysPresent(ctx, keys)
	if err != nil {
		return err
	}
	var absent []string
	for _, f := range fs {
		if r, ok := recorded[f.run.FireID]; ok && r.Status == cluster.StatusTriggered && r.Node != "" &&
			!present[l.cfg.Keys.Run(r.Node, r.FireID)] {
			absent = append(absent, f.run.FireID)
		}
	}
	// The decisive status read, after the key read.
	var now map[string]store.Run
	if len(absent) > 0 {
		if now, err = l.runsByFireID(ctx, absent); err != nil {
			return err
		}
	}

	resend, skipped := 0, 0
	for _, f := range fs {
		// newFires counted the fire's target as busy; the recorded run is
		// what counts now.
		l.runs.del(l.runs.runs, l.cfg.Keys.Run(f.run.Node, f.run.FireID))
		r, ok := now[f.run.FireID]
		if !ok || r.Status != cluster.StatusTriggered || !l.live(r.Node) {
			f.stage = stageDispatched
			skipped++
			rec, has := recorded[f.run.FireID]
			switch {
			case !has:
				l.log.Warn("replayed fire has no run; not dispatched", "fire_id", f.run.FireID)
			case rec.Node != "" && present[l.cfg.Keys.Run(rec.Node, rec.FireID)]:
				l.runs.put(l.runs.runs, l.cfg.Keys.Run(rec.Node, rec.FireID), runRef{rec.Node, rec.JobID})
			case ok && r.Status == cluster.StatusTriggered:
				l.log.Warn("replayed fire was never dispatched but its node is not live; not dispatched",
					"fire_id", f.run.FireID, "node", r.Node)
			}
			continue
		}
		f.stage = stageRecorded
		f.run.Node = r.Node
		f.item.Node = r.Node
		l.runs.put(l.runs.runs, l.cfg.Keys.Run(r.Node, r.FireID), runRef{r.Node, r.JobID})
		resend++
	}
	l.log.Info("replayed fires checked", "fires", len(fs), "dispatch", resend, "already_handled", skipped)
	return nil
}

func (l *loop) runsByFireID(ctx context.Context, ids []string) (map[string]store.Run, error) {
	runs, err := l.cfg.Runs.RunsByFireIDs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read %d replayed runs: %w", len(ids), err)
	}
	out := make(map[string]store.Run, len(runs))
	for _, r := range runs {
		out[r.FireID] = r
	}
	return out, nil
}

// runKeysPresent reads which of keys exist, in transactions of Gets.
func (l *loop) runKeysPresent(ctx context.Context, keys []string) (map[string]bool, error) {
	present := make(map[string]bool, len(keys))
	for start := 0; start < len(keys); start += maxGetsPerTxn {
		chunk := keys[start:min(start+maxGetsPerTxn, len(keys))]
		ops := make([]clientv3.Op, len(chunk))
		for i, k := range chunk {
			ops[i] = clientv3.OpGet(k, clientv3.WithCountOnly())
		}
		resp, err := l.cfg.Etcd.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read %d run keys: %w", len(chunk), err)
		}
		for i, r := range resp.Responses {
			if r.GetResponseRange().GetCount() > 0 {
				present[chunk[i]] = true
			}
		}
	}
	return present, nil
}
