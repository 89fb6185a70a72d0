package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/dispatch"
)

// placeChunk bounds the placements sealed and written per PlaceJob call,
// so a full reconcile of many jobs does not hold every sealed value at once.
const placeChunk = 1024

// placedJob is where a job's config is placed and the FNV-64a sum of the
// config JSON placed there (0: unknown, so the next reconcile places it).
type placedJob struct {
	node string
	sum  uint64
}

// placedPage is how many placements loadPlaced reads per etcd request.
const placedPage = 2048

// loadPlaced reads every job config currently placed on any node, a page
// at a time, keeping each one's node and config sum: a placement whose
// config is unchanged since an earlier term is kept as it is (its
// signature names the term that wrote it), so a new leader rewrites only
// what changed. A job placed on more than one node keeps one; the others
// are strays the next reconcile removes.
func (l *loop) loadPlaced(ctx context.Context) error {
	hint := 0 // without placements only strays are read, to remove them
	if l.cfg.PlaceJobs {
		hint = len(l.entries)
	}
	placed := make(map[int64]placedJob, hint)
	var strays []dispatch.JobRef
	prefix := l.cfg.Keys.JobRoot()
	end := clientv3.GetPrefixRangeEnd(prefix)
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(placedPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if !l.cfg.PlaceJobs {
			opts = append(opts, clientv3.WithKeysOnly()) // only to remove them
		}
		resp, err := l.cfg.Etcd.Get(ctx, from, opts...)
		if err != nil {
			return fmt.Errorf("list placed jobs: %w", err)
		}
		for _, kv := range resp.Kvs {
			node, id, err := l.cfg.Keys.ParseJobKey(string(kv.Key))
			if err != nil {
				l.log.Warn("ignoring malformed job placement key", "key", string(kv.Key), "err", err)
				continue
			}
			if _, dup := placed[id]; dup {
				strays = append(strays, dispatch.JobRef{Node: node, JobID: id})
				continue
			}
			placed[id] = placedJob{node: l.intern(node), sum: configSum(cluster.RecordBody(kv.Value))}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	l.placed, l.strays = placed, strays
	l.placementDirty = true
	return nil
}

// configSum is the FNV-64a sum of a placed config's JSON, never 0.
func configSum(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// markPlacement asks the next reconcile to check job id's placement.
func (l *loop) markPlacement(id int64) { l.placeDirty[id] = true }

// desiredPlacement is the node job id's config belongs on and the config
// with its sum; ok is false when it belongs nowhere (deleted, disabled, no
// eligible node).
func (l *loop) desiredPlacement(id int64) (p dispatch.Placement, sum uint64, ok bool) {
	e, has := l.entries[id]
	if !has || !l.cfg.PlaceJobs {
		return p, 0, false
	}
	node, ok := l.home(&e.job)
	if !ok {
		return p, 0, false
	}
	jc := jobConfig(&e.job)
	b, err := json.Marshal(jc)
	if err != nil {
		l.log.Error("job config not encodable; not placed", "job_id", id, "err", err)
		return p, 0, false
	}
	return dispatch.Placement{Node: node, Job: jc}, configSum(b), true
}

// reconcile publishes the config of every enabled job to the node chosen
// for it and removes placements of deleted or disabled jobs and of nodes no
// longer chosen. After a node or group change (placementDirty) it checks
// every job; otherwise only the jobs marked since the last reconcile.
// Writes are fenced and batched; a transient failure is retried with
// backoff.
func (l *loop) reconcile(ctx context.Context) error {
	if !l.placementDirty && len(l.placeDirty) == 0 && len(l.strays) == 0 {
		return nil
	}
	if !l.cfg.PlaceJobs && len(l.placed) == 0 && len(l.strays) == 0 {
		l.placementDirty = false // placements off, and none left to remove
		clear(l.placeDirty)
		return nil
	}
	if !l.retryAt.IsZero() && l.clock.Now().Before(l.retryAt) {
		return nil // backing off; wake clears retryAt
	}
	var ids []int64
	if l.placementDirty {
		ids = make([]int64, 0, max(len(l.entries), len(l.placed)))
		for id := range l.entries {
			ids = append(ids, id)
		}
		for id := range l.placed {
			if _, ok := l.entries[id]; !ok {
				ids = append(ids, id)
			}
		}
	} else {
		ids = make([]int64, 0, len(l.placeDirty))
		for id := range l.placeDirty {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	// A stray on the node its job belongs on is overwritten, not removed.
	var dels []dispatch.JobRef
	for _, r := range l.strays {
		if want, _, ok := l.desiredPlacement(r.JobID); !ok || want.Node != r.Node {
			dels = append(dels, r)
		}
	}
	var puts []dispatch.Placement
	var sums []uint64
	for _, id := range ids {
		want, sum, ok := l.desiredPlacement(id)
		p, placed := l.placed[id]
		if ok && (!placed || p.node != want.Node || p.sum != sum) {
			puts = append(puts, want)
			sums = append(sums, sum)
		}
		if placed && (!ok || p.node != want.Node) {
			dels = append(dels, dispatch.JobRef{Node: p.node, JobID: id})
		}
	}
	for start := 0; start < len(puts); start += placeChunk {
		chunk := puts[start:min(start+placeChunk, len(puts))]
		err := l.cfg.Dispatcher.PlaceJob(ctx, l.term, chunk...)
		done := len(chunk)
		if err != nil {
			done = min(dispatch.Committed(err), len(chunk))
		}
		for i, p := range chunk[:done] {
			l.placed[p.Job.JobID] = placedJob{node: l.intern(p.Node), sum: sums[start+i]}
		}
		if err != nil {
			return l.placementFailed(ctx, err)
		}
	}
	if len(dels) > 0 {
		err := l.cfg.Dispatcher.UnplaceJob(ctx, l.term, dels...)
		done := len(dels)
		if err != nil {
			done = min(dispatch.Committed(err), len(dels))
		}
		for _, r := range dels[:done] {
			if p, ok := l.placed[r.JobID]; ok && p.node == r.Node {
				delete(l.placed, r.JobID)
			}
		}
		if err != nil {
			return l.placementFailed(ctx, err)
		}
	}
	if len(puts)+len(dels) > 0 {
		l.log.Debug("placements updated", "placed", len(puts), "removed", len(dels))
	}
	l.placementDirty = false
	l.strays = nil
	clear(l.placeDirty)
	if !l.cfg.PlaceJobs && len(l.placed) == 0 {
		l.placed = map[int64]placedJob{} // a Go map keeps its buckets: let the removed ones go
	}
	return nil
}

func (l *loop) placementFailed(ctx context.Context, err error) error {
	if errors.Is(err, dispatch.ErrFenced) {
		return errorf("term %d: %w", l.term, err)
	}
	l.failed(ctx, "place jobs", err)
	return nil
}
