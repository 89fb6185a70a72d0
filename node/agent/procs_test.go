package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// TestProcKeysQueuedTogetherShareATxn: the proc keys queued while the
// writer was busy are written by its next flush in one txn per MaxTxnOps
// (one etcd revision each), under the registration lease, and deleted the
// same way; a run that ended before its put was flushed writes nothing.
func TestProcKeysQueuedTogetherShareATxn(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {
		c.MaxTxnOps = 128
		c.ProcThreshold = time.Hour // the agent's own runs write none
	})
	b.start(t)
	w := newProcWriter(b.agent) // not started: flushed by hand below
	ctx := t.Context()

	const n = 300
	procs := make([]*procKey, n+1)
	for i := range procs {
		e := &execution{num: 1000 + i, d: cluster.Dispatch{FireID: fmt.Sprintf("%d-1000", 50+i)}}
		e.d.Job.JobID = int64(50 + i)
		procs[i] = &procKey{w: w, e: e, started: time.Now().UTC(), timer: time.NewTimer(time.Hour)}
		procs[i].register()
	}
	procs[n].stop() // ended before the flush: never written
	w.flush(ctx)

	resp, err := b.etcd.Get(ctx, b.cfg.Keys.ProcPrefix(b.cfg.UUID), clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, n)
	_, lease, ok := b.nodeInfo(t)
	require.True(t, ok)
	revs := map[int64]int{}
	for _, kv := range resp.Kvs {
		require.Equal(t, lease, kv.Lease, "%s under the registration lease", kv.Key)
		revs[kv.ModRevision]++
	}
	require.Len(t, revs, 3, "300 puts in txns of at most 128")
	for _, p := range procs[:n] {
		require.NotEmpty(t, p.key)
	}
	require.Empty(t, procs[n].key)

	before := resp.Header.Revision
	for _, p := range procs[:n] {
		p.stop()
	}
	w.flush(ctx)
	resp, err = b.etcd.Get(ctx, b.cfg.Keys.ProcPrefix(b.cfg.UUID), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count)
	require.Equal(t, before+3, resp.Header.Revision, "300 deletions in txns of at most 128")
}

// TestProcKeyEndedDuringItsWriteIsDeleted: a run that ends while the txn
// holding its put is in flight has its key deleted by the writer's next
// flush, and a run that ends after the write deletes its own.
func TestProcKeyEndedDuringItsWriteIsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProcThreshold = time.Hour })
	b.start(t)
	w := newProcWriter(b.agent)
	ctx := t.Context()
	newProc := func(job int64) *procKey {
		e := &execution{num: int(job), d: cluster.Dispatch{FireID: fmt.Sprintf("%d-1000", job)}}
		e.d.Job.JobID = job
		return &procKey{w: w, e: e, started: time.Now().UTC(), timer: time.NewTimer(time.Hour)}
	}
	count := func() int64 {
		resp, err := b.etcd.Get(ctx, b.cfg.Keys.ProcPrefix(b.cfg.UUID), clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Count
	}

	during, after := newProc(70), newProc(71)
	during.register()
	after.register()
	w.beforePut = during.stop
	w.flush(ctx)
	w.beforePut = nil
	require.NotEmpty(t, during.key, "its put committed")
	require.EqualValues(t, 2, count())
	w.flush(ctx) // the deletion queued for the run that ended mid-write
	require.EqualValues(t, 1, count())

	after.stop()
	w.flush(ctx)
	require.Zero(t, count())
}
