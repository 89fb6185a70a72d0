package raftha

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of the raft configuration.
type Server struct {
	// ID is the member's raft id.
	ID string
	// Address is its raft transport address.
	Address string
	// Suffrage is "Voter", "Nonvoter" or "Staging".
	Suffrage string
}

// Status is a point-in-time view of this node's raft state.
type Status struct {
	// ID and Address are this node's.
	ID      string
	Address string
	// State is "Leader", "Follower", "Candidate" or "Shutdown".
	State string
	// Term is the current raft term.
	Term uint64
	// LeaderID and LeaderAddress name the known leader ("" if none).
	LeaderID      string
	LeaderAddress string
	// Servers is the latest configuration (possibly not committed yet).
	Servers []Server
	// LastContact is how long ago a follower last heard from the leader; 0
	// on the leader; -1 if never.
	LastContact time.Duration
	// CommitIndex and AppliedIndex are raft's log positions.
	CommitIndex  uint64
	AppliedIndex uint64
	// FSMPending is the number of committed entries queued for the FSM.
	FSMPending uint64
}

// Status reports this node's raft state. It does not block on the leader.
func (n *Node) Status() (Status, error) {
	leaderAddr, leaderID := n.raft.LeaderWithID()
	st := Status{
		ID:            n.cfg.ID,
		Address:       n.Addr(),
		State:         n.raft.State().String(),
		Term:          n.raft.CurrentTerm(),
		LeaderID:      string(leaderID),
		LeaderAddress: string(leaderAddr),
		CommitIndex:   n.raft.CommitIndex(),
		AppliedIndex:  n.raft.AppliedIndex(),
	}
	stats := n.raft.Stats()
	st.FSMPending, _ = strconv.ParseUint(stats["fsm_pending"], 10, 64)
	switch {
	case n.raft.State() == raft.Leader:
		st.LastContact = 0
	default:
		if last := n.raft.LastContact(); last.IsZero() {
			st.LastContact = -1
		} else {
			st.LastContact = time.Since(last)
		}
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return st, fmt.Errorf("raftha: read configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		st.Servers = append(st.Servers, Server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return st, nil
}

// membershipTimeout bounds a membership change when ctx has no deadline.
const membershipTimeout = 10 * time.Second

func (n *Node) waitIndex(ctx context.Context, f raft.IndexFuture) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// raft finishes (or times out) the change on its own; the goroutine
		// above returns then.
		return ctx.Err()
	}
}

func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return membershipTimeout
}

// AddVoter adds (or re-addresses) a voter. It must run on the leader
// (ErrNotLeader otherwise). The new server must be running with an empty
// raft dir and no Peers of its own; it catches up from the leader.
func (n *Node) AddVoter(ctx context.Context, id, address string) error {
	if id == "" || address == "" {
		return errors.New("raftha: add voter: id and address are required")
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(address), 0, timeoutOf(ctx))
	if err := n.waitIndex(ctx, f); err != nil {
		return fmt.Errorf("raftha: add voter %s at %s: %w", id, address, err)
	}
	n.log.Info("raft voter added", "server_id", id, "address", address)
	return nil
}

// AddNonvoter adds a server as a non-voter: it receives the log but does
// not count for quorum, so a dead or wrong address cannot stall commits.
// Promote makes it a voter once it has caught up. Re-adding a voter keeps
// it a voter. It must run on the leader (ErrNotLeader otherwise).
func (n *Node) AddNonvoter(ctx context.Context, id, address string) error {
	if id == "" || address == "" {
		return errors.New("raftha: add non-voter: id and address are required")
	}
	f := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(address), 0, timeoutOf(ctx))
	if err := n.waitIndex(ctx, f); err != nil {
		return fmt.Errorf("raftha: add non-voter %s at %s: %w", id, address, err)
	}
	n.log.Info("raft non-voter added; promoted once caught up", "server_id", id, "address", address)
	return nil
}

// Promote turns a non-voter into a voter (AddVoter with its address).
func (n *Node) Promote(ctx context.Context, id, address string) error {
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(address), 0, timeoutOf(ctx))
	if err := n.waitIndex(ctx, f); err != nil {
		return fmt.Errorf("raftha: promote %s to voter: %w", id, err)
	}
	n.log.Info("raft non-voter promoted to voter", "server_id", id, "address", address)
	return nil
}

// ErrUnknownServer is returned (wrapped) by RemoveServer for an id that is
// not in the configuration.
var ErrUnknownServer = errors.New("raftha: no such server in the configuration")

// RemoveServer removes a server from the configuration. It must run on the
// leader (ErrNotLeader otherwise); a leader removing itself steps down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("raftha: remove server %s: read configuration: %w", id, err)
	}
	known := false
	for _, s := range f.Configuration().Servers {
		known = known || string(s.ID) == id
	}
	if !known {
		return fmt.Errorf("remove server %s: %w", id, ErrUnknownServer)
	}
	if err := n.waitIndex(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx))); err != nil {
		return fmt.Errorf("raftha: remove server %s: %w", id, err)
	}
	n.log.Info("raft server removed", "server_id", id)
	return nil
}
