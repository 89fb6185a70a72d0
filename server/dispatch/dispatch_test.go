package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

func items(n int, node string, term uint64) []DispatchItem {
	out := make([]DispatchItem, n)
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range out {
		sched := at.Add(time.Duration(i) * time.Second)
		out[i] = DispatchItem{Node: node, Dispatch: cluster.Dispatch{
			FireID: cluster.FireID(int64(i%50+1), sched), Trigger: cluster.TriggerSchedule,
			ScheduledAt: sched, DispatchedAt: sched, Term: term,
			Job: cluster.JobConfig{JobID: int64(i%50 + 1), Handler: "cmd", Params: json.RawMessage(`{"cmd":"true"}`), Revision: 1},
		}}
	}
	return out
}

func countPrefix(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

func TestFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli, keys := testEtcd(t)
	a := New(cli, keys, "a", testRing)
	b := New(cli, keys, "b", testRing)

	// Nobody claimed: dispatch is fenced.
	err := a.Dispatch(ctx, 1, items(1, "n1", 1))
	require.ErrorIs(t, err, ErrFenced)

	require.NoError(t, a.Claim(ctx, 5))
	require.NoError(t, a.Claim(ctx, 5), "re-claiming the same term must be a no-op")
	term, id, ok, err := a.Leader(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(5), term)
	require.Equal(t, "a", id)

	require.NoError(t, a.Dispatch(ctx, 5, items(3, "n1", 5)))
	require.Equal(t, int64(3), countPrefix(t, cli, keys.RunPrefix("n1")))
	// A stale term of the same server is fenced too.
	require.ErrorIs(t, a.Dispatch(ctx, 4, items(1, "n2", 4)), ErrFenced)

	// Another server with an equal or lower term is refused.
	require.ErrorIs(t, b.Claim(ctx, 5), ErrFenced)
	require.ErrorIs(t, b.Claim(ctx, 3), ErrFenced)
	// b takes over with a higher term: a is fenced, nothing of a's is written.
	require.NoError(t, b.Claim(ctx, 6))
	err = a.Dispatch(ctx, 5, items(300, "n2", 5))
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, 0, Committed(err))
	require.Zero(t, countPrefix(t, cli, keys.RunPrefix("n2")))
	require.ErrorIs(t, a.PlaceJob(ctx, 5, Placement{Node: "n2", Job: cluster.JobConfig{JobID: 1}}), ErrFenced)
	require.ErrorIs(t, a.Claim(ctx, 5), ErrFenced)
	require.NoError(t, b.Dispatch(ctx, 6, items(2, "n2", 6)))
	require.Equal(t, int64(2), countPrefix(t, cli, keys.RunPrefix("n2")))

	// The run value is the Dispatch JSON.
	want := items(1, "n2", 6)[0].Dispatch
	resp, err := cli.Get(ctx, keys.Run("n2", want.FireID))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	var got cluster.Dispatch
	require.NoError(t, json.Unmarshal(openRecord(t, resp.Kvs[0]), &got))
	require.Equal(t, want.FireID, got.FireID)
	require.Equal(t, uint64(6), got.Term)
	require.Equal(t, "cmd", got.Job.Handler)
}

// TestBatching is not parallel: it measures the etcd revision delta, which
// other tests' writes would disturb.
func TestBatching(t *testing.T) {
	ctx := context.Background()
	cli, keys := testEtcd(t)
	var txns, ops atomic.Int64
	d := New(cli, keys, "s", testRing, WithTxnHook(func(n int) { txns.Add(1); ops.Add(int64(n)) }))
	require.NoError(t, d.Claim(ctx, 1))

	// 3,000 distinct fires.
	its := make([]DispatchItem, 0, 3000)
	for i := range 3000 {
		it := items(1, fmt.Sprintf("n%d", i%7), 1)[0]
		it.Dispatch.FireID = fmt.Sprintf("%d-%d", i, 1000)
		its = append(its, it)
	}
	before, err := cli.Get(ctx, "/")
	require.NoError(t, err)
	require.NoError(t, d.Dispatch(ctx, 1, its))
	after, err := cli.Get(ctx, "/")
	require.NoError(t, err)

	want := int64((3000 + DefaultMaxOps - 1) / DefaultMaxOps)
	require.Equal(t, want, txns.Load())
	require.Equal(t, int64(3000), ops.Load())
	// Each txn is one etcd revision.
	require.Equal(t, want, after.Header.Revision-before.Header.Revision)
	var total int64
	for n := range 7 {
		total += countPrefix(t, cli, keys.RunPrefix(fmt.Sprintf("n%d", n)))
	}
	require.Equal(t, int64(3000), total)

	// A byte limit splits by size too.
	txns.Store(0)
	small := New(cli, keys, "s", testRing, WithMaxOps(8192), WithMaxBytes(4096),
		WithTxnHook(func(int) { txns.Add(1) }))
	big := items(10, "big", 1)
	for i := range big {
		big[i].Dispatch.Job.Params = json.RawMessage(`"` + strings.Repeat("x", 1500) + `"`)
	}
	require.NoError(t, small.Dispatch(ctx, 1, big))
	require.Equal(t, int64(5), txns.Load()) // two ~1.7 KB puts per 4 KB txn
	require.Equal(t, int64(10), countPrefix(t, cli, keys.RunPrefix("big")))
}

func TestPlacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cli, keys := testEtcd(t)
	d := New(cli, keys, "s", testRing, WithMaxOps(2))
	require.NoError(t, d.Claim(ctx, 2))
	var ps []Placement
	for i := range 5 {
		ps = append(ps, Placement{Node: "n1", Job: cluster.JobConfig{JobID: int64(i + 1), Handler: "shell", Revision: 3}})
	}
	require.NoError(t, d.PlaceJob(ctx, 2, ps...))
	require.Equal(t, int64(5), countPrefix(t, cli, keys.JobPrefix("n1")))
	resp, err := cli.Get(ctx, keys.Job("n1", 3))
	require.NoError(t, err)
	var jc cluster.JobConfig
	require.NoError(t, json.Unmarshal(openRecord(t, resp.Kvs[0]), &jc))
	require.Equal(t, int64(3), jc.JobID)
	require.Equal(t, int64(3), jc.Revision)

	require.NoError(t, d.UnplaceJob(ctx, 2, JobRef{"n1", 1}, JobRef{"n1", 2}, JobRef{"n1", 5}))
	require.Equal(t, int64(2), countPrefix(t, cli, keys.JobPrefix("n1")))

	// Fenced after a newer claim: partial progress is reported.
	require.NoError(t, New(cli, keys, "other", testRing).Claim(ctx, 3))
	err = d.UnplaceJob(ctx, 2, JobRef{"n1", 3})
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, int64(2), countPrefix(t, cli, keys.JobPrefix("n1")))
}

// testRing signs the test dispatchers' records.
var testRing, _ = cluster.KeyringFromTokens("dispatch-test-token")

// openRecord verifies a signed record read from etcd and returns its body.
func openRecord(t *testing.T, kv *mvccpb.KeyValue) []byte {
	t.Helper()
	body, _, err := testRing.Open(string(kv.Key), kv.Value)
	require.NoError(t, err)
	return body
}

// Run records are signed for their own key and the dispatching term: a
// value copied under another fire's key does not verify.
func TestDispatchSignsRecordsForKeyAndTerm(t *testing.T) {
	t.Parallel()
	cli, keys := testEtcd(t)
	ctx := context.Background()
	d := New(cli, keys, "s", testRing)
	require.NoError(t, d.Claim(ctx, 7))
	its := items(2, "n1", 7)
	require.NoError(t, d.Dispatch(ctx, 7, its))
	resp, err := cli.Get(ctx, keys.Run("n1", its[0].Dispatch.FireID))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	body, term, err := testRing.Open(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
	require.NoError(t, err)
	require.Equal(t, uint64(7), term)
	var got cluster.Dispatch
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, its[0].Dispatch.FireID, got.FireID)

	_, _, err = testRing.Open(keys.Run("n1", its[1].Dispatch.FireID), resp.Kvs[0].Value)
	require.ErrorIs(t, err, cluster.ErrBadSignature, "replayed under another fire id")
	other, err := cluster.KeyringFromTokens("another-token")
	require.NoError(t, err)
	_, _, err = other.Open(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
	require.ErrorIs(t, err, cluster.ErrBadSignature, "another cluster key")

	// SignedPut signs under the leader key's term and honours extra cmps.
	key := keys.Kill("n1", "1-1")
	rev, ok, err := SignedPut(ctx, cli, keys, testRing, key, cluster.KillRequest{FireID: "1-1"}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	resp, err = cli.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, rev, resp.Kvs[0].ModRevision)
	_, term, err = testRing.Open(key, resp.Kvs[0].Value)
	require.NoError(t, err)
	require.Equal(t, uint64(7), term)
	_, ok, err = SignedPut(ctx, cli, keys, testRing, key, cluster.KillRequest{FireID: "1-1"},
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev-1)})
	require.NoError(t, err)
	require.False(t, ok, "a failed extra cmp writes nothing")
}
