package raftha

import (
	"github.com/hashicorp/raft"
)

// watchLeaders counts leader changes (raft LeaderObservations: a new
// leader, or none) until Close. It owns obsCh's reading side.
func (n *Node) watchLeaders(obsCh chan raft.Observation) {
	defer close(n.observeDone)
	for {
		select {
		case <-obsCh:
			n.leaderChanges.Add(1)
		case <-n.closeCh:
			return
		}
	}
}

// startLeaderObserver registers the leader-change observer and its reader.
func (n *Node) startLeaderObserver() {
	obsCh := make(chan raft.Observation, 16)
	n.observer = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(n.observer)
	go n.watchLeaders(obsCh)
}

// LeaderChanges counts the leader changes this replica observed since it
// started (for the cronix_raft_leader_changes_total metric). Changes that
// come faster than they are counted may be dropped, never double counted.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// State is raft's state: Follower, Candidate, Leader or Shutdown.
func (n *Node) State() string { return n.raft.State().String() }
