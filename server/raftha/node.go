package raftha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cronix/cronix/internal/hclogslog"
)

// ErrNotLeader is returned (wrapped) by writes on a node that is not the leader.
var ErrNotLeader = raft.ErrNotLeader

// logCacheEntries is how many of the newest log entries are kept in memory.
const logCacheEntries = 64

// Node is one raft replica holding the scheduler state. It is safe for
// concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *fsm
	store *raftboltdb.BoltStore
	trans *raft.NetworkTransport

	notifyCh    chan bool
	closeCh     chan struct{}
	monitorDone chan struct{}
	observeDone chan struct{}
	observer    *raft.Observer
	// leaderChanges counts raft leader observations.
	leaderChanges atomic.Uint64
	closeOnce     sync.Once
	closeErr      error

	mu        sync.Mutex
	callbacks []func(ctx context.Context, term uint64)
	session   *session // the current leader session, nil when not leading
	last      *session // the latest session started (the next one waits for it)
	closing   bool
	sessions  sync.WaitGroup // running session goroutines
}

// Open opens (creating if needed) the raft state in cfg.Dir, bootstraps a
// fresh cluster if cfg.Bootstrap, and starts raft. A single voter becomes
// leader after about one election timeout.
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftha: create dir %s: %w", cfg.Dir, err)
	}
	n := &Node{
		cfg:         cfg,
		log:         cfg.Logger,
		fsm:         newFSM(),
		notifyCh:    make(chan bool, 16),
		closeCh:     make(chan struct{}),
		monitorDone: make(chan struct{}),
		observeDone: make(chan struct{}),
	}
	hl := hclogslog.New(cfg.Logger, "raft")
	ok := false
	defer func() {
		if !ok {
			_ = n.closeResources()
		}
	}()

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("raftha: open log store in %s: %w", cfg.Dir, err)
	}
	n.store = store
	// The cache serves replication of the newest entries to followers,
	// which are normally a few entries behind. A tick is one entry a second
	// and can be tens of KB (a cursor per fired job), so a large cache is
	// memory that fills for minutes after a start (512 entries of 1,000
	// cursors: ~3 MB, of 3,000: ~10 MB) without serving anyone.
	logs, err := raft.NewLogCache(logCacheEntries, store)
	if err != nil {
		return nil, fmt.Errorf("raftha: log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hl.Named("snapshot"))
	if err != nil {
		return nil, fmt.Errorf("raftha: open snapshot store in %s: %w", cfg.Dir, err)
	}
	var advertise net.Addr
	if cfg.AdvertiseAddr != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("raftha: advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
		advertise = a
	}
	trans, err := raft.NewTCPTransportWithLogger(cfg.BindAddr, advertise, 3, 10*time.Second, hl.Named("transport"))
	if err != nil {
		return nil, fmt.Errorf("raftha: listen on %s: %w", cfg.BindAddr, err)
	}
	n.trans = trans

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.notifyCh
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raftha: %w", err)
	}

	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("raftha: read existing state: %w", err)
	}
	if !existing && (cfg.Bootstrap || len(cfg.Peers) > 0) {
		conf := bootstrapConfiguration(cfg, trans.LocalAddr())
		if err := raft.BootstrapCluster(rc, logs, store, snaps, trans, conf); err != nil {
			return nil, fmt.Errorf("raftha: bootstrap: %w", err)
		}
		n.log.Info("raft bootstrapped", "voters", len(conf.Servers))
	}
	r, err := raft.NewRaft(rc, n.fsm, logs, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("raftha: start raft: %w", err)
	}
	n.raft = r
	ok = true
	go n.monitor()
	n.startLeaderObserver()
	n.log.Info("raft started", "id", cfg.ID, "addr", string(trans.LocalAddr()), "dir", cfg.Dir,
		"existing_state", existing)
	return n, nil
}

// bootstrapConfiguration is the first configuration of a fresh cluster:
// every voter of cfg.Peers (this node included, added with its own address
// when Peers does not list it), or this node alone. Every replica started
// with the same Peers bootstraps the same configuration, which raft accepts.
func bootstrapConfiguration(cfg Config, self raft.ServerAddress) raft.Configuration {
	var conf raft.Configuration
	selfListed := false
	for _, p := range cfg.Peers {
		id, addr, _ := parsePeer(p) // validated
		if id == cfg.ID {
			selfListed = true
		}
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr),
		})
	}
	if !selfListed {
		conf.Servers = append([]raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: self}}, conf.Servers...)
	}
	return conf
}

func parsePeer(p string) (id, addr string, err error) {
	id, addr, ok := strings.Cut(p, "=")
	if !ok || id == "" || addr == "" {
		return "", "", fmt.Errorf("raft: peer %q must be id=host:port", p)
	}
	return id, addr, nil
}

// Close stops leader work (its ctx is cancelled), hands leadership to
// another voter if this node leads and there is one, shuts raft down and
// waits for every goroutine it started, including leadership callbacks.
// It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closing = true
		n.stopSessionLocked()
		n.mu.Unlock()

		if n.raft.State() == raft.Leader && n.otherVoters() {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Warn("raft leadership transfer on close failed", "err", err)
			}
		}
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raftha: shutdown: %w", err))
		}
		n.raft.DeregisterObserver(n.observer)
		close(n.closeCh)
		<-n.monitorDone
		<-n.observeDone
		n.sessions.Wait()
		errs = append(errs, n.closeResources())
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

func (n *Node) closeResources() error {
	var errs []error
	if n.trans != nil {
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftha: close transport: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raftha: close log store: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (n *Node) otherVoters() bool {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.ID) {
			return true
		}
	}
	return false
}

// ID is this node's raft id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr is the transport address peers reach this node at.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// IsLeader reports whether raft currently considers this node the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Term is raft's current term.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// LeaderAddr is the transport address of the known leader, "" if none.
func (n *Node) LeaderAddr() string {
	addr, _ := n.raft.LeaderWithID()
	return string(addr)
}

// LeaderID is the raft id of the known leader, "" if none.
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Snapshot forces a snapshot now (raft also takes them on its own).
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("raftha: snapshot: %w", err)
	}
	return nil
}

// apply commits one command. It must run on the leader. The wait is bounded
// by ctx's deadline (or ApplyTimeout) for enqueueing, and by commit,
// leadership loss or shutdown afterwards.
func (n *Node) apply(ctx context.Context, typ byte, body any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := encodeCommand(typ, body)
	if err != nil {
		return err
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return context.DeadlineExceeded
		}
	}
	f := n.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return fmt.Errorf("raftha: apply: %w", err)
	}
	if resp, ok := f.Response().(error); ok && resp != nil {
		return resp
	}
	return nil
}

// ApplyCursors advances the fire cursors of many jobs in one raft entry.
// Cursors only move forward: each job keeps max(old, new).
func (n *Node) ApplyCursors(ctx context.Context, cursors map[int64]int64) error {
	if len(cursors) == 0 {
		return nil
	}
	if err := n.apply(ctx, cmdApplyCursors, cursors); err != nil {
		return fmt.Errorf("apply %d cursors: %w", len(cursors), err)
	}
	return nil
}

// DeleteCursors forgets the cursors of deleted jobs, in one raft entry.
func (n *Node) DeleteCursors(ctx context.Context, jobIDs []int64) error {
	if len(jobIDs) == 0 {
		return nil
	}
	if err := n.apply(ctx, cmdDeleteCursors, jobIDs); err != nil {
		return fmt.Errorf("delete %d cursors: %w", len(jobIDs), err)
	}
	return nil
}

// ApplyTick commits one trigger-loop tick in ONE raft entry: cursors
// advanced (each job keeps max(old, new)), route state entries set (a nil
// value deletes its key), and the cursors of deleted jobs forgotten (after
// the advances). Nothing is written when all three are empty.
func (n *Node) ApplyTick(ctx context.Context, cursors map[int64]int64, routes map[string][]byte, deleteCursors []int64) error {
	if len(cursors) == 0 && len(routes) == 0 && len(deleteCursors) == 0 {
		return nil
	}
	c := groupedTick{Cursors: groupCursors(cursors), Routes: routes, DeleteCursors: deleteCursors}
	if err := n.apply(ctx, cmdGroupedTick, c); err != nil {
		return fmt.Errorf("apply tick (%d cursors, %d route states, %d deletions): %w",
			len(cursors), len(routes), len(deleteCursors), err)
	}
	return nil
}

// Cursor is the last scheduled time (Unix ms) fired for the job, as applied
// to this node's FSM.
func (n *Node) Cursor(jobID int64) (int64, bool) { return n.fsm.cursor(jobID) }

// Cursors is a copy of every job's cursor.
func (n *Node) Cursors() map[int64]int64 { return n.fsm.cursors() }

// SetRouteStates writes route state entries in one raft entry; a nil value
// deletes its key.
func (n *Node) SetRouteStates(ctx context.Context, states map[string][]byte) error {
	if len(states) == 0 {
		return nil
	}
	if err := n.apply(ctx, cmdSetRoutes, states); err != nil {
		return fmt.Errorf("set %d route states: %w", len(states), err)
	}
	return nil
}

// RouteState is one route state entry.
func (n *Node) RouteState(key string) ([]byte, bool) { return n.fsm.route(key) }

// RouteStates is a copy of every route state entry.
func (n *Node) RouteStates() map[string][]byte { return n.fsm.routes() }
