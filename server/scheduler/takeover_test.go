package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/store"
)

// failingCursors is a CursorStore whose ApplyTick fails while fail is set:
// a leader that dies before its raft entry commits.
type failingCursors struct {
	CursorStore
	fail     atomic.Bool
	failures atomic.Int64
}

func (c *failingCursors) ApplyTick(ctx context.Context, cur map[int64]int64, routes map[string][]byte, del []int64) error {
	if c.fail.Load() {
		c.failures.Add(1)
		return errors.New("raft: leadership lost while committing")
	}
	return c.CursorStore.ApplyTick(ctx, cur, routes, del)
}

// recordingDispatcher records every dispatched fire id and can silently
// drop the fires of one job (a leader that died between two dispatch
// transactions: those fires are recorded in SQL but never reached etcd).
type recordingDispatcher struct {
	Dispatcher
	drop atomic.Int64

	mu    sync.Mutex
	fires []string
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, term uint64, items []dispatch.DispatchItem) error {
	var keep []dispatch.DispatchItem
	for _, it := range items {
		if it.Dispatch.Job.JobID != d.drop.Load() {
			keep = append(keep, it)
		}
	}
	if err := d.Dispatcher.Dispatch(ctx, term, keep); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range keep {
		d.fires = append(d.fires, it.Dispatch.FireID)
	}
	return nil
}

func (d *recordingDispatcher) sent() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.fires...)
}

func openSQLite(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.EnsureGroup(ctx, "g", "G")
	require.NoError(t, err)
	return db
}

func createJobs(t *testing.T, db *store.Store, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		j := job(0, everySecond)
		require.NoError(t, db.CreateJob(context.Background(), &j))
		ids = append(ids, j.ID)
	}
	return ids
}

// dispatched returns the Dispatch in a run key, nil when the key is absent.
func (h *harness) dispatched(node, fireID string) *cluster.Dispatch {
	h.t.Helper()
	b := h.get(h.keys.Run(node, fireID))
	if b == nil {
		return nil
	}
	var d cluster.Dispatch
	require.NoError(h.t, json.Unmarshal(b, &d))
	return &d
}

func waitArmedOn(t *testing.T, c *fakeClock, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return c.armedAt(at) }, 10*time.Second, time.Millisecond,
		"loop never armed its timer at %s; timers at %v", at, c.timerTimes())
}

// A leader recorded and dispatched a batch but died before its raft entry
// committed; the next leader fires the same fire ids again. It dispatches
// only the fire that never reached etcd: not the one a node still holds,
// not the one a node already ran (key deleted, result stored).
func TestTakeoverResendsOnlyUndispatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQLite(t)
	h := newHarness(t)
	h.jobs, h.runs = db, db
	h.addNode("n1", "g", "cmd")
	ids := createJobs(t, db, 3)
	pending, ran, never := ids[0], ids[1], ids[2]

	// Leader 1.
	cur1 := &failingCursors{CursorStore: h.cursors}
	disp1 := &recordingDispatcher{Dispatcher: h.disp}
	term1 := h.term
	h.sched = New(Config{
		Jobs: db, Runs: db, Cursors: cur1, Dispatcher: disp1, Etcd: h.cli, Keys: h.keys,
		Clock: h.clock, Location: time.UTC, Logger: slog.New(slog.DiscardHandler), BeatInterval: -1,
	})
	h.start()
	h.step() // second 1 fires and commits
	at1, at2 := t0.Add(time.Second), t0.Add(2*time.Second)
	for _, id := range ids {
		require.NotNil(t, h.dispatched("n1", cluster.FireID(id, at1)))
	}

	// Second 2: recorded; dispatched except for one job; the raft entry fails.
	cur1.fail.Store(true)
	disp1.drop.Store(never)
	h.clock.Advance(time.Second)
	require.Eventually(t, func() bool { return cur1.failures.Load() > 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, h.stop()) // leader 1 dies
	for _, id := range ids {
		r, err := db.RunByFireID(ctx, cluster.FireID(id, at2))
		require.NoError(t, err)
		require.Equal(t, cluster.StatusTriggered, r.Status)
	}
	require.NotNil(t, h.dispatched("n1", cluster.FireID(pending, at2)))
	require.Nil(t, h.dispatched("n1", cluster.FireID(never, at2)))

	// The node ran one fire: result stored, then its run key deleted.
	ranFire := cluster.FireID(ran, at2)
	require.NoError(t, db.ApplyResults(ctx, []cluster.RunResult{{FireID: ranFire, JobID: ran, Node: "n1", Status: cluster.StatusSuccess}}))
	_, err := h.cli.Delete(ctx, h.keys.Run("n1", ranFire))
	require.NoError(t, err)

	// Leader 2, a higher term, same etcd, SQL and raft state.
	disp2 := &recordingDispatcher{Dispatcher: dispatch.New(h.cli, h.keys, "s2", testRing)}
	h.term = term1 + 1
	h.sched = New(Config{
		Jobs: db, Runs: db, Cursors: h.cursors, Dispatcher: disp2, Etcd: h.cli, Keys: h.keys,
		Clock: h.clock, Location: time.UTC, Logger: slog.New(slog.DiscardHandler), BeatInterval: -1,
	})
	h.start()
	h.waitArmed(t0.Add(3 * time.Second))

	require.Equal(t, []string{cluster.FireID(never, at2)}, disp2.sent(), "leader 2 re-sent a fire that was dispatched")
	d := h.dispatched("n1", cluster.FireID(pending, at2))
	require.NotNil(t, d)
	require.Equal(t, term1, d.Term, "the pending run key was rewritten")
	require.Nil(t, h.dispatched("n1", ranFire), "a run that already ran was dispatched again")
	d = h.dispatched("n1", cluster.FireID(never, at2))
	require.NotNil(t, d, "a recorded fire that never reached etcd was not dispatched")
	require.Equal(t, term1+1, d.Term)
	r, err := db.RunByFireID(ctx, ranFire)
	require.NoError(t, err)
	require.Equal(t, cluster.StatusSuccess, r.Status)
	cursors := h.cursors.Cursors()
	for _, id := range ids {
		require.Equal(t, at2.UnixMilli(), cursors[id])
	}

	// The next second fires normally.
	h.clock.Advance(time.Second)
	h.waitArmed(t0.Add(4 * time.Second))
	require.Len(t, disp2.sent(), 4)
	require.Equal(t, int64(3*3-1), h.count(h.keys.RunPrefix("n1")), "seconds 1..3 of three jobs, but the run that ended")
}

// A stalled leader that wakes up after another server claimed a newer term
// dispatches nothing and stops at once with ErrFenced; the runs it recorded
// in SQL before its dispatch was refused are dispatched by the new leader,
// so every scheduled second of every job has exactly one run key.
func TestStalledLeaderWakesFenced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQLite(t)
	h := newHarness(t)
	h.jobs, h.runs = db, db
	h.addNode("n1", "g", "cmd")
	ids := createJobs(t, db, 5)
	termA := h.term
	gate := &stallingRecorder{RunRecorder: db, stalled: make(chan struct{}), resume: make(chan struct{})}
	h.runs = gate
	h.sched = h.newScheduler()
	h.start()
	h.step()
	h.step() // A fired seconds 1 and 2

	// A's tick at second 3 records its runs, then A stalls (SIGSTOP)
	// before dispatching them.
	gate.armed.Store(true)
	h.clock.Advance(time.Second)
	select {
	case <-gate.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("A never recorded second 3")
	}

	// B claims a newer term and starts meanwhile.
	clockB := newFakeClock(t0.Add(2 * time.Second))
	dispB := &recordingDispatcher{Dispatcher: dispatch.New(h.cli, h.keys, "s2", testRing)}
	schedB := New(Config{
		Jobs: db, Runs: db, Cursors: h.cursors, Dispatcher: dispB, Etcd: h.cli, Keys: h.keys,
		Clock: clockB, Location: time.UTC, Logger: slog.New(slog.DiscardHandler), BeatInterval: -1,
	})
	ctxB, cancelB := context.WithCancel(ctx)
	doneB := make(chan error, 1)
	go func() { doneB <- schedB.Run(ctxB, termA+1) }()
	t.Cleanup(func() { cancelB(); <-doneB })
	waitArmedOn(t, clockB, t0.Add(3*time.Second))
	claim, err := h.cli.Get(ctx, h.keys.Leader())
	require.NoError(t, err)
	require.Equal(t, cluster.LeaderValue(termA+1, "s2"), string(claim.Kvs[0].Value))
	claimRev := claim.Kvs[0].ModRevision

	// A wakes up: its dispatch is refused and Run returns ErrFenced promptly.
	close(gate.resume)
	select {
	case err := <-h.done:
		h.done <- err
		require.ErrorIs(t, err, dispatch.ErrFenced)
	case <-time.After(5 * time.Second):
		t.Fatal("the fenced loop did not return")
	}
	at3 := t0.Add(3 * time.Second)
	for _, id := range ids {
		r, err := db.RunByFireID(ctx, cluster.FireID(id, at3))
		require.NoError(t, err, "A records before it dispatches")
		require.Equal(t, cluster.StatusTriggered, r.Status)
		require.Nil(t, h.dispatched("n1", cluster.FireID(id, at3)), "a fenced leader dispatched")
	}

	// B fires seconds 3 (replayed: recorded by A, never dispatched) and 4.
	clockB.Advance(time.Second)
	waitArmedOn(t, clockB, t0.Add(4*time.Second))
	clockB.Advance(time.Second)
	waitArmedOn(t, clockB, t0.Add(5*time.Second))
	require.Len(t, dispB.sent(), 2*len(ids))

	// End state: every second 1..4 of every job has exactly one run key,
	// written by A before B's claim or by B; nothing of A's after the claim.
	resp, err := h.cli.Get(ctx, h.keys.RunPrefix("n1"), clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 4*len(ids))
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		var d cluster.Dispatch
		require.NoError(t, json.Unmarshal(cluster.RecordBody(kv.Value), &d))
		require.False(t, seen[d.FireID])
		seen[d.FireID] = true
		if d.Term == termA {
			require.Less(t, kv.ModRevision, claimRev, "A wrote %s after B's claim", d.FireID)
			require.True(t, d.ScheduledAt.Before(at3))
		} else {
			require.Equal(t, termA+1, d.Term)
			require.False(t, d.ScheduledAt.Before(at3))
		}
	}
	for _, id := range ids {
		for s := 1; s <= 4; s++ {
			require.True(t, seen[cluster.FireID(id, t0.Add(time.Duration(s)*time.Second))])
		}
	}
}

// InsertRuns committed but its answer was lost: the retry finds every fire
// recorded (replayed), sees no run keys, and dispatches each exactly once.
func TestLostInsertAckDispatchesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	for i := range 5 {
		h.store.putJob(job(int64(i+1), everySecond))
	}
	h.store.lostAcks = 1
	h.start()
	h.waitArmed(t0.Add(time.Second))
	h.clock.Advance(time.Second)
	h.waitArmed(t0.Add(time.Second + DefaultRetryMin))
	require.Zero(t, h.count(h.keys.RunPrefix("n1")))
	h.clock.Advance(DefaultRetryMin)
	h.waitArmed(t0.Add(2 * time.Second))
	runs, calls, dups := h.store.snapshot()
	require.Equal(t, 2, calls)
	require.Equal(t, 5, dups, "the retry found every fire recorded")
	require.Len(t, runs, 5)
	require.Equal(t, int64(5), h.count(h.keys.RunPrefix("n1")))
	require.Equal(t, int64(1), h.cursors.applies.Load())
}

// A leader with nothing due writes nothing, yet it stops as soon as a newer
// term claims the fence (it watches the leader key).
func TestIdleLeaderStopsOnNewerClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, "0 0 * * * *")) // hourly: nothing due during the test
	h.start()
	h.waitArmed(t0.Add(time.Hour))
	require.NoError(t, dispatch.New(h.cli, h.keys, "s2", testRing).Claim(context.Background(), h.term+1))
	select {
	case err := <-h.done:
		h.done <- err
		require.ErrorIs(t, err, dispatch.ErrFenced)
	case <-time.After(5 * time.Second):
		t.Fatal("an idle fenced loop kept running")
	}
}

// stallingRecorder records runs, and once armed stalls after recording
// (a leader stopped between its SQL insert and its dispatch) until resumed.
type stallingRecorder struct {
	RunRecorder
	armed   atomic.Bool
	stalled chan struct{}
	resume  chan struct{}
}

func (r *stallingRecorder) InsertRuns(ctx context.Context, runs []store.Run) ([]string, error) {
	ids, err := r.RunRecorder.InsertRuns(ctx, runs)
	if err == nil && r.armed.CompareAndSwap(true, false) {
		close(r.stalled)
		<-r.resume
	}
	return ids, err
}
