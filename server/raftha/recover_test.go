package raftha

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecoverLostQuorum: of three voters two are lost for good; the
// survivor cannot elect itself. Recover on it (stopped) with itself as the
// only peer and a minimum term keeps its state, and it leads again in a
// term above that minimum.
func TestRecoverLostQuorum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := openCluster(t, 3, nil)
	var lead *Node
	require.Eventually(t, func() bool {
		lead = c.leader(t, nil, 20*time.Second)
		return lead.ApplyCursors(ctx, map[int64]int64{7: 7000}) == nil
	}, 30*time.Second, 10*time.Millisecond)

	var survivor *Node
	for _, nd := range c.nodes {
		if nd != lead {
			survivor = nd
			break
		}
	}
	require.Eventually(t, func() bool { v, ok := survivor.Cursor(7); return ok && v == 7000 }, 10*time.Second, 10*time.Millisecond)
	for _, nd := range c.nodes {
		require.NoError(t, nd.Close())
	}

	cfg := survivor.cfg
	cfg.Peers = nil
	term, err := Recover(RecoverConfig{Dir: cfg.Dir, Peers: []string{cfg.ID + "=" + cfg.BindAddr}, MinTerm: 500})
	require.NoError(t, err)
	require.Equal(t, uint64(500), term)

	n := openApplied(t, cfg)
	require.Greater(t, n.Term(), uint64(500))
	v, ok := n.Cursor(7)
	require.True(t, ok)
	require.Equal(t, int64(7000), v)
	st, err := n.Status()
	require.NoError(t, err)
	require.Len(t, st.Servers, 1)

	_, err = Recover(RecoverConfig{Dir: t.TempDir(), Peers: []string{"s1=127.0.0.1:1"}})
	require.ErrorContains(t, err, "no raft state")
}

// progressMap is a ProgressSource the test fills (the servers' real one
// reads etcd; here the replicas' reports are taken from their Status).
type progressMap struct {
	mu sync.Mutex
	m  map[string]Progress
}

func (p *progressMap) Progress(context.Context) (map[string]Progress, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Progress{}
	for k, v := range p.m {
		out[k] = v
	}
	return out, nil
}

// TestPromoterPromotesOnlyCaughtUpNonvoters: a live non-voter reporting
// its progress is promoted; one at a dead address never reports and stays
// a non-voter, and the cluster keeps committing.
func TestPromoterPromotesOnlyCaughtUpNonvoters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lead := openLeader(t, testConfig(t, t.TempDir()))
	addrs := freeAddrs(t, 2)
	cfg := testConfig(t, t.TempDir())
	cfg.ID, cfg.BindAddr, cfg.Bootstrap = "s2", addrs[0], false
	n2, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })

	require.NoError(t, lead.AddNonvoter(ctx, "s2", n2.Addr()))
	require.NoError(t, lead.AddNonvoter(ctx, "dead", addrs[1]))
	src := &progressMap{m: map[string]Progress{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead.RunPromoter(ctx, PromoterConfig{Source: src, Interval: 50 * time.Millisecond})
	}()
	suffrageOf := func(id string) string {
		st, err := lead.Status()
		require.NoError(t, err)
		for _, s := range st.Servers {
			if s.ID == id {
				return s.Suffrage
			}
		}
		return ""
	}
	require.Eventually(t, func() bool {
		st, err := n2.Status()
		require.NoError(t, err)
		src.mu.Lock()
		src.m["s2"] = Progress{AppliedIndex: st.AppliedIndex, LastContact: st.LastContact, Updated: time.Now()}
		src.mu.Unlock()
		_ = lead.ApplyCursors(ctx, map[int64]int64{1: time.Now().UnixMilli()})
		return suffrageOf("s2") == "Voter"
	}, 20*time.Second, 50*time.Millisecond, "the caught-up non-voter is promoted")
	require.Equal(t, "Nonvoter", suffrageOf("dead"))
	// Elections under -race may move the leadership between s1 and s2;
	// commits go on either way, the dead non-voter counts for nothing.
	require.Eventually(t, func() bool {
		for _, nd := range []*Node{lead, n2} {
			if nd.IsLeader() && nd.ApplyCursors(ctx, map[int64]int64{2: 1}) == nil {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "commits go on with a dead non-voter")
	cancel()
	<-done
}
