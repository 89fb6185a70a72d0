package raftha

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 250 * time.Millisecond
	// The log between snapshots is ticks (one a second, a cursor per fired
	// job): 256 + 256 entries keep the log near 4 MB at 1,000 fires
	// a second and reach that size within ~10 minutes of a start. A
	// snapshot is the cursors and route state, small enough (a few MB at
	// 100,000 jobs) to install on a follower away for more than ~4 minutes.
	DefaultSnapshotThreshold = 256
	DefaultSnapshotInterval  = 30 * time.Second
	DefaultTrailingLogs      = 256
	DefaultApplyTimeout      = 10 * time.Second
)

// Config configures a raft node.
type Config struct {
	// ID is this server's stable raft id (unique among replicas).
	ID string
	// Dir holds raft.db (log and stable store) and snapshots/.
	Dir string
	// BindAddr is host:port the raft TCP transport listens on; port 0 picks
	// a free port (fine for a single voter).
	BindAddr string
	// AdvertiseAddr is host:port peers reach this node at; "" = BindAddr's
	// resolved address (BindAddr must then not be a wildcard address).
	AdvertiseAddr string
	// Bootstrap makes a fresh Dir a single-voter cluster (this node alone).
	// It is ignored when Dir already holds raft state or Peers is set.
	Bootstrap bool
	// Peers lists every voter of a new cluster as "id=host:port", this node
	// included (it is added with its own address if missing). A fresh Dir
	// bootstraps exactly this configuration; every replica must be given
	// the same list. Ignored when Dir already holds raft state: later
	// membership changes go through AddNonvoter (promoted by RunPromoter) and RemoveServer.
	Peers []string
	// Logger receives raft's logs; nil discards them.
	Logger *slog.Logger
	// HeartbeatTimeout is raft's follower heartbeat timeout (default 500ms).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is raft's candidate election timeout (default 500ms).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without reaching a
	// quorum (default 250ms; at most HeartbeatTimeout).
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold is the number of new log entries that triggers a
	// snapshot (default 256; the scheduler writes about one per second).
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks SnapshotThreshold (default 30s).
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries stay in the log after a snapshot, so a
	// slightly behind follower needs no snapshot (default 256).
	TrailingLogs uint64
	// ApplyTimeout bounds an Apply when the ctx has no deadline (default 10s).
	ApplyTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
		if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
			c.LeaderLeaseTimeout = c.HeartbeatTimeout
		}
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = DefaultTrailingLogs
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = DefaultApplyTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports what is wrong with the config (after defaults).
func (c *Config) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("raft: ID is required"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("raft: Dir is required"))
	}
	if c.BindAddr == "" {
		errs = append(errs, errors.New("raft: BindAddr is required"))
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		errs = append(errs, fmt.Errorf("raft: LeaderLeaseTimeout %s must not exceed HeartbeatTimeout %s",
			c.LeaderLeaseTimeout, c.HeartbeatTimeout))
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		errs = append(errs, fmt.Errorf("raft: ElectionTimeout %s must be at least HeartbeatTimeout %s",
			c.ElectionTimeout, c.HeartbeatTimeout))
	}
	ids := map[string]bool{}
	addrs := map[string]bool{}
	for _, p := range c.Peers {
		id, addr, err := parsePeer(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ids[id] {
			errs = append(errs, fmt.Errorf("raft: peer id %q listed twice", id))
		}
		if addrs[addr] {
			errs = append(errs, fmt.Errorf("raft: peer address %q listed twice", addr))
		}
		ids[id], addrs[addr] = true, true
	}
	return errors.Join(errs...)
}
