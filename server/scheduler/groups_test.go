package scheduler

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

func seenGroups(s *seenRevs) int64 { return s.groups.Load() }

// A manual group routes to the live nodes it lists, whatever group they
// registered with; an updated list applies after the group signal.
func TestRouteManualGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.relist = 24 * time.Hour
	h.sched = h.newScheduler()
	h.addNode("a", "x", "cmd")
	h.addNode("b", "m", "cmd") // registered with the group, but not listed
	h.addNode("c", "y", "cmd")
	h.addNode("d", "y", "other") // listed, but without the handler
	h.store.putGroup(store.Group{AppName: "m", AddressType: store.AddressManual, Addresses: []string{"a", "d", "c"}})
	j := routed(1, cluster.RouteRound)
	j.Group = "m"
	h.store.putJob(j)
	h.start()
	h.steps(6)
	// Job 1's cycle starts at its id modulo the two listed nodes.
	require.Equal(t, []string{"c", "a", "c", "a", "c", "a"}, h.nodesOf(1, 6))
	require.Eventually(t, func() bool {
		return (h.get(h.keys.Job("a", 1)) != nil || h.get(h.keys.Job("c", 1)) != nil) && h.count(h.keys.JobPrefix("b")) == 0
	}, 10*time.Second, 5*time.Millisecond, "placement ignores the manual group")

	h.store.putGroup(store.Group{AppName: "m", AddressType: store.AddressManual, Addresses: []string{"b"}})
	rev := h.put(h.keys.GroupSignal("m"), "1")
	h.waitSeen(seenGroups, rev)
	h.steps(4)
	require.Equal(t, []string{"b", "b", "b", "b"}, h.nodesOf(1, 10)[6:])
	require.Eventually(t, func() bool {
		return h.get(h.keys.Job("b", 1)) != nil && h.get(h.keys.Job("a", 1)) == nil && h.get(h.keys.Job("c", 1)) == nil
	}, 10*time.Second, 5*time.Millisecond, "placement did not follow the group")

	// Back to auto: the nodes registered with the group.
	h.store.putGroup(store.Group{AppName: "m", AddressType: store.AddressAuto})
	rev = h.put(h.keys.GroupSignal("m"), "2")
	h.waitSeen(seenGroups, rev)
	h.addNode("e", "m", "cmd")
	resp, err := h.cli.Get(context.Background(), h.keys.Node("e"))
	require.NoError(t, err)
	h.waitSeen(seenNodes, resp.Kvs[0].ModRevision) // the loop knows e before the next fires
	h.steps(4)
	got := count(h.nodesOf(1, 14)[10:])
	require.Equal(t, map[string]int{"b": 2, "e": 2}, got)
}

// healthNode is a node's /healthz on a loopback httptest listener.
type healthNode struct {
	srv  *httptest.Server
	sick atomic.Bool
}

func newHealthNode(t *testing.T) *healthNode {
	t.Helper()
	n := &healthNode{}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if n.sick.Load() {
			http.Error(w, "sick", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// waitBeats waits for two complete beat rounds: the second one started
// after the caller's change.
func (h *harness) waitBeats() {
	h.t.Helper()
	from := h.sched.seen.beats.Load()
	require.Eventually(h.t, func() bool { return h.sched.seen.beats.Load() >= from+2 }, 10*time.Second, time.Millisecond)
}

// FAILOVER skips a node whose /healthz beat fails, and returns to it once
// it beats again.
func TestRouteFailoverBeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.relist = 24 * time.Hour
	h.beat = 10 * time.Millisecond
	h.sched = h.newScheduler()
	nodes := map[string]*healthNode{}
	for _, id := range []string{"a", "b", "c"} {
		nodes[id] = newHealthNode(t)
		h.addNodeAt(id, "g", nodes[id].srv.Listener.Addr().String(), "cmd")
	}
	h.store.putJob(routed(1, cluster.RouteFailover))
	h.start()
	h.waitBeats()
	h.steps(3)
	nodes["a"].sick.Store(true)
	h.waitBeats()
	h.steps(3)
	nodes["b"].sick.Store(true)
	h.waitBeats()
	h.steps(2)
	nodes["a"].sick.Store(false)
	nodes["b"].sick.Store(false)
	h.waitBeats()
	h.steps(2)
	require.Equal(t, []string{"a", "a", "a", "b", "b", "b", "c", "c", "a", "a"}, h.nodesOf(1, 10))

	// Every node failing its beat: the run fails.
	for _, n := range nodes {
		n.sick.Store(true)
	}
	h.waitBeats()
	h.step()
	runs, _, _ := h.store.snapshot()
	r := runs[cluster.FireID(1, t0.Add(11*time.Second))]
	require.Equal(t, cluster.StatusFailed, r.Status)
	require.Contains(t, r.Message, "FAILOVER")
	require.NoError(t, h.stop())
}

// The beat goroutine is owned: it ends when its ctx ends, and stop waits
// for it (idempotent). A node never probed counts as healthy; a node that
// left is forgotten.
func TestProberLifecycle(t *testing.T) {
	t.Parallel()
	n := newHealthNode(t)
	n.sick.Store(true)
	var rounds atomic.Int64
	cfg := Config{BeatInterval: 5 * time.Millisecond}
	cfg.setDefaults()
	p := newProber(cfg, cfg.Logger, &rounds)
	host, port := splitAddr(t, n.srv.Listener.Addr().String())
	nodes := map[string]cluster.NodeInfo{"a": {UUID: "a", IP: host, Port: port}}
	p.setNodes(nodes)
	require.True(t, p.healthy("a"), "a node never probed is healthy")

	ctx, cancel := context.WithCancel(context.Background())
	p.start(ctx)
	require.Eventually(t, func() bool { return rounds.Load() >= 2 }, 10*time.Second, time.Millisecond)
	require.False(t, p.healthy("a"))
	p.setNodes(map[string]cluster.NodeInfo{})
	require.True(t, p.healthy("a"), "a node that left is forgotten")

	cancel()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("beat goroutine did not end with its ctx")
	}
	p.stop()
	p.stop()
	var off *prober // beats off
	require.True(t, off.healthy("a"))
	off.setNodes(nodes)
	off.start(context.Background())
	off.stop()
}

func splitAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return host, p
}
