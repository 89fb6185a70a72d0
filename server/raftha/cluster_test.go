package raftha

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// freeAddrs reserves n loopback ports long enough to learn their numbers.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	ls := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls[i], addrs[i] = l, l.Addr().String()
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return addrs
}

// leaderTracker records leadership callbacks across nodes: how many run at
// once (must never exceed one) and who started last.
type leaderTracker struct {
	mu        sync.Mutex
	running   int
	maxActive int
	starts    []string
}

func (lt *leaderTracker) callback(id string) func(ctx context.Context, term uint64) {
	return func(ctx context.Context, term uint64) {
		lt.mu.Lock()
		lt.running++
		lt.maxActive = max(lt.maxActive, lt.running)
		lt.starts = append(lt.starts, id)
		lt.mu.Unlock()
		<-ctx.Done()
		lt.mu.Lock()
		lt.running--
		lt.mu.Unlock()
	}
}

func (lt *leaderTracker) last() (string, int) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if len(lt.starts) == 0 {
		return "", lt.running
	}
	return lt.starts[len(lt.starts)-1], lt.running
}

type testCluster struct {
	nodes map[string]*Node
	peers []string
}

// openCluster starts n voters that all bootstrap the same Peers list.
func openCluster(t *testing.T, n int, lt *leaderTracker) *testCluster {
	t.Helper()
	addrs := freeAddrs(t, n)
	c := &testCluster{nodes: map[string]*Node{}}
	for i, a := range addrs {
		c.peers = append(c.peers, fmt.Sprintf("s%d=%s", i+1, a))
	}
	for i, a := range addrs {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = fmt.Sprintf("s%d", i+1)
		cfg.BindAddr = a
		cfg.Bootstrap = false
		cfg.Peers = c.peers
		nd, err := Open(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = nd.Close() })
		if lt != nil {
			nd.OnLeadership(lt.callback(cfg.ID))
		}
		c.nodes[cfg.ID] = nd
	}
	return c
}

// leader waits until exactly one open node leads and every open node knows
// it, and returns it.
func (c *testCluster) leader(t *testing.T, closed map[string]bool, within time.Duration) *Node {
	t.Helper()
	var lead *Node
	require.Eventually(t, func() bool {
		lead = nil
		for id, nd := range c.nodes {
			if closed[id] || !nd.IsLeader() {
				continue
			}
			if lead != nil {
				return false
			}
			lead = nd
		}
		if lead == nil {
			return false
		}
		for id, nd := range c.nodes {
			if !closed[id] && nd.LeaderID() != lead.ID() {
				return false
			}
		}
		return true
	}, within, 10*time.Millisecond, "no single agreed leader")
	return lead
}

func TestThreeVoterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lt := &leaderTracker{}
	c := openCluster(t, 3, lt)
	closed := map[string]bool{}

	first := c.leader(t, closed, 10*time.Second)
	require.Eventually(t, func() bool { id, running := lt.last(); return id == first.ID() && running == 1 },
		5*time.Second, 10*time.Millisecond, "leadership callback did not run on the leader")

	st, err := first.Status()
	require.NoError(t, err)
	require.Equal(t, "Leader", st.State)
	require.Len(t, st.Servers, 3)
	require.Equal(t, first.ID(), st.LeaderID)

	want := map[int64]int64{1: 1000, 2: 2000}
	require.NoError(t, first.ApplyCursors(ctx, want))
	for _, nd := range c.nodes {
		if nd != first {
			_, err := nd.Status()
			require.NoError(t, err)
			require.ErrorIs(t, nd.ApplyCursors(ctx, map[int64]int64{9: 9}), ErrNotLeader)
		}
	}

	// A graceful close transfers leadership: the next leader takes over fast.
	start := time.Now()
	require.NoError(t, first.Close())
	closed[first.ID()] = true
	second := c.leader(t, closed, 5*time.Second)
	require.NotEqual(t, first.ID(), second.ID())
	require.Eventually(t, func() bool { id, running := lt.last(); return id == second.ID() && running == 1 },
		5*time.Second, 10*time.Millisecond, "leadership callback did not move to the new leader")
	t.Logf("leadership moved from %s to %s in %s", first.ID(), second.ID(), time.Since(start))

	// The cursors applied on the old leader are on the new one.
	require.Equal(t, want, second.Cursors())
	require.NoError(t, second.ApplyCursors(ctx, map[int64]int64{1: 1500}))
	for id, nd := range c.nodes {
		if !closed[id] {
			require.Eventually(t, func() bool { v, _ := nd.Cursor(1); return v == 1500 }, 5*time.Second, 10*time.Millisecond)
		}
	}

	lt.mu.Lock()
	require.Equal(t, 1, lt.maxActive, "leadership callbacks of two nodes overlapped")
	lt.mu.Unlock()
}

func TestMembershipChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	lead := openLeader(t, cfg)
	require.NoError(t, lead.ApplyCursors(ctx, map[int64]int64{7: 700}))

	// A second server starts with an empty dir and no peers: it waits to be added.
	cfg2 := testConfig(t, t.TempDir())
	cfg2.ID, cfg2.Bootstrap = "s2", false
	n2, err := Open(cfg2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })
	require.ErrorIs(t, n2.AddVoter(ctx, "s3", "127.0.0.1:1"), ErrNotLeader)

	require.NoError(t, lead.AddVoter(ctx, "s2", n2.Addr()))
	require.Eventually(t, func() bool { v, _ := n2.Cursor(7); return v == 700 }, 10*time.Second, 10*time.Millisecond,
		"added voter did not catch up")
	st, err := n2.Status()
	require.NoError(t, err)
	require.Equal(t, "Follower", st.State)
	require.Equal(t, "s1", st.LeaderID)
	require.Len(t, st.Servers, 2)

	require.ErrorIs(t, lead.RemoveServer(ctx, "nope"), ErrUnknownServer)
	require.NoError(t, lead.RemoveServer(ctx, "s2"))
	st, err = lead.Status()
	require.NoError(t, err)
	require.Equal(t, []Server{{ID: "s1", Address: lead.Addr(), Suffrage: "Voter"}}, st.Servers)
	require.True(t, lead.IsLeader())
}

func TestBootstrapConfigurationAddsSelf(t *testing.T) {
	t.Parallel()
	cfg := Config{ID: "a", Peers: []string{"b=h:2", "c=h:3"}}
	conf := bootstrapConfiguration(cfg, "h:1")
	require.Len(t, conf.Servers, 3)
	require.Equal(t, "a", string(conf.Servers[0].ID))
	require.Equal(t, "h:1", string(conf.Servers[0].Address))

	cfg.Peers = []string{"b=h:2", "a=h:1", "c=h:3"}
	conf = bootstrapConfiguration(cfg, "ignored:9")
	require.Len(t, conf.Servers, 3)
	require.Equal(t, "h:1", string(conf.Servers[1].Address))

	bad := testConfig(t, t.TempDir())
	bad.Peers = []string{"a=h:1", "a=h:2"}
	_, err := Open(bad)
	require.ErrorContains(t, err, "listed twice")
}
