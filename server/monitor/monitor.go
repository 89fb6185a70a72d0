// Package monitor is the leader-only lost-run monitor: it marks "lost" the
// unfinished runs (triggered or running) of nodes whose registration key
// (/Cronix/node/<uuid>, held by the node's etcd lease) is gone, and removes
// their run keys. With Alerts set it raises node.down for such a node,
// once per outage, before marking its runs.
//
// # One pass (every Interval)
//
//	list live nodes (keys only) ─► read unfinished runs on other nodes (keyset pages)
//	  ─► a node missing for the first time: remember when (in memory)
//	  ─► a node missing for at least Grace: MarkLost its runs (one SQL call per node,
//	     terminal runs never change) ─► delete their run keys (one etcd txn per 128)
//
// # Guaranteed
//
//   - A run is marked lost only after its node's key was absent in every
//     pass for at least Grace (a node re-registering in between clears it).
//   - A terminal run is never changed; MarkLost and node results race
//     safely (whichever final status is stored first stays).
//   - A run key is deleted only after its run is terminal in SQL, so the
//     scheduler's replay rule (an absent key with a triggered run means
//     never dispatched) still holds.
//   - Work per pass is bounded: at most MaxPages pages of PageSize runs;
//     the rest is handled by the next passes.
//
// # Not guaranteed
//
//   - A partitioned node whose lease expired may still be running the run;
//     its later result is ignored (lost is final).
//   - First-seen-missing times live in memory: a new leader waits Grace
//     again before marking.
//   - Runs triggered without a node are not handled here.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/store"
)

// Defaults of Config.
const (
	DefaultInterval = 5 * time.Second
	DefaultGrace    = 2 * time.Second
	DefaultPageSize = 1000
	DefaultMaxPages = 10
)

// maxOpsPerTxn stays within etcd's default --max-txn-ops.
const maxOpsPerTxn = 128

// Store is the SQL record the monitor reads and writes (satisfied by *store.Store).
type Store interface {
	// ActiveRunsNotOn returns up to limit unfinished runs with a node not in
	// liveNodes and an id above afterID, by id.
	ActiveRunsNotOn(ctx context.Context, liveNodes []string, afterID int64, limit int) ([]store.Run, error)
	// MarkLost marks the unfinished runs among fireIDs lost with msg and
	// returns how many it changed.
	MarkLost(ctx context.Context, fireIDs []string, msg string) (int, error)
}

// Clock tells time and paces the passes; nil in Config means the wall clock.
type Clock interface {
	Now() time.Time
	// After delivers the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config wires a Monitor.
type Config struct {
	// Store is the SQL store.
	Store Store
	// Etcd is read for node registrations; run keys of lost runs are deleted there.
	Etcd *clientv3.Client
	// Keys builds the etcd keys.
	Keys cluster.Keys
	// Alerts, when set, receives a node.down event for every node whose
	// lease is gone while it had unfinished runs.
	Alerts alert.Raiser
	// Logger receives the monitor's logs; nil discards them.
	Logger *slog.Logger
	// Clock; nil = the wall clock.
	Clock Clock
	// Interval between passes (default 5s).
	Interval time.Duration
	// Grace is how long a node must be missing before its runs are lost (default 2s).
	Grace time.Duration
	// PageSize is the runs read per query (default 1000).
	PageSize int
	// MaxPages bounds the pages read per pass (default 10).
	MaxPages int
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if c.MaxPages <= 0 {
		c.MaxPages = DefaultMaxPages
	}
}

// Validate reports missing dependencies.
func (c *Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("monitor: Store is required"))
	}
	if c.Etcd == nil {
		errs = append(errs, errors.New("monitor: Etcd is required"))
	}
	return errors.Join(errs...)
}

// Monitor finds and marks lost runs while this server leads.
type Monitor struct {
	cfg Config
	log *slog.Logger
	// down holds, by node, the missing-since time of the outage node.down
	// was raised for (Run's goroutine only).
	down map[string]time.Time
}

// New returns a Monitor; Run starts it.
func New(cfg Config) *Monitor {
	cfg.setDefaults()
	return &Monitor{cfg: cfg, log: cfg.Logger.With("component", "lost_run_monitor")}
}

// Run makes a pass every Interval until ctx is done, then returns nil. A
// failed pass is logged and retried at the next interval. It keeps nothing
// across calls: start it when leadership is gained, cancel ctx when lost.
func (m *Monitor) Run(ctx context.Context) error {
	if err := m.cfg.Validate(); err != nil {
		return err
	}
	missing := map[string]time.Time{}
	m.down = map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.cfg.Clock.After(m.cfg.Interval):
		}
		if _, err := m.pass(ctx, missing); err != nil && ctx.Err() == nil {
			m.log.Warn("lost-run pass failed; retrying next interval", "err", err)
		}
	}
}

// pass makes one check and returns how many runs it marked lost. missing
// holds, by node, when its key was first seen missing.
func (m *Monitor) pass(ctx context.Context, missing map[string]time.Time) (int, error) {
	now := m.cfg.Clock.Now()
	prefix := m.cfg.Keys.NodePrefix()
	resp, err := m.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("monitor: list nodes: %w", err)
	}
	live := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		live = append(live, strings.TrimPrefix(string(kv.Key), prefix))
	}
	for _, n := range live {
		delete(missing, n)
	}

	lost := map[string][]string{} // node → fire ids to mark
	seen := map[string]bool{}
	var after int64
	complete := false
	for range m.cfg.MaxPages {
		runs, err := m.cfg.Store.ActiveRunsNotOn(ctx, live, after, m.cfg.PageSize)
		if err != nil {
			return 0, fmt.Errorf("monitor: list unfinished runs: %w", err)
		}
		for _, r := range runs {
			after = r.ID
			seen[r.Node] = true
			since, ok := missing[r.Node]
			if !ok {
				missing[r.Node] = now
				continue
			}
			if now.Sub(since) >= m.cfg.Grace {
				lost[r.Node] = append(lost[r.Node], r.FireID)
			}
		}
		if len(runs) < m.cfg.PageSize {
			complete = true
			break
		}
	}
	if complete {
		for n := range missing { // nodes without unfinished runs: forget
			if !seen[n] {
				delete(missing, n)
			}
		}
	}

	nodes := make([]string, 0, len(lost))
	for n := range lost {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	marked := 0
	var errs []error
	for _, n := range nodes {
		msg := fmt.Sprintf("node %s lost its lease (crashed or partitioned)", n)
		// Raised before the runs are marked: a leader crashing in between
		// leaves them unfinished, so the next leader raises it again, with
		// the same key (the node's lowest unfinished run) and is deduplicated.
		if err := m.nodeDown(ctx, n, missing[n], lost[n], msg); err != nil {
			errs = append(errs, err)
			continue
		}
		changed, err := m.cfg.Store.MarkLost(ctx, lost[n], msg)
		if err != nil {
			errs = append(errs, fmt.Errorf("monitor: mark %d runs of node %s lost: %w", len(lost[n]), n, err))
			continue
		}
		marked += changed
		// Only now, with every one of them terminal in SQL, drop the keys.
		if err := m.deleteRunKeys(ctx, n, lost[n]); err != nil {
			errs = append(errs, err)
		}
		m.log.Warn("runs of a lost node marked lost", "node", n, "runs", changed, "missing_for", now.Sub(missing[n]))
	}
	return marked, errors.Join(errs...)
}

// deleteRunKeys deletes the run keys of a node's fires, 128 per transaction.
func (m *Monitor) deleteRunKeys(ctx context.Context, node string, fireIDs []string) error {
	for start := 0; start < len(fireIDs); start += maxOpsPerTxn {
		chunk := fireIDs[start:min(start+maxOpsPerTxn, len(fireIDs))]
		ops := make([]clientv3.Op, len(chunk))
		for i, id := range chunk {
			ops[i] = clientv3.OpDelete(m.cfg.Keys.Run(node, id))
		}
		if _, err := m.cfg.Etcd.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("monitor: delete %d run keys of node %s: %w", len(chunk), node, err)
		}
	}
	return nil
}

// nodeDown raises node.down for node n, once per outage (since is when it
// was first seen missing), keyed by the first of its runs to be marked lost.
func (m *Monitor) nodeDown(ctx context.Context, n string, since time.Time, fireIDs []string, msg string) error {
	if m.cfg.Alerts == nil || len(fireIDs) == 0 {
		return nil
	}
	if m.down == nil {
		m.down = map[string]time.Time{}
	}
	if at, ok := m.down[n]; ok && at.Equal(since) {
		return nil
	}
	ev := alert.Event{Kind: alert.KindNodeDown, Key: alert.KindNodeDown + ":" + n + ":" + fireIDs[0], Node: n,
		Message:    fmt.Sprintf("%s while it had %d unfinished runs; they are marked lost", msg, len(fireIDs)),
		OccurredAt: since}
	if err := m.cfg.Alerts.Raise(ctx, ev); err != nil {
		return fmt.Errorf("monitor: raise node.down for %s: %w", n, err)
	}
	m.down[n] = since
	return nil
}
