package raftha

import (
	"context"
	"log/slog"
	"time"
)

// Progress is a replica's own report of how far its raft has come.
type Progress struct {
	// AppliedIndex is the last log index its FSM applied.
	AppliedIndex uint64
	// LastContact is how long before Updated it last heard from the leader
	// (negative: never).
	LastContact time.Duration
	// Updated is when the replica wrote the report.
	Updated time.Time
}

// ProgressSource reads the replicas' own progress reports, by raft id.
type ProgressSource interface {
	Progress(ctx context.Context) (map[string]Progress, error)
}

// PromoterConfig configures RunPromoter.
type PromoterConfig struct {
	// Source gives the non-voters' own progress reports. Required.
	Source ProgressSource
	// Interval is how often the configuration is checked (default 1s).
	Interval time.Duration
	// Stable is how many checks in a row a non-voter must be caught up
	// before it is promoted (default 3).
	Stable int
	// MaxContact is the longest silence from the leader a caught-up
	// non-voter may report (default 2s).
	MaxContact time.Duration
	// Logger receives promotions and failures; nil = the node's.
	Logger *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// RunPromoter promotes non-voters to voters once they have caught up, the
// autopilot pattern: a non-voter is caught up when its own fresh report
// says it heard from the leader within MaxContact and applied at least the
// commit index the leader had one check earlier, Stable checks in a row.
// A server that never answers (a dead or wrong address) never reports, so
// it stays a non-voter and cannot cost the cluster its quorum. Run it on
// the leader only (from OnLeadership); it returns when ctx ends.
func (n *Node) RunPromoter(ctx context.Context, cfg PromoterConfig) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Stable <= 0 {
		cfg.Stable = 3
	}
	if cfg.MaxContact <= 0 {
		cfg.MaxContact = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = n.log
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	streak := map[string]int{}
	var prevCommit uint64
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		prevCommit = n.promoteOnce(ctx, cfg, streak, prevCommit)
	}
}

// promoteOnce runs one check and returns the commit index it saw.
func (n *Node) promoteOnce(ctx context.Context, cfg PromoterConfig, streak map[string]int, prevCommit uint64) uint64 {
	st, err := n.Status()
	if err != nil || st.State != "Leader" {
		return prevCommit
	}
	if prevCommit == 0 {
		prevCommit = st.CommitIndex
	}
	var pending []Server
	for _, s := range st.Servers {
		if s.Suffrage == "Nonvoter" {
			pending = append(pending, s)
		}
	}
	if len(pending) == 0 {
		clear(streak)
		return st.CommitIndex
	}
	reports, err := cfg.Source.Progress(ctx)
	if err != nil {
		cfg.Logger.Warn("raft promoter: reading progress reports failed", "err", err)
		return st.CommitIndex
	}
	now := cfg.Now()
	for _, s := range pending {
		p, ok := reports[s.ID]
		caught := ok && now.Sub(p.Updated) <= 3*cfg.Interval && p.LastContact >= 0 &&
			p.LastContact <= cfg.MaxContact && p.AppliedIndex >= prevCommit
		if !caught {
			streak[s.ID] = 0
			continue
		}
		streak[s.ID]++
		if streak[s.ID] < cfg.Stable {
			continue
		}
		if err := n.Promote(ctx, s.ID, s.Address); err != nil {
			cfg.Logger.Warn("raft promoter: promotion failed", "server_id", s.ID, "err", err)
			continue
		}
		delete(streak, s.ID)
	}
	return st.CommitIndex
}
