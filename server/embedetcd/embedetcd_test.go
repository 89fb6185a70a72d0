package embedetcd_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/server/embedetcd"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

func TestPutGet(t *testing.T) {
	t.Parallel()
	c := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Put(ctx, "/Cronix/x", "1")
	require.NoError(t, err)
	resp, err := c.Get(ctx, "/Cronix/x")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "1", string(resp.Kvs[0].Value))
}

// TestRaftLogDoesNotHoldOldEntries writes far more than SnapshotCatchUpEntries
// large transactions and checks the Go heap does not keep them: a single
// member keeps only the raft entries since its last in-memory snapshot
// (every 100 entries) plus a few. With etcd's default catch-up of 5,000
// entries (or the 500 kept before) every one of them stayed in memory.
func TestRaftLogDoesNotHoldOldEntries(t *testing.T) {
	// Not parallel: it measures the process's heap.
	e := etcdtest.Start(t)
	c, err := e.Client()
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const (
		txns      = 600
		valueSize = 128 << 10 // 75 MB in all
	)
	value := strings.Repeat("x", valueSize)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := range txns {
		// A distinct value per entry, as dispatch batches are.
		v := fmt.Sprintf("%06d", i) + value[6:]
		_, err := c.Put(ctx, fmt.Sprintf("/Cronix/big/%d", i%4), v)
		require.NoError(t, err)
		_, err = c.Delete(ctx, fmt.Sprintf("/Cronix/big/%d", i%4))
		require.NoError(t, err)
	}
	grown := int64(heap()) - int64(before)
	t.Logf("heap grew by %.1f MB after %d entries of %d KB", float64(grown)/(1<<20), txns, valueSize>>10)
	// At most ~110 entries (14 MB) are in the raft log; all 600 are 75 MB.
	require.Less(t, grown, int64(35<<20), "the raft log keeps old entries in memory")
}

// TestHistoryIsCompacted checks that old revisions (created and deleted
// keys, as every dispatched fire leaves) are compacted after the retention.
func TestHistoryIsCompacted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := embedetcd.Start(ctx, embedetcd.Config{Dir: t.TempDir(), UnsafeNoFsync: true,
		CompactionRetention: time.Second})
	require.NoError(t, err)
	defer e.Close()
	c, err := e.Client()
	require.NoError(t, err)
	defer c.Close()

	put, err := c.Put(ctx, "/Cronix/run/n/1", "fire")
	require.NoError(t, err)
	_, err = c.Delete(ctx, "/Cronix/run/n/1")
	require.NoError(t, err)
	// The periodic compactor needs writes after the old revision to move
	// past it; keep writing until the old revision is gone.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		_, err = c.Get(ctx, "/Cronix/run/n/1", clientv3.WithRev(put.Header.Revision))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "revision %d still readable after 30 s with a 1 s retention", put.Header.Revision)
		_, err = c.Put(ctx, "/Cronix/tick", strconv.Itoa(i))
		require.NoError(t, err)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
