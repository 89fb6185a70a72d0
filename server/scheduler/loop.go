package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// loop is the state of one term's trigger loop, owned by one goroutine.
type loop struct {
	cfg   Config
	term  uint64
	log   *slog.Logger
	clock Clock

	entries map[int64]*entry // enabled, schedulable jobs
	heap    fireHeap
	cursors map[int64]int64 // job id → last scheduled time fired (Unix ms), as committed

	nodes  map[string]cluster.NodeInfo   // live nodes by uuid
	groups map[string][]cluster.NodeInfo // live nodes by group, sorted by uuid
	rings  map[string]*hashRing          // CONSISTENT_HASH rings by group+handler
	defs   map[string]store.Group        // group definitions by appname (manual address lists)
	beat   *prober                       // FAILOVER beats; nil when off
	holdOK bool                          // every live node holds fires until StartAt: dispatch ahead
	// lastBatch is how many fires the last tick that had any collected:
	// it sets how far ahead the next one dispatches (ahead).
	lastBatch int
	// writes are how long the write path (SQL insert and etcd dispatch)
	// of the last batches took, newest at writes[writeAt%len]: with them
	// ahead brings a tick forward when the batch would otherwise reach the
	// node too close to its time.
	writes  [aheadWrites]time.Duration
	writeAt int

	// slowLogged is when a slow commit was last logged, slowQuiet how many
	// slow commits since went unlogged (at most one warning per
	// slowCommitLogEvery).
	slowLogged time.Time
	slowQuiet  int

	aheadRuns map[int64][]aheadRef  // fires dispatched ahead, by job (pruned as their time passes)
	cancels   []dispatch.CancelItem // fires dispatched ahead of removed jobs, to cancel

	routes      map[int64]*routeState // route state by job, as loaded and updated
	routesDirty map[int64]bool        // route state to write with the next raft entry
	forget      map[int64]bool        // deleted jobs whose cursor and route state to drop

	runs runCache // pending run keys and process keys of every node
	seen *seenRevs

	placed         map[int64]placedJob // job id → where its config is in etcd
	strays         []dispatch.JobRef   // extra placements read at start-up, to remove
	placeDirty     map[int64]bool      // jobs whose placement the next reconcile checks
	placementDirty bool                // check every job's placement (nodes or groups changed)

	strs   map[string]string            // interned strings shared by many jobs (jobset.go)
	params map[string]json.RawMessage   // interned params
	scheds map[string]schedule.Schedule // parsed schedules by type, zone and expression

	pending    []*fire          // the batch being committed
	onceSeen   map[string]int64 // once key → mod revision already fired
	onceDelete []onceKey        // handled once requests still to delete

	needResync map[string]bool
	retryAt    time.Time // zero: nothing to retry
	backoff    time.Duration

	nodeW, sigW, onceW, runW, procW, grpW watch
	leaderW                               watch // the fence: /Cronix/leader
	timer, relist                         Timer
}

type onceKey struct {
	key string
	rev int64
}

// Stages of a fire in the write-ahead sequence.
const (
	stageNew        = iota // to record in SQL
	stageRecorded          // recorded, to dispatch
	stageDispatched        // in etcd (or failed: nothing to dispatch)
	stageReplayed          // already in SQL before this insert: checkReplays decides
)

// fire is one run of a job on one target.
type fire struct {
	entry *entry // the scheduled job; nil for a manual fire
	run   store.Run
	item  *dispatch.DispatchItem // nil when the run failed before dispatch
	stage int
	once  *onceKey // the once request to delete after commit
}

func newLoop(cfg Config, term uint64, seen *seenRevs) *loop {
	l := &loop{
		cfg:         cfg,
		term:        term,
		log:         cfg.Logger.With("term", term),
		clock:       cfg.Clock,
		entries:     map[int64]*entry{},
		cursors:     map[int64]int64{},
		nodes:       map[string]cluster.NodeInfo{},
		groups:      map[string][]cluster.NodeInfo{},
		rings:       map[string]*hashRing{},
		routes:      map[int64]*routeState{},
		routesDirty: map[int64]bool{},
		forget:      map[int64]bool{},
		runs:        newRunCache(),
		placed:      map[int64]placedJob{},
		placeDirty:  map[int64]bool{},
		strs:        map[string]string{},
		params:      map[string]json.RawMessage{},
		scheds:      map[string]schedule.Schedule{},
		onceSeen:    map[string]int64{},
		needResync:  map[string]bool{},
		defs:        map[string]store.Group{},
		seen:        seen,
	}
	if cfg.BeatInterval > 0 {
		l.beat = newProber(cfg, l.log, &seen.beats)
	}
	return l
}

// --- jobs

// parse sets the schedule of e from job j. It returns false when the job
// is not scheduled: schedule type "none" (manual fires only), or a schedule
// that does not parse (logged).
func (l *loop) parse(e *entry, j *jobSpec) bool {
	if j.ScheduleType == schedule.TypeNone {
		return false
	}
	s, err := l.parseSchedule(j)
	if err != nil {
		l.log.Error("job not scheduled", "job_id", j.ID, "err", fmt.Errorf("schedule %q: %w", j.Schedule, err))
		return false
	}
	e.sched, e.delay = s, 0
	if d, ok := schedule.FixedDelay(s); ok {
		e.delay = d
	}
	return true
}

// startEntry places a loaded job at its first fire of this term: after its
// cursor, the fires missed meanwhile flagged for its misfire policy; after
// now without a cursor. A fixed_delay job with a run still pending waits
// for it to end; otherwise it fires delay after its cursor (at once when
// that is past), or delay after now without a cursor.
func (l *loop) startEntry(e *entry, now time.Time) {
	c, ok := l.cursors[e.job.ID]
	if e.delay > 0 {
		if keys := l.runs.pendingRuns(e.job.ID); len(keys) > 0 {
			e.waitRuns = map[string]bool{}
			for _, k := range keys {
				e.waitRuns[k] = true
			}
			e.next = time.Time{}
		} else if ok {
			e.next = maxTime(time.UnixMilli(c).Add(e.delay), now.Truncate(time.Millisecond))
		} else {
			e.next = l.afterDelay(e, now)
		}
		l.heap.set(e)
		return
	}
	if !ok {
		e.next = e.sched.Next(now)
	} else {
		e.next = e.sched.Next(time.UnixMilli(c))
		e.misfired = !e.next.IsZero() && !e.next.After(now)
	}
	l.heap.set(e)
}

// afterDelay is the next fire of a fixed_delay job whose run ended at end:
// end+delay (to the millisecond, as fire ids are), after its cursor.
func (l *loop) afterDelay(e *entry, end time.Time) time.Time {
	next := end.Add(e.delay).Truncate(time.Millisecond)
	if c, ok := l.cursors[e.job.ID]; ok && next.UnixMilli() <= c {
		next = time.UnixMilli(c + 1)
	}
	return next
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// loadJobs lists enabled jobs and places each at its next fire after its
// cursor (misfires collapsed), then watches job signals from the revision
// read before the listing, so no change is missed.
func (l *loop) loadJobs(ctx context.Context) error {
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.JobSignalPrefix(), withPrefixCount()...)
	if err != nil {
		return fmt.Errorf("read job signal revision: %w", err)
	}
	l.cursors = l.cfg.Cursors.Cursors()
	now := l.clock.Now()
	// A retry after a failure half-way through the walk starts over.
	l.entries, l.heap = map[int64]*entry{}, nil
	err = l.cfg.Jobs.ForEnabledJobs(ctx, func(j *store.Job) error {
		if !j.Enabled {
			return nil
		}
		e := &entry{job: l.spec(j), index: -1}
		if !l.parse(e, &e.job) {
			return nil
		}
		l.entries[j.ID] = e
		l.startEntry(e, now)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list enabled jobs: %w", err)
	}
	l.placementDirty = true
	l.startWatch(ctx, &l.sigW, l.cfg.Keys.JobSignalPrefix(), resp.Header.Revision+1)
	l.log.Info("jobs loaded", "jobs", len(l.entries), "due_now", l.countDue(now))
	return nil
}

func (l *loop) countDue(now time.Time) int {
	n := 0
	for _, e := range l.heap {
		if !e.next.After(now) {
			n++
		}
	}
	return n
}

// upsert applies a (re)loaded job definition.
func (l *loop) upsert(full store.Job) {
	j := l.spec(&full)
	if !j.Enabled {
		l.remove(j.ID)
		return
	}
	e, ok := l.entries[j.ID]
	if ok && e.job.Revision == j.Revision {
		return
	}
	ne := &entry{index: -1}
	if !l.parse(ne, &j) {
		l.remove(j.ID)
		return
	}
	l.markPlacement(j.ID)
	if ok && e.job.ScheduleType == j.ScheduleType && e.job.Schedule == j.Schedule && e.job.Timezone == j.Timezone {
		e.job = j // same times; new handler, params, route, ...
		return
	}
	if !ok {
		e = ne
		l.entries[j.ID] = e
	}
	e.job, e.sched, e.delay, e.misfired = j, ne.sched, ne.delay, false
	if e.delay == 0 {
		e.waitRuns = nil
	}
	if e.inFlight || e.waitRuns != nil {
		return // the pending fire's commit (or its run's end) computes the next time
	}
	now := l.clock.Now()
	if e.delay > 0 {
		e.next = l.afterDelay(e, now)
	} else {
		c, has := l.cursors[j.ID]
		e.next = resetNext(e.sched, c, has, now)
	}
	l.heap.set(e)
}

// forgetJob drops a deleted job: its cursor and route state are removed
// with the next raft entry.
func (l *loop) forgetJob(id int64) {
	l.remove(id)
	l.forget[id] = true
	delete(l.routes, id)
	delete(l.routesDirty, id)
}

func (l *loop) remove(id int64) {
	e, ok := l.entries[id]
	if !ok {
		return
	}
	delete(l.entries, id)
	l.heap.remove(e)
	l.markPlacement(id)
	l.cancelAhead(id)
}

// aheadRef is a fire dispatched ahead of its time.
type aheadRef struct {
	node, fireID string
	at           time.Time
}

// cancelMargin: a fire dispatched ahead whose time is closer than this is
// not cancelled any more (the cancel would reach the node too late).
const cancelMargin = 5 * time.Millisecond

// noteAhead remembers the fires of a batch dispatched ahead, so that a
// job removed before their time can cancel them (pruneAhead forgets them
// once their time has come).
func (l *loop) noteAhead(sent []*fire) {
	for _, f := range sent {
		d := &f.item.Dispatch
		if d.StartAt.IsZero() {
			continue
		}
		if l.aheadRuns == nil {
			l.aheadRuns = map[int64][]aheadRef{}
		}
		id := d.Job.JobID
		l.aheadRuns[id] = append(l.aheadRuns[id], aheadRef{node: f.item.Node, fireID: d.FireID, at: d.StartAt})
	}
}

// pruneAhead forgets the fires dispatched ahead whose time has come (a job
// that fired once and not since, say hourly, would keep its last one until
// its next fire otherwise); the relist timer calls it.
func (l *loop) pruneAhead(now time.Time) {
	for id, refs := range l.aheadRuns {
		kept := refs[:0]
		for _, r := range refs {
			if r.at.After(now) {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(l.aheadRuns, id)
		} else {
			l.aheadRuns[id] = kept
		}
	}
}

// cancelAhead queues a cancel of every fire of job id dispatched ahead
// whose time has not come (flushCancels writes them): a disabled or
// deleted job does not run them.
func (l *loop) cancelAhead(id int64) {
	refs := l.aheadRuns[id]
	delete(l.aheadRuns, id)
	limit := l.clock.Now().Add(cancelMargin)
	for _, r := range refs {
		if r.at.After(limit) {
			l.cancels = append(l.cancels, dispatch.CancelItem{Node: r.node, FireID: r.fireID,
				Reason: fmt.Sprintf("not run: job %d was disabled, deleted or unscheduled after this fire was dispatched ahead of its time", id)})
		}
	}
}

// flushCancels writes the queued cancels (fenced). A cancel is best effort:
// when the write fails (logged) or reaches the node after the fire's time,
// the fire runs, as it would have had it been dispatched at its time just
// before the job was removed.
func (l *loop) flushCancels(ctx context.Context) error {
	if len(l.cancels) == 0 {
		return nil
	}
	err := l.cfg.Dispatcher.Cancel(ctx, l.term, l.clock.Now(), l.cancels)
	switch {
	case err == nil:
		l.log.Info("cancelled fires dispatched ahead of removed jobs", "fires", len(l.cancels))
		l.cancels = nil
	case errors.Is(err, dispatch.ErrFenced):
		return errorf("term %d: %w", l.term, err)
	default:
		l.log.Warn("cancelling fires dispatched ahead failed; they will run", "fires", len(l.cancels), "err", err)
		l.cancels = nil
	}
	return nil
}

// relistJobs is the safety net for missed signals: it compares every
// enabled job's revision with its entry (three columns per job, not the
// rows), reloads the changed and new ones with one query and drops the
// entries of jobs no longer enabled.
func (l *loop) relistJobs(ctx context.Context) error {
	revs, err := l.cfg.Jobs.EnabledJobRevisions(ctx)
	if err != nil {
		return fmt.Errorf("list enabled jobs: %w", err)
	}
	seen := make(map[int64]bool, len(revs))
	var changed []int64
	for _, r := range revs {
		if r.ScheduleType == schedule.TypeNone {
			continue // never scheduled: an entry of one goes below
		}
		seen[r.ID] = true
		if e, ok := l.entries[r.ID]; !ok || e.job.Revision != r.Revision {
			changed = append(changed, r.ID)
		}
	}
	jobs, err := l.cfg.Jobs.JobsByID(ctx, changed)
	if err != nil {
		return fmt.Errorf("load %d changed jobs: %w", len(changed), err)
	}
	for _, j := range jobs {
		l.upsert(j)
	}
	for id := range l.entries {
		if !seen[id] {
			l.remove(id)
		}
	}
	return nil
}

// reloadJobs applies the signals of jobs ids (one watch response: one
// batch of jobs created together arrives as one), reading them in one
// query; a job no longer stored is forgotten.
func (l *loop) reloadJobs(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	jobs, err := l.cfg.Jobs.JobsByID(ctx, ids)
	if err != nil {
		return fmt.Errorf("load %d jobs: %w", len(ids), err)
	}
	found := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		found[j.ID] = true
		l.upsert(j)
	}
	for _, id := range ids {
		if !found[id] {
			l.forgetJob(id)
		}
	}
	return nil
}

// --- fires

// newFires builds the fires of job j scheduled at at: one per target of
// its route strategy (several for SHARDING_BROADCAST), or one failed fire
// when there is no target. fireID "" means the scheduled fire id; node ""
// means the job's routing (else that node, for a manual fire).
func (l *loop) newFires(j *jobSpec, at time.Time, fireID, node string, now time.Time) []*fire {
	trigger := cluster.TriggerManual
	if fireID == "" {
		fireID = cluster.FireID(j.ID, at)
		trigger = cluster.TriggerSchedule
	}
	now = now.UTC()
	var targets []target
	var msg string
	switch {
	case node == "":
		targets, msg = l.route(j)
	case !l.live(node):
		msg = fmt.Sprintf("node %s is not live", node)
	case !l.nodes[node].HasHandler(j.Handler):
		msg = fmt.Sprintf("node %s does not offer handler %q", node, j.Handler)
	default:
		targets = []target{{node: node}}
	}
	if msg != "" {
		return []*fire{{run: store.Run{
			FireID: fireID, JobID: j.ID, Trigger: trigger, ScheduledAt: at.UTC(),
			Status: cluster.StatusFailed, Message: msg, FinishedAt: &now,
		}}}
	}
	fs := make([]*fire, 0, len(targets))
	for _, t := range targets {
		id := fireID
		if t.total > 0 {
			if trigger == cluster.TriggerSchedule {
				id = cluster.ShardFireID(j.ID, at, t.index)
			} else {
				id = fmt.Sprintf("%s-s%d", fireID, t.index)
			}
		}
		f := &fire{run: store.Run{
			FireID:       id,
			JobID:        j.ID,
			Trigger:      trigger,
			Status:       cluster.StatusTriggered,
			Node:         t.node,
			ScheduledAt:  at.UTC(),
			DispatchedAt: &now,
			Attempt:      1,
			ShardIndex:   t.index,
			ShardTotal:   t.total,
		}}
		f.item = &dispatch.DispatchItem{Node: t.node, Dispatch: cluster.Dispatch{
			FireID:       id,
			Trigger:      trigger,
			ScheduledAt:  at.UTC(),
			DispatchedAt: now,
			Term:         l.term,
			Job:          jobConfig(j),
			ShardIndex:   t.index,
			ShardTotal:   t.total,
		}}
		if at.After(now) { // dispatched ahead (tick): the node holds it until its time
			f.item.Dispatch.StartAt = at.UTC()
		}
		// The node is busy with the job from now on (BUSYOVER); the run
		// key's deletion ends it (fixed_delay).
		l.runs.put(l.runs.runs, l.cfg.Keys.Run(t.node, id), runRef{t.node, j.ID})
		fs = append(fs, f)
	}
	return fs
}

func jobConfig(j *jobSpec) cluster.JobConfig {
	return cluster.JobConfig{
		JobID:          j.ID,
		Name:           j.Name,
		Group:          j.Group,
		Handler:        j.Handler,
		Params:         j.Params,
		TimeoutSeconds: j.TimeoutSeconds,
		Revision:       j.Revision,

		RetryCount:           j.RetryCount,
		RetryIntervalSeconds: j.RetryIntervalSeconds,
		BlockStrategy:        j.BlockStrategy,
	}
}

// slowCommit is how long a batch's commit (record the runs in SQL,
// dispatch them to etcd, apply the cursors through raft) may take before
// the loop logs which step held it: the fires due meanwhile are late, and
// past MisfireThreshold go to their misfire policy.
const slowCommit = time.Second

// slowCommitLogEvery bounds the slow-commit warnings of a loop that stays
// slow (a failing disk) to one a minute; the next one counts the others.
const slowCommitLogEvery = time.Minute

// commit writes the pending batch ahead in three steps, each once for the
// whole batch: (1) record runs in SQL, (2) dispatch them to etcd (fenced),
// (3) advance the cursors in raft. A step that fails is retried later from
// where it stopped; fires dispatched before a failure are not dispatched
// again. Only ErrFenced ends the loop.
func (l *loop) commit(ctx context.Context) error {
	if len(l.pending) == 0 && len(l.forget) == 0 && len(l.routesDirty) == 0 {
		return nil
	}
	start := l.clock.Now()
	runs := make([]store.Run, 0, len(l.pending)) // sized once: a batch is thousands of fires
	for _, f := range l.pending {
		if f.stage == stageNew {
			runs = append(runs, f.run)
		}
	}
	if len(runs) > 0 {
		inserted, err := l.cfg.Runs.InsertRuns(ctx, runs)
		if err != nil {
			l.failed(ctx, "record runs", err)
			return nil
		}
		if len(inserted) < len(runs) {
			l.log.Info("some fires were already recorded (replayed)", "fires", len(runs), "new", len(inserted))
		}
		isNew := make(map[string]bool, len(inserted))
		for _, id := range inserted {
			isNew[id] = true
		}
		replayed := 0
		for _, f := range l.pending {
			if f.stage != stageNew {
				continue
			}
			if isNew[f.run.FireID] || f.item == nil {
				f.stage = stageRecorded
			} else {
				f.stage = stageReplayed
				replayed++
			}
		}
		l.cfg.Metrics.Fired(metrics.FireReplayed, replayed)
	}
	if err := l.checkReplays(ctx); err != nil {
		l.failed(ctx, "check replayed fires", err)
		return nil
	}
	recorded := l.clock.Now()
	sentAt := recorded

	items := make([]dispatch.DispatchItem, 0, len(l.pending))
	sent := make([]*fire, 0, len(l.pending))
	notSent := 0
	for _, f := range l.pending {
		if f.stage != stageRecorded {
			continue
		}
		if f.item == nil {
			f.stage = stageDispatched
			notSent++
			continue
		}
		items = append(items, *f.item)
		sent = append(sent, f)
	}
	l.cfg.Metrics.Fired(metrics.FireNoTarget, notSent)
	if len(items) > 0 {
		dispatchStart := l.clock.Now()
		err := l.cfg.Dispatcher.Dispatch(ctx, l.term, items)
		if err != nil {
			for _, f := range sent[:min(dispatch.Committed(err), len(sent))] {
				f.stage = stageDispatched
			}
			if errors.Is(err, dispatch.ErrFenced) {
				return errorf("term %d: %w", l.term, err)
			}
			l.failed(ctx, "dispatch", err)
			return nil
		}
		dispatched := l.clock.Now()
		sentAt = dispatched
		l.noteWrite(dispatched.Sub(start))
		l.noteAhead(sent)
		for _, f := range sent {
			f.stage = stageDispatched
			l.cfg.Metrics.ObserveLateness(metrics.StageDispatched, max(dispatched.Sub(f.run.ScheduledAt), 0))
		}
		l.cfg.Metrics.ObserveDispatch(len(items), dispatched.Sub(dispatchStart))
		l.cfg.Metrics.Fired(metrics.FireDispatched, len(items))
	}

	// One raft entry: cursors, route state, deleted jobs.
	cur := map[int64]int64{}
	for _, f := range l.pending {
		if f.entry != nil {
			id, ms := f.run.JobID, f.run.ScheduledAt.UnixMilli()
			if ms > cur[id] {
				cur[id] = ms
			}
		}
	}
	routes, err := l.encodeRoutes()
	if err != nil {
		return err
	}
	var forget []int64
	for id := range l.forget {
		forget = append(forget, id)
	}
	if len(cur)+len(routes)+len(forget) > 0 {
		if err := l.cfg.Cursors.ApplyTick(ctx, cur, routes, forget); err != nil {
			l.failed(ctx, "apply cursors", err)
			return nil
		}
	}

	now := l.clock.Now()
	for id, ms := range cur {
		if old, ok := l.cursors[id]; !ok || ms > old {
			l.cursors[id] = ms
		}
	}
	for _, id := range forget {
		delete(l.cursors, id)
		delete(l.forget, id)
	}
	clear(l.routesDirty)

	// Each fired job returns to the heap once, after its latest fire.
	fired := map[*entry]*fire{}
	var order []*entry
	for _, f := range l.pending {
		if e := f.entry; e != nil {
			if prev, ok := fired[e]; !ok {
				order = append(order, e)
				fired[e] = f
			} else if f.run.ScheduledAt.After(prev.run.ScheduledAt) {
				fired[e] = f
			}
		}
		if f.once != nil {
			l.onceDelete = append(l.onceDelete, *f.once)
		}
	}
	for _, e := range order {
		e.inFlight = false
		if l.entries[e.job.ID] != e {
			continue
		}
		if e.delay > 0 {
			l.waitForRuns(e, now)
			continue
		}
		c, ok := l.cursors[e.job.ID]
		e.next = afterFire(e.sched, fired[e].run.ScheduledAt, c, ok)
		l.heap.set(e)
	}
	if took := now.Sub(start); took >= slowCommit {
		// The next fires wait for this one: name the step that held it.
		if l.slowLogged.IsZero() || now.Sub(l.slowLogged) >= slowCommitLogEvery {
			l.log.Warn("trigger batch commit was slow; later fires waited for it", "took", took,
				"record_runs", recorded.Sub(start), "dispatch", sentAt.Sub(recorded), "apply_cursors", now.Sub(sentAt),
				"fires", len(l.pending), "slow_since_last_warning", l.slowQuiet)
			l.slowLogged, l.slowQuiet = now, 0
		} else {
			l.slowQuiet++
		}
	}
	l.log.Debug("batch fired", "fires", len(l.pending), "dispatched", len(items), "not_dispatched", notSent,
		"cursors", len(cur), "route_states", len(routes), "forgotten", len(forget), "took", now.Sub(start))
	l.pending = nil
	l.backoff = 0
	l.flushOnceDeletes(ctx)
	return nil
}

// waitForRuns parks a fixed_delay job that just fired until the run keys
// of its fires are deleted (runEnded); with none pending (the fire failed,
// or its runs already ended) it fires again delay after now.
func (l *loop) waitForRuns(e *entry, now time.Time) {
	var wait map[string]bool
	for _, k := range l.runs.pendingRuns(e.job.ID) {
		if wait == nil {
			wait = map[string]bool{}
		}
		wait[k] = true
	}
	e.waitRuns = wait
	if wait != nil {
		e.next = time.Time{}
	} else {
		e.next = l.afterDelay(e, now)
	}
	l.heap.set(e)
}

// encodeRoutes is the route state to write: the dirty entries, and a nil
// (delete) for every forgotten job.
func (l *loop) encodeRoutes() (map[string][]byte, error) {
	if len(l.routesDirty) == 0 && len(l.forget) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(l.routesDirty)+len(l.forget))
	for id := range l.routesDirty {
		rs, ok := l.routes[id]
		if !ok {
			continue
		}
		b, err := json.Marshal(rs)
		if err != nil {
			return nil, errorf("encode route state of job %d: %w", id, err)
		}
		out[routeKey(id)] = b
	}
	for id := range l.forget {
		out[routeKey(id)] = nil
	}
	return out, nil
}

// --- nodes and routing

func (l *loop) live(node string) bool {
	_, ok := l.nodes[node]
	return ok
}

func (l *loop) rebuildGroups() {
	groups := map[string][]cluster.NodeInfo{}
	for _, n := range l.nodes {
		groups[n.Group] = append(groups[n.Group], n)
	}
	for _, ns := range groups {
		sort.Slice(ns, func(i, j int) bool { return ns[i].UUID < ns[j].UUID })
	}
	l.groups = groups
	l.rings = map[string]*hashRing{}
	l.placementDirty = true
	l.beat.setNodes(l.nodes)
	l.holdOK = len(l.nodes) > 0
	for _, n := range l.nodes {
		if !n.HasFeature(cluster.FeatureStartAt) {
			l.holdOK = false
			break
		}
	}
}
