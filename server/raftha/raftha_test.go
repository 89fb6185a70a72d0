package raftha

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	return Config{
		ID:                 "s1",
		Dir:                dir,
		BindAddr:           "127.0.0.1:0",
		Bootstrap:          true,
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
	}
}

func openLeader(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	require.Eventually(t, n.IsLeader, 10*time.Second, 10*time.Millisecond, "single voter never became leader")
	return n
}

// openApplied opens a leader and waits until it applied its whole log: a
// restarted node replays its log only after it is leader again.
func openApplied(t *testing.T, cfg Config) *Node {
	t.Helper()
	n := openLeader(t, cfg)
	require.NoError(t, n.raft.Barrier(10*time.Second).Error())
	return n
}

func TestSingleVoterBecomesLeader(t *testing.T) {
	t.Parallel()
	n := openLeader(t, testConfig(t, t.TempDir()))
	require.NotZero(t, n.Term())
	require.Equal(t, n.Addr(), n.LeaderAddr())
	require.Equal(t, "s1", n.LeaderID())
}

func TestCursorsPersistAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	n := openLeader(t, cfg)

	require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{1: 1000, 2: 2000, 3: 3000}))
	// Cursors only move forward.
	require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{1: 500, 2: 2500}))
	require.NoError(t, n.DeleteCursors(ctx, []int64{3}))
	require.NoError(t, n.SetRouteStates(ctx, map[string][]byte{"rr/7": []byte("3"), "x": []byte("y")}))
	require.NoError(t, n.SetRouteStates(ctx, map[string][]byte{"x": nil}))
	want := map[int64]int64{1: 1000, 2: 2500}
	require.Equal(t, want, n.Cursors())
	c, ok := n.Cursor(2)
	require.True(t, ok)
	require.Equal(t, int64(2500), c)
	_, ok = n.Cursor(3)
	require.False(t, ok)
	require.NoError(t, n.Close())
	require.NoError(t, n.Close()) // idempotent

	n2 := openApplied(t, cfg)
	require.Equal(t, want, n2.Cursors())
	require.Equal(t, map[string][]byte{"rr/7": []byte("3")}, n2.RouteStates())
	require.NoError(t, n2.ApplyCursors(ctx, map[int64]int64{1: 1001}))
	c, _ = n2.Cursor(1)
	require.Equal(t, int64(1001), c)
}

func TestRestartFromSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.TrailingLogs = 2
	n := openLeader(t, cfg)
	for i := range 50 {
		require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{int64(i % 7): int64(i * 1000)}))
	}
	require.NoError(t, n.Snapshot())
	require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{100: 1}))
	want := n.Cursors()
	require.NoError(t, n.Close())

	n2, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })
	// The snapshot was restored at start (the log before it was compacted).
	require.NotEqual(t, "0", n2.raft.Stats()["last_snapshot_index"])
	first, err := n2.store.FirstIndex()
	require.NoError(t, err)
	require.Greater(t, first, uint64(10), "log was not compacted by the snapshot")
	require.Eventually(t, n2.IsLeader, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { _, ok := n2.Cursor(100); return ok }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, want, n2.Cursors())
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

func TestFSMSnapshotRestoreEquality(t *testing.T) {
	t.Parallel()
	f := newFSM()
	apply := func(i uint64, typ byte, body any) {
		data, err := encodeCommand(typ, body)
		require.NoError(t, err)
		require.Nil(t, f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data}))
	}
	for i := range 100 {
		apply(uint64(i+1), cmdApplyCursors, map[int64]int64{int64(i % 13): int64(i)})
	}
	apply(101, cmdDeleteCursors, []int64{5})
	apply(102, cmdSetRoutes, map[string][]byte{"a": {1, 2}, "b": []byte("z")})
	// A malformed entry is refused and changes nothing.
	require.Error(t, f.Apply(&raft.Log{Index: 103, Type: raft.LogCommand, Data: []byte{cmdApplyCursors, '{'}}).(error))
	require.Error(t, f.Apply(&raft.Log{Index: 104, Type: raft.LogCommand, Data: []byte{99}}).(error))

	snap, err := f.Snapshot()
	require.NoError(t, err)
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()

	g := newFSM()
	require.NoError(t, g.Restore(io.NopCloser(&sink)))
	require.Equal(t, f.cursors(), g.cursors())
	require.Equal(t, f.routes(), g.routes())
	require.Len(t, g.cursors(), 12)
	_, ok := g.cursor(5)
	require.False(t, ok)
}

func TestLeadershipCallback(t *testing.T) {
	t.Parallel()
	n, err := Open(testConfig(t, t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })

	type start struct {
		term uint64
		ctx  context.Context
	}
	var mu sync.Mutex
	var starts []start
	var notLeader bool
	ended := make(chan uint64, 10)
	n.OnLeadership(func(ctx context.Context, term uint64) {
		mu.Lock()
		notLeader = notLeader || !n.IsLeader()
		starts = append(starts, start{term, ctx})
		mu.Unlock()
		<-ctx.Done()
		ended <- term
	})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == 1
	}, 10*time.Second, 10*time.Millisecond)

	// Registered while leading: starts at once for the current term.
	late := make(chan uint64, 1)
	n.OnLeadership(func(ctx context.Context, term uint64) { late <- term; <-ctx.Done() })
	lateTerm := <-late

	mu.Lock()
	s := starts[0]
	require.False(t, notLeader, "callback ran while not leader")
	mu.Unlock()
	require.Equal(t, n.Term(), s.term)
	require.Equal(t, s.term, lateTerm)
	require.NoError(t, s.ctx.Err())

	require.NoError(t, n.Close())
	require.Error(t, s.ctx.Err(), "callback ctx not cancelled on Close")
	select {
	case term := <-ended:
		require.Equal(t, s.term, term)
	default:
		t.Fatal("Close returned before the callback did")
	}
	mu.Lock()
	require.Len(t, starts, 1, "callback fired more than once")
	mu.Unlock()
}

// A lost-and-regained leadership (false, true queued at once) ends the old
// session before the new one starts, and the stale session never cancels
// the new one.
func TestLeadershipRegainedAtOnce(t *testing.T) {
	t.Parallel()
	n := openLeader(t, testConfig(t, t.TempDir()))
	var mu sync.Mutex
	running := 0
	maxRunning := 0
	calls := 0
	n.OnLeadership(func(ctx context.Context, term uint64) {
		mu.Lock()
		running++
		calls++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		running--
		mu.Unlock()
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return calls == 1 }, 10*time.Second, 10*time.Millisecond)

	// Simulate raft's notifications of a loss and an immediate regain, plus a
	// duplicate gain (a new session must still replace the old one).
	n.notifyCh <- false
	n.notifyCh <- true
	n.notifyCh <- true
	require.Eventually(t, func() bool {
		n.mu.Lock()
		started := n.session != nil && n.session.started
		n.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		return started && calls >= 2 && running == 1
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	require.Equal(t, 1, maxRunning, "two leader sessions overlapped")
	mu.Unlock()
	n.mu.Lock()
	cur := n.session
	n.mu.Unlock()
	require.NotNil(t, cur)
	require.NoError(t, cur.ctx.Err())
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := Open(Config{})
	require.ErrorContains(t, err, "ID is required")
	cfg := testConfig(t, t.TempDir())
	cfg.Peers = []string{"bogus"}
	_, err = Open(cfg)
	require.ErrorContains(t, err, "id=host:port")
	cfg = testConfig(t, t.TempDir())
	cfg.LeaderLeaseTimeout = time.Second
	_, err = Open(cfg)
	require.ErrorContains(t, err, "LeaderLeaseTimeout")
}

// One tick is one raft entry carrying cursors, route state and deletions,
// and it survives a reopen.
func TestApplyTickIsOneEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	n := openLeader(t, cfg)
	require.NoError(t, n.ApplyCursors(ctx, map[int64]int64{1: 1000, 9: 9000}))
	require.NoError(t, n.SetRouteStates(ctx, map[string][]byte{"job/9": []byte("x")}))
	before := n.raft.LastIndex()

	require.NoError(t, n.ApplyTick(ctx,
		map[int64]int64{1: 2000, 2: 500},
		map[string][]byte{"job/1": []byte(`{"round":4}`), "job/9": nil},
		[]int64{9}))
	require.Equal(t, before+1, n.raft.LastIndex(), "a tick must be one raft entry")
	require.NoError(t, n.ApplyTick(ctx, nil, nil, nil)) // nothing: no entry
	require.Equal(t, before+1, n.raft.LastIndex())

	wantCursors := map[int64]int64{1: 2000, 2: 500}
	wantRoutes := map[string][]byte{"job/1": []byte(`{"round":4}`)}
	require.Equal(t, wantCursors, n.Cursors())
	require.Equal(t, wantRoutes, n.RouteStates())

	require.NoError(t, n.Close())
	n2 := openApplied(t, cfg)
	require.Equal(t, wantCursors, n2.Cursors())
	require.Equal(t, wantRoutes, n2.RouteStates())
}

// ApplyTick's entry groups the cursors by time and applies each as max; a
// tick entry of the earlier format (a log written before the upgrade) still
// applies the same way.
func TestGroupedTickMatchesTheEarlierTickFormat(t *testing.T) {
	t.Parallel()
	cursors := map[int64]int64{1: 2000, 2: 2000, 3: 1000, 7: 3000, 8: 2000}
	groups := groupCursors(cursors)
	require.Equal(t, []cursorGroup{{At: 1000, Jobs: []int64{3}}, {At: 2000, Jobs: []int64{1, 2, 8}}, {At: 3000, Jobs: []int64{7}}}, groups)

	apply := func(f *fsm, i uint64, typ byte, body any) {
		data, err := encodeCommand(typ, body)
		require.NoError(t, err)
		require.Nil(t, f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data}))
	}
	routes := map[string][]byte{"job/7": []byte("r"), "job/9": nil}
	grouped, earlier := newFSM(), newFSM()
	for _, f := range []*fsm{grouped, earlier} {
		apply(f, 1, cmdApplyCursors, map[int64]int64{1: 5000, 2: 100})
		apply(f, 2, cmdSetRoutes, map[string][]byte{"job/9": []byte("x")})
	}
	apply(grouped, 3, cmdGroupedTick, groupedTick{Cursors: groups, Routes: routes, DeleteCursors: []int64{8}})
	apply(earlier, 3, cmdTick, tickCommand{Cursors: cursors, Routes: routes, DeleteCursors: []int64{8}})

	want := map[int64]int64{1: 5000, 2: 2000, 3: 1000, 7: 3000} // 1 keeps its later cursor; 8 deleted
	require.Equal(t, want, grouped.cursors())
	require.Equal(t, want, earlier.cursors())
	require.Equal(t, map[string][]byte{"job/7": []byte("r")}, grouped.routes())
	require.Equal(t, earlier.routes(), grouped.routes())
	require.Error(t, grouped.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: []byte{cmdGroupedTick, '['}}).(error))
	require.Equal(t, want, grouped.cursors(), "a malformed entry changes nothing")
}
