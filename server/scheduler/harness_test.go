package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/raftha"
	"github.com/cronix/cronix/server/store"
)

// testRing signs the test dispatchers' records.
var testRing, _ = cluster.KeyringFromTokens("scheduler-test-token")

// t0 is the fake clock's start: a whole second.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// memStore implements JobSource and RunRecorder in memory, like the SQL
// store: InsertRuns ignores fire ids already present.
type memStore struct {
	mu          sync.Mutex
	jobs        map[int64]store.Job
	groups      map[string]store.Group
	runs        map[string]store.Run
	insertCalls int
	duplicates  int
	failInserts int // the next calls fail
	lostAcks    int // the next calls insert but then fail (the commit's answer was lost)
	batchLoads  int // JobsByID calls
	// inserting, when set, runs in each InsertRuns call (e.g. to advance
	// the fake clock: an insert that takes that long).
	inserting func()
}

func newMemStore() *memStore {
	return &memStore{jobs: map[int64]store.Job{}, groups: map[string]store.Group{}, runs: map[string]store.Run{}}
}

func (m *memStore) ListGroups(context.Context) ([]store.Group, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.Group, 0, len(m.groups))
	for _, g := range m.groups {
		out = append(out, g)
	}
	return out, nil
}

func (m *memStore) putGroup(g store.Group) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups[g.AppName] = g
}

func (m *memStore) EnabledJobs(context.Context) ([]store.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Job
	for _, j := range m.jobs {
		if j.Enabled {
			out = append(out, j)
		}
	}
	return out, nil
}

func (m *memStore) ForEnabledJobs(ctx context.Context, fn func(j *store.Job) error) error {
	jobs, err := m.EnabledJobs(ctx)
	if err != nil {
		return err
	}
	for i := range jobs {
		if err := fn(&jobs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) EnabledJobRevisions(ctx context.Context) ([]store.JobRevision, error) {
	jobs, err := m.EnabledJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]store.JobRevision, len(jobs))
	for i, j := range jobs {
		out[i] = store.JobRevision{ID: j.ID, Revision: j.Revision, ScheduleType: j.ScheduleType}
	}
	return out, nil
}

func (m *memStore) GetJob(_ context.Context, id int64) (*store.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %d: %w", id, store.ErrNotFound)
	}
	return &j, nil
}

func (m *memStore) JobsByID(_ context.Context, ids []int64) ([]store.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batchLoads++
	var out []store.Job
	for _, id := range ids {
		if j, ok := m.jobs[id]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}

func (m *memStore) InsertRuns(_ context.Context, runs []store.Run) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.insertCalls++
	if m.inserting != nil {
		m.inserting()
	}
	if m.failInserts > 0 {
		m.failInserts--
		return nil, errors.New("database is locked")
	}
	var ids []string
	for _, r := range runs {
		if _, ok := m.runs[r.FireID]; ok {
			m.duplicates++
			continue
		}
		m.runs[r.FireID] = r
		ids = append(ids, r.FireID)
	}
	if m.lostAcks > 0 {
		m.lostAcks--
		return nil, errors.New("connection reset after commit")
	}
	return ids, nil
}

func (m *memStore) RunsByFireIDs(_ context.Context, ids []string) ([]store.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Run
	for _, id := range ids {
		if r, ok := m.runs[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memStore) putJob(j store.Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs[j.ID] = j
}

func (m *memStore) deleteJob(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jobs, id)
}

func (m *memStore) snapshot() (runs map[string]store.Run, calls, dups int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.runs), m.insertCalls, m.duplicates
}

// countingCursors counts the raft entries the loop writes on the real raft node.
type countingCursors struct {
	*raftha.Node
	applies atomic.Int64
}

func (c *countingCursors) ApplyTick(ctx context.Context, cur map[int64]int64, routes map[string][]byte, del []int64) error {
	c.applies.Add(1)
	return c.Node.ApplyTick(ctx, cur, routes, del)
}

type harness struct {
	t       *testing.T
	metrics *metrics.Metrics
	cli     *clientv3.Client
	keys    cluster.Keys
	store   *memStore
	jobs    JobSource   // h.store unless a test uses the SQL store
	runs    RunRecorder // h.store unless a test uses the SQL store
	raft    *raftha.Node
	cursors *countingCursors
	disp    *dispatch.Dispatcher
	txns    atomic.Int64
	clock   *fakeClock
	sched   *Scheduler
	term    uint64
	// relist is the loop's RelistInterval (0 = default). Tests stepping
	// past it set it longer: waitArmed cannot tell the relist timer from
	// the fire timer.
	relist time.Duration
	// beat is the loop's BeatInterval: negative (off) unless a test of
	// FAILOVER beats sets it before newScheduler.
	beat time.Duration
	// ahead is the loop's DispatchAhead (0: off, as in most tests),
	// aheadMin its DispatchAheadMin (0: always ahead).
	ahead, aheadMin time.Duration

	// logs holds what the loop logged (warnings and errors), beside the
	// test's log.
	logs syncbuf.Buffer

	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cli, keys := testEtcd(t)
	h := &harness{t: t, cli: cli, keys: keys, store: newMemStore(), clock: newFakeClock(t0), beat: -1, metrics: metrics.New()}
	h.jobs, h.runs = h.store, h.store
	node, err := raftha.Open(raftha.Config{
		ID: "s1", Dir: t.TempDir(), BindAddr: "127.0.0.1:0", Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close() })
	require.Eventually(t, node.IsLeader, 10*time.Second, 5*time.Millisecond)
	h.raft = node
	h.term = node.Term()
	h.cursors = &countingCursors{Node: node}
	h.disp = dispatch.New(cli, keys, "s1", testRing, dispatch.WithTxnHook(func(int) { h.txns.Add(1) }))
	h.sched = h.newScheduler()
	return h
}

func (h *harness) newScheduler() *Scheduler {
	return New(Config{
		PlaceJobs: true,
		Jobs:      h.jobs, Runs: h.runs, Cursors: h.cursors, Dispatcher: h.disp,
		Etcd: h.cli, Keys: h.keys, Clock: h.clock, Location: time.UTC, RelistInterval: h.relist,
		BeatInterval: h.beat, BeatTimeout: time.Second, DispatchAhead: h.ahead, DispatchAheadMin: h.aheadMin,
		Metrics: h.metrics,
		Logger:  slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{h.t}, &h.logs), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// misfires is the scheduler's cronix_misfires_total for policy, as
// scraped.
func (h *harness) misfires(policy string) string {
	h.t.Helper()
	rec := httptest.NewRecorder()
	h.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	require.NoError(h.t, err)
	prefix := `cronix_misfires_total{policy="` + policy + `"} `
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	h.t.Fatalf("no %s in the scrape", prefix)
	return ""
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// addNode registers a node at a loopback address with a closed port
// (beats to it fail; tests of beats use addNodeAt).
func (h *harness) addNode(uuid, group string, handlers ...string) {
	h.t.Helper()
	h.addNodeAt(uuid, group, "127.0.0.1:1", handlers...)
}

// addNodeAt registers a node listening at addr ("127.0.0.x:port").
func (h *harness) addNodeAt(uuid, group, addr string, handlers ...string) {
	h.t.Helper()
	h.addNodeWith(uuid, group, addr, nil, handlers...)
}

// addNodeWith registers a node at addr offering features.
func (h *harness) addNodeWith(uuid, group, addr string, features []string, handlers ...string) {
	h.t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(h.t, err)
	require.True(h.t, net.ParseIP(host).IsLoopback(), "test nodes must have loopback addresses")
	p, err := strconv.Atoi(port)
	require.NoError(h.t, err)
	n := cluster.NodeInfo{UUID: uuid, Group: group, IP: host, Port: p, Started: t0, Status: NodeOnline, Features: features}
	for _, p := range handlers {
		n.Plugins = append(n.Plugins, cluster.PluginInfo{Name: p, Version: "1"})
	}
	b, err := json.Marshal(n)
	require.NoError(h.t, err)
	_, err = h.cli.Put(context.Background(), h.keys.Node(uuid), string(b))
	require.NoError(h.t, err)
}

// newJobSeq numbers the names of jobs made with id 0 (for a store to
// number): job names are unique within a group.
var newJobSeq atomic.Int64

func job(id int64, expr string) store.Job {
	name := fmt.Sprintf("job-%d", id)
	if id == 0 {
		name = fmt.Sprintf("job-new-%d", newJobSeq.Add(1))
	}
	return store.Job{
		ID: id, Name: name, Group: "g", ScheduleType: "cron", Schedule: expr,
		Timezone: "UTC", Handler: "cmd", Params: json.RawMessage(`{"cmd":"true"}`), TimeoutSeconds: 30,
		Enabled: true, Revision: 1,
	}
}

// start runs the loop in the background until stop.
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	done := make(chan error, 1)
	h.done = done
	s, term := h.sched, h.term
	go func() { done <- s.Run(ctx, term) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

// stop cancels the loop and returns its result.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("scheduler did not stop")
		return nil
	}
}

// waitArmed waits until the loop sleeps until at: it has handled
// everything due before at.
func (h *harness) waitArmed(at time.Time) {
	h.t.Helper()
	if !assert.Eventually(h.t, func() bool { return h.clock.armedAt(at) }, 10*time.Second, time.Millisecond) {
		var runErr any = "still running"
		select {
		case err := <-h.done:
			h.done <- err
			runErr = err
		default:
		}
		h.t.Fatalf("loop never armed its timer at %s; now %s, timers at %v; loop: %v", at, h.clock.Now(), h.clock.timerTimes(), runErr)
	}
}

// step advances the clock by one second and waits for the loop to handle it.
func (h *harness) step() {
	h.t.Helper()
	now := h.clock.Now()
	h.waitArmed(now.Add(time.Second))
	h.clock.Advance(time.Second)
	h.waitArmed(now.Add(2 * time.Second))
}

func (h *harness) count(prefix string) int64 {
	h.t.Helper()
	resp, err := h.cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(h.t, err)
	return resp.Count
}

func (h *harness) get(key string) []byte {
	h.t.Helper()
	resp, err := h.cli.Get(context.Background(), key)
	require.NoError(h.t, err)
	if len(resp.Kvs) == 0 {
		return nil
	}
	return cluster.RecordBody(resp.Kvs[0].Value) // signed records: their body
}
