package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/spool"
	"github.com/cronix/cronix/node/trust"
	"github.com/cronix/cronix/pluginapi"
)

// Runner runs handlers; the plugin host implements it.
type Runner interface {
	// Handlers lists the handlers this node offers (advertised in NodeInfo).
	Handlers() []cluster.PluginInfo
	// Run runs one request through the named handler. ctx carries the job
	// timeout and is cancelled when the run must stop; output goes to out.
	// An error means the handler could not run or report (unknown handler,
	// plugin crashed), not that the job failed.
	Run(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (pluginapi.Result, error)
}

// pluginStatuser is implemented by a Runner that reports the state of its
// plugins (the plugin host): the agent then publishes it in the node's
// registration and rewrites it whenever it changes.
type pluginStatuser interface {
	Status() []cluster.PluginStatus
	StatusChanged() <-chan struct{}
}

// recentDoneSize bounds the set of fires whose run keys this process
// already deleted; a re-dispatch of one of them is recognised and dropped.
const recentDoneSize = 16384

// Agent is a node's link to the cluster: it registers the node, takes the
// fires dispatched to it, runs them through the Runner and reports results.
type Agent struct {
	cfg      Config
	etcd     *clientv3.Client
	runner   Runner
	log      *slog.Logger
	reg      *registration
	servers  *serverSet
	reporter *reporter
	guard    *trust.Guard    // verifies every record the node acts on
	security *securitySender // delivers refused records to the servers
	sem      chan struct{}

	// life serialises Start and Stop; state is guarded by it.
	life  sync.Mutex
	state int

	mu      sync.Mutex
	active  map[string]struct{} // fires running now
	unacked map[string]struct{} // fires finished whose run keys still exist
	starts  *startLog           // start journal (nil without a spool dir)
	recent  *recentSet          // fires whose run keys this process deleted
	// lanes holds, per job, the fire running on this node and the fires
	// queued behind it (block strategies); execs indexes them by fire id.
	lanes        map[int64]*lane
	execs        map[string]*execution
	pendingKills map[string]pendingKill // kill and cancel requests for fires not taken yet
	hold         *holdQueue             // fires dispatched ahead, until their StartAt
	runSeq       int                    // last run number handed out
	draining     bool                   // Stop began: queued fires are not started

	runCtx    context.Context // parent of every run; cancelled when Stop gives up waiting
	runCancel context.CancelFunc
	runs      sync.WaitGroup

	intake  background // takes the dispatched fires (intake.go)
	control background // proc and kill keys (control.go)

	txns  *txnLimit   // ops per etcd txn, shared by the batched writers
	procs *procWriter // writes the proc keys of long runs, batched

	status background // the plugin status publisher, if the Runner has one
}

const (
	stateNew = iota
	stateStarted
	stateStopped
)

// New checks cfg and builds an Agent; nothing runs until Start.
func New(cfg Config, etcd *clientv3.Client, runner Runner) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if etcd == nil {
		return nil, errors.New("agent: etcd client is nil")
	}
	if runner == nil {
		return nil, errors.New("agent: runner is nil")
	}
	log := cfg.Logger.With("node", cfg.UUID)
	a := &Agent{
		cfg:     cfg,
		etcd:    etcd,
		runner:  runner,
		log:     log,
		sem:     make(chan struct{}, cfg.MaxConcurrent),
		active:  map[string]struct{}{},
		unacked: map[string]struct{}{},
		recent:  newRecentSet(recentDoneSize),

		lanes:        map[int64]*lane{},
		execs:        map[string]*execution{},
		pendingKills: map[string]pendingKill{},
		hold:         newHoldQueue(),
	}
	cfg.Metrics.SetRunSlots(cfg.MaxConcurrent)
	ring, err := cluster.KeyringFromTokens(cfg.NodeToken, cfg.PreviousNodeToken)
	if err != nil {
		return nil, fmt.Errorf("agent: cluster key: %w", err)
	}
	a.security = newSecuritySender(a)
	a.txns = newTxnLimit(cfg.MaxTxnOps, log)
	a.procs = newProcWriter(a)
	a.guard, err = trust.New(trust.Config{Etcd: etcd, Keys: cfg.Keys, Keyring: ring, Logger: log,
		Report: a.security.report})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.servers = newServerSet(etcd, cfg.ServerURLs, log)
	a.reporter = &reporter{
		etcd:      etcd,
		keys:      cfg.Keys,
		node:      cfg.UUID,
		servers:   a.servers.URLs,
		client:    cfg.HTTPClient,
		token:     cfg.NodeToken,
		interval:  cfg.ReportInterval,
		batch:     cfg.ReportBatch,
		maxBytes:  cfg.ReportMaxBytes,
		memLimit:  cfg.ResultMemory,
		txns:      a.txns,
		log:       log,
		onDeleted: a.runKeysDeleted,
		notify:    make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		// A tick's batch of starts takes a few ms; a second-long burst
		// still gets its results out every maxDefer.
		startQuiet: reportStartQuiet,
		maxDefer:   max(cfg.ReportInterval, time.Second),
	}
	return a, nil
}

// Start loads the spool, registers the node, finds the servers and starts
// taking fires. It fails if etcd cannot be reached. An Agent starts once.
func (a *Agent) Start(ctx context.Context) (err error) {
	a.life.Lock()
	defer a.life.Unlock()
	if a.state != stateNew {
		return errors.New("agent: already started")
	}
	a.state = stateStarted
	// A failed Start leaves nothing running.
	defer func() {
		if err != nil {
			a.state = stateStopped
			a.shutdown()
		}
	}()

	if a.cfg.SpoolDir != "" {
		// The oldest results up to ResultMemory are read back into memory,
		// the rest stay spilled; every one of them marks its fire as run.
		sp, held, err := spool.OpenBounded(a.cfg.SpoolDir, a.log, a.cfg.ResultMemory, func(res *cluster.RunResult) {
			if cluster.Terminal(res.Status) {
				a.unacked[res.FireID] = struct{}{} // ran before the restart
			}
		})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		a.reporter.setSpoolLocked(sp) // before the reporter starts
		a.reporter.hold(held)
		if sp.Pending() > 0 {
			a.log.Info("agent: resuming delivery of spooled results", "results", sp.Pending(), "in_memory", len(held))
		}
		sl, prev, err := openStartLog(a.cfg.SpoolDir)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		a.starts = sl
		// Fires the previous process started but never finished: report them
		// lost (spooled like any result) instead of running them again.
		// A fire whose run key is gone is over (its result was stored, or
		// the lost-run monitor declared it lost): nothing to report.
		pendingKeys, err := a.pendingFires(ctx, prev)
		if err != nil {
			return err
		}
		for _, e := range prev {
			if _, done := a.unacked[e.FireID]; done {
				continue
			}
			if _, pending := pendingKeys[e.FireID]; !pending {
				a.log.Debug("agent: journalled fire is over (run key gone)", "fire_id", e.FireID)
				continue
			}
			a.log.Warn("agent: fire was in progress when the node process stopped; reporting it lost",
				"fire_id", e.FireID, "started_at", e.StartedAt)
			a.reporter.enqueue(a.interruptedResult(e))
			a.unacked[e.FireID] = struct{}{}
		}
	}

	a.runCtx, a.runCancel = context.WithCancel(context.WithoutCancel(ctx))
	a.reporter.start(ctx)
	if err := a.servers.start(ctx); err != nil {
		return err
	}
	a.security.start(context.WithoutCancel(ctx))
	a.reg = newRegistration(a.etcd, a.cfg.Keys.Node(a.cfg.UUID), a.cfg.LeaseTTL, cluster.NodeInfo{
		UUID:    a.cfg.UUID,
		Group:   a.cfg.Group,
		IP:      a.cfg.IP,
		Port:    a.cfg.Port,
		Scheme:  a.cfg.Scheme,
		Version: a.cfg.Version,
		Plugins: a.runner.Handlers(),
		Started: time.Now().UTC(),
		Status:  NodeOnline,
		// Fires dispatched ahead are held until their StartAt (hold.go).
		Features: []string{cluster.FeatureStartAt},
	}, a.log)
	ps, _ := a.runner.(pluginStatuser)
	if ps != nil {
		a.reg.info.PluginStatus = ps.Status()
	}
	if err := a.reg.start(ctx); err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	if ps != nil {
		a.status.start(bg, func(ctx context.Context) { a.publishPluginStatus(ctx, ps) })
	}
	a.procs.start(bg)
	a.control.start(bg, a.watchControlKeys)
	a.intake.start(bg, a.takeFires)
	a.log.Info("agent: started", "group", a.cfg.Group, "run_prefix", a.cfg.Keys.RunPrefix(a.cfg.UUID))
	return nil
}

// Stop shuts the agent down gracefully: it advertises "draining", stops
// taking fires, waits up to ShutdownGrace for running fires (then cancels
// them), delivers queued results (up to FlushTimeout), deletes the
// registration and revokes its lease. It is idempotent and waits.
func (a *Agent) Stop() {
	a.life.Lock()
	defer a.life.Unlock()
	if a.state != stateStarted {
		a.state = stateStopped
		return
	}
	a.state = stateStopped
	a.shutdown()
	a.log.Info("agent: stopped")
}

// shutdown stops whatever Start started, in the order Stop documents.
func (a *Agent) shutdown() {
	if a.reg != nil && a.reg.cancel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := a.reg.setStatus(ctx, NodeDraining); err != nil {
			a.log.Warn("agent: advertising draining", "error", err)
		}
		cancel()
	}
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	a.intake.stop()
	a.dropQueued()
	a.waitRuns()
	a.control.stop()
	pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
	a.procs.stop(pctx)
	pcancel()
	a.status.stop()
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.FlushTimeout)
	a.reporter.stop(ctx)
	a.security.stop(ctx)
	cancel()
	if a.starts != nil {
		a.starts.close() // after the last deletions' end lines
	}
	a.servers.stop()
	if a.reg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.reg.stop(ctx)
		cancel()
	}
	if a.runCancel != nil {
		a.runCancel()
	}
}

// Guard is the agent's record check, for the node's other components that
// act on records (the system-info responder).
func (a *Agent) Guard() *trust.Guard { return a.guard }

// dropQueued forgets the fires queued behind a running one of their job:
// they were not started, and their run keys stay for the next process.
func (a *Agent) dropQueued() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ln := range a.lanes {
		for _, w := range ln.waiting {
			delete(a.execs, w.d.FireID)
			delete(a.active, w.d.FireID)
			w.cancel(nil)
			w.out.Close()
		}
		ln.waiting = nil
	}
}

// waitRuns waits ShutdownGrace for running fires, then cancels them and
// waits a little more for their handlers to return.
func (a *Agent) waitRuns() {
	if a.runCancel == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		a.runs.Wait()
		close(done)
	}()
	t := time.NewTimer(a.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	a.log.Warn("agent: cancelling fires still running at shutdown", "fires", a.activeCount())
	a.runCancel()
	t.Reset(5 * time.Second)
	select {
	case <-done:
	case <-t.C:
		a.log.Error("agent: handlers ignored cancellation; abandoning them", "fires", a.activeCount())
	}
}

func (a *Agent) activeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.active)
}

// claimLocked marks a fire as running; false means this process already
// ran or is running it. Caller holds a.mu.
func (a *Agent) claimLocked(fireID string) (ok, replay bool) {
	if _, running := a.active[fireID]; running {
		return false, false
	}
	if _, finished := a.unacked[fireID]; finished {
		return false, false
	}
	if a.recent.has(fireID) {
		return false, true
	}
	a.active[fireID] = struct{}{}
	return true, false
}

// finished moves a fire from running to finished-awaiting-ack.
func (a *Agent) finished(fireID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finishedLocked(fireID)
}

// finishedLocked is finished for a caller holding a.mu. A fire whose run
// key is already deleted (its result was delivered before this was
// called: release runs a moment after the result is queued) is in the
// recent set and stays out of unacked, which runKeysDeleted already
// cleared for it.
func (a *Agent) finishedLocked(fireID string) {
	delete(a.active, fireID)
	if !a.recent.has(fireID) {
		a.unacked[fireID] = struct{}{}
	}
}

// runKeysDeleted is called by the reporter once fires' run keys are gone.
func (a *Agent) runKeysDeleted(fireIDs []string) {
	if a.starts != nil {
		if err := a.starts.keysDeleted(fireIDs); err != nil {
			a.log.Warn("agent: recording the end of fires in the start journal", "fires", len(fireIDs), "error", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range fireIDs {
		delete(a.unacked, id)
		a.recent.add(id)
	}
}

// pendingFires returns which of the journalled fires still have their run
// key (one keys-only read of the node's run prefix; none when prev is empty).
func (a *Agent) pendingFires(ctx context.Context, prev []startEntry) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	if len(prev) == 0 {
		return out, nil
	}
	prefix := a.cfg.Keys.RunPrefix(a.cfg.UUID)
	resp, err := a.etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("agent: list run keys to check the start journal: %w", err)
	}
	for _, kv := range resp.Kvs {
		out[cluster.LastSegment(string(kv.Key))] = struct{}{}
	}
	return out, nil
}

// recentSet is a bounded set that forgets its oldest members.
type recentSet struct {
	members map[string]struct{}
	ring    []string
	next    int
}

func newRecentSet(size int) *recentSet {
	return &recentSet{members: make(map[string]struct{}, size), ring: make([]string, size)}
}

func (s *recentSet) has(id string) bool {
	_, ok := s.members[id]
	return ok
}

func (s *recentSet) add(id string) {
	if s.has(id) {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.members, old)
	}
	s.ring[s.next] = id
	s.members[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

// publishPluginStatus rewrites the registration's plugin status each time
// the Runner reports a change, until ctx ends. A failed write is retried
// at the next change or after a pause.
func (a *Agent) publishPluginStatus(ctx context.Context, ps pluginStatuser) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ps.StatusChanged():
		case <-retry.C:
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := a.reg.setPluginStatus(wctx, ps.Status())
		cancel()
		if err != nil && ctx.Err() == nil {
			a.log.Warn("agent: publishing plugin status", "error", err)
			retry.Reset(2 * time.Second)
		}
	}
}
