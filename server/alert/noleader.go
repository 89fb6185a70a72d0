package alert

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cronix/cronix/internal/waitctx"
)

// LeaderView is this replica's view of raft (satisfied by *raftha.Node).
type LeaderView interface {
	// LeaderID is the current leader's id, "" while there is none.
	LeaderID() string
	// Term is the current raft term.
	Term() uint64
}

// WatchLeader raises cluster.no_leader when this replica has seen no raft
// leader for longer than the NoLeaderAfter setting, checking every
// interval, until ctx is done. Every replica runs it; replicas that last
// saw the same leader in the same term raise the same key
// ("cluster.no_leader:<leader>:<term>"), so the outbox keeps one event per
// outage. Each store call is bounded by WatchCallTimeout; one that fails
// is logged and tried again at the next check.
func (s *Service) WatchLeader(ctx context.Context, view LeaderView, interval time.Duration, replicaID string) {
	var (
		lastLeader = ""
		lastTerm   uint64
		since      = s.cfg.Now()
		raised     = false
		started    = s.cfg.Now()
	)
	for waitctx.Sleep(ctx, interval) {
		now := s.cfg.Now()
		if id := view.LeaderID(); id != "" {
			lastLeader, lastTerm, since, raised = id, view.Term(), now, false
			continue
		}
		if raised {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.WatchCallTimeout)
		set, err := s.Settings(cctx)
		cancel()
		if err != nil {
			s.log.Warn("no-leader watch: reading settings failed", "err", err)
			continue
		}
		gone := now.Sub(since)
		if gone <= time.Duration(set.NoLeaderAfter) {
			continue
		}
		key := "cluster.no_leader:" + lastLeader + ":" + strconv.FormatUint(lastTerm, 10)
		if lastLeader == "" {
			key = "cluster.no_leader:none:" + replicaID + ":" + strconv.FormatInt(started.Unix(), 10)
		}
		msg := fmt.Sprintf("replica %s has seen no raft leader for %s (last leader %q, term %d); nothing fires",
			replicaID, gone.Round(time.Second), lastLeader, lastTerm)
		cctx, cancel = context.WithTimeout(ctx, s.cfg.WatchCallTimeout)
		_, err = s.raise(cctx, Event{Kind: KindClusterNoLeader, Key: key, Message: msg, OccurredAt: since}, "")
		cancel()
		if err != nil {
			s.log.Warn("no-leader watch: raising the alert failed; retrying", "err", err)
			continue
		}
		s.log.Warn("no raft leader; alert raised", "for", gone.Round(time.Second), "key", key)
		raised = true
	}
}
