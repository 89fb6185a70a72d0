package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

type bundle struct {
	t    *testing.T
	db   *store.Store
	cli  *clientv3.Client
	keys cluster.Keys
	job  int64
	at   time.Time
	n    int
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	j := &store.Job{Name: "j", Group: "default", ScheduleType: "none", Timezone: "UTC", Handler: "cmd",
		Params: []byte(`{}`), TimeoutSeconds: 30, Enabled: true}
	require.NoError(t, db.CreateJob(ctx, j))
	cli, keys := etcd.Client(t)
	return &bundle{t: t, db: db, cli: cli, keys: keys, job: j.ID, at: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
}

// node registers a node under a lease and returns the lease.
func (b *bundle) node(uuid string) clientv3.LeaseID {
	b.t.Helper()
	ctx := context.Background()
	l, err := b.cli.Grant(ctx, 60)
	require.NoError(b.t, err)
	_, err = b.cli.Put(ctx, b.keys.Node(uuid), `{"uuid":"`+uuid+`"}`, clientv3.WithLease(l.ID))
	require.NoError(b.t, err)
	return l.ID
}

// run records a run on node with status and puts its run key.
func (b *bundle) run(node, status string) string {
	b.t.Helper()
	ctx := context.Background()
	b.n++
	r := store.Run{FireID: cluster.FireID(b.job, b.at.Add(time.Duration(b.n)*time.Second)), JobID: b.job,
		Trigger: cluster.TriggerSchedule, Status: status, Node: node, ScheduledAt: b.at}
	_, err := b.db.InsertRuns(ctx, []store.Run{r})
	require.NoError(b.t, err)
	_, err = b.cli.Put(ctx, b.keys.Run(node, r.FireID), "{}")
	require.NoError(b.t, err)
	return r.FireID
}

func (b *bundle) status(fireID string) *store.Run {
	b.t.Helper()
	r, err := b.db.RunByFireID(context.Background(), fireID)
	require.NoError(b.t, err)
	return r
}

func (b *bundle) hasKey(node, fireID string) bool {
	b.t.Helper()
	resp, err := b.cli.Get(context.Background(), b.keys.Run(node, fireID), clientv3.WithCountOnly())
	require.NoError(b.t, err)
	return resp.Count > 0
}

func (b *bundle) start(interval, grace time.Duration) {
	b.t.Helper()
	m := New(Config{Store: b.db, Etcd: b.cli, Keys: b.keys, Interval: interval, Grace: grace,
		Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(b.t, err)
		case <-time.After(5 * time.Second):
			b.t.Error("monitor did not stop")
		}
	})
}

// A node whose lease expires: its unfinished runs become lost within
// Interval+Grace (plus a pass) and their run keys go; runs on a live node
// and terminal runs are untouched.
func TestLostNodeRunsMarkedLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := b.node("dead")
	b.node("live")
	triggered := b.run("dead", cluster.StatusTriggered)
	running := b.run("dead", cluster.StatusRunning)
	done := b.run("dead", cluster.StatusSuccess)
	onLive := b.run("live", cluster.StatusTriggered)

	const interval, grace = 50 * time.Millisecond, 150 * time.Millisecond
	b.start(interval, grace)
	// While the node is live nothing changes, across several passes.
	deadline := time.Now().Add(3 * interval)
	require.Never(t, func() bool { return b.status(triggered).Status != cluster.StatusTriggered }, time.Until(deadline), 10*time.Millisecond)

	_, err := b.cli.Revoke(context.Background(), dead) // the lease expires
	require.NoError(t, err)
	gone := time.Now()
	require.Eventually(t, func() bool {
		return b.status(triggered).Status == cluster.StatusLost && b.status(running).Status == cluster.StatusLost
	}, 10*time.Second, 10*time.Millisecond)
	took := time.Since(gone)
	require.Less(t, took, 2*interval+grace+2*time.Second, "took %s", took)
	require.GreaterOrEqual(t, took, grace, "marked before the grace period")
	r := b.status(triggered)
	require.Equal(t, "node dead lost its lease (crashed or partitioned)", r.Message)
	require.NotNil(t, r.FinishedAt)
	require.Eventually(t, func() bool { return !b.hasKey("dead", triggered) && !b.hasKey("dead", running) },
		10*time.Second, 10*time.Millisecond)

	require.Equal(t, cluster.StatusSuccess, b.status(done).Status, "a terminal run changed")
	require.Equal(t, cluster.StatusTriggered, b.status(onLive).Status, "a run on a live node changed")
	require.True(t, b.hasKey("live", onLive))
}

// A node that is missing for less than Grace and comes back keeps its runs.
func TestNodeBackWithinGraceKeepsRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.node("n1")
	fire := b.run("n1", cluster.StatusRunning)
	m := New(Config{Store: b.db, Etcd: b.cli, Keys: b.keys, Grace: time.Hour})
	ctx := context.Background()
	missing := map[string]time.Time{}
	_, err := b.cli.Delete(ctx, b.keys.Node("n1"))
	require.NoError(t, err)
	n, err := m.pass(ctx, missing)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Contains(t, missing, "n1")
	b.node("n1")
	n, err = m.pass(ctx, missing)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NotContains(t, missing, "n1", "a node back was not forgotten")
	require.Equal(t, cluster.StatusRunning, b.status(fire).Status)
	require.True(t, b.hasKey("n1", fire))
}

// Many lost runs: paged reads, batched marks and deletes, bounded per pass.
func TestManyLostRunsPaged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var runs []store.Run
	var fires []string
	for i := range 300 {
		id := cluster.FireID(b.job, b.at.Add(time.Duration(i)*time.Second))
		runs = append(runs, store.Run{FireID: id, JobID: b.job, Status: cluster.StatusTriggered, Node: "gone", ScheduledAt: b.at})
		fires = append(fires, id)
		_, err := b.cli.Put(ctx, b.keys.Run("gone", id), "{}")
		require.NoError(t, err)
	}
	_, err := b.db.InsertRuns(ctx, runs)
	require.NoError(t, err)
	clock := &stepClock{now: b.at}
	m := New(Config{Store: b.db, Etcd: b.cli, Keys: b.keys, Clock: clock, Grace: time.Second, PageSize: 50, MaxPages: 4})
	missing := map[string]time.Time{}
	n, err := m.pass(ctx, missing)
	require.NoError(t, err)
	require.Zero(t, n, "first seen missing: grace starts")
	clock.now = clock.now.Add(time.Second)
	total := 0
	for pass := 0; total < 300; pass++ {
		require.Less(t, pass, 3, "not done in two passes")
		n, err = m.pass(ctx, missing)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 200, "a pass read more than MaxPages×PageSize")
		total += n
	}
	require.Equal(t, 300, total)
	resp, err := b.cli.Get(ctx, b.keys.RunPrefix("gone"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count)
	for _, f := range []string{fires[0], fires[299]} {
		require.Equal(t, cluster.StatusLost, b.status(f).Status, fmt.Sprint(f))
	}
}

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                         { return c.now }
func (c *stepClock) After(d time.Duration) <-chan time.Time { return make(chan time.Time) }
