package scheduler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"time"

	"github.com/cronix/cronix/cluster"
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

	placed         map[string]placedJob // job key → config in etcd
	placementDirty bool

	pending    []*fire          // the batch being committed
	onceSeen   map[string]int64 // once key → mod revision already fired
	onceDelete []onceKey        // handled once requests still to delete

	needResync map[string]bool
	retryAt    time.Time // zero: nothing to retry
	backoff    time.Duration

	nodeW, sigW, onceW watch
	timer, relist      Timer
}

type placedJob struct {
	node  string
	jobID int64
	val   string
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
)

// fire is one run of a job on one target.
type fire struct {
	entry *entry // the scheduled job; nil for a manual fire
	run   store.Run
	item  *dispatch.DispatchItem // nil when the run failed before dispatch
	stage int
	once  *onceKey // the once request to delete after commit
}

func newLoop(cfg Config, term uint64) *loop {
	return &loop{
		cfg:        cfg,
		term:       term,
		log:        cfg.Logger.With("term", term),
		clock:      cfg.Clock,
		entries:    map[int64]*entry{},
		cursors:    map[int64]int64{},
		nodes:      map[string]cluster.NodeInfo{},
		groups:     map[string][]cluster.NodeInfo{},
		placed:     map[string]placedJob{},
		onceSeen:   map[string]int64{},
		needResync: map[string]bool{},
	}
}

// --- jobs

func (l *loop) parse(j *store.Job) (schedule.Schedule, error) {
	s, err := schedule.Parse(j.ScheduleType, j.Schedule, j.Timezone, l.cfg.Location)
	if err != nil {
		return nil, fmt.Errorf("job %d schedule %q: %w", j.ID, j.Schedule, err)
	}
	return s, nil
}

// loadJobs lists enabled jobs and places each at its next fire after its
// cursor (misfires collapsed), then watches job signals from the revision
// read before the listing, so no change is missed.
func (l *loop) loadJobs(ctx context.Context) error {
	resp, err := l.cfg.Etcd.Get(ctx, l.cfg.Keys.JobSignalPrefix(), withPrefixCount()...)
	if err != nil {
		return fmt.Errorf("read job signal revision: %w", err)
	}
	jobs, err := l.cfg.Jobs.EnabledJobs(ctx)
	if err != nil {
		return fmt.Errorf("list enabled jobs: %w", err)
	}
	l.cursors = l.cfg.Cursors.Cursors()
	now := l.clock.Now()
	for _, j := range jobs {
		if !j.Enabled {
			continue
		}
		s, err := l.parse(&j)
		if err != nil {
			l.log.Error("job not scheduled", "job_id", j.ID, "err", err)
			continue
		}
		c, ok := l.cursors[j.ID]
		e := &entry{job: j, sched: s, index: -1, next: startNext(s, c, ok, now)}
		l.entries[j.ID] = e
		l.heap.set(e)
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
func (l *loop) upsert(j store.Job) {
	if !j.Enabled {
		l.remove(j.ID)
		return
	}
	e, ok := l.entries[j.ID]
	if ok && e.job.Revision == j.Revision {
		return
	}
	s, err := l.parse(&j)
	if err != nil {
		l.log.Error("job not scheduled", "job_id", j.ID, "err", err)
		l.remove(j.ID)
		return
	}
	l.placementDirty = true
	if ok && e.job.ScheduleType == j.ScheduleType && e.job.Schedule == j.Schedule && e.job.Timezone == j.Timezone {
		e.job, e.sched = j, s // same times; new handler, params, ...
		return
	}
	if !ok {
		e = &entry{index: -1}
		l.entries[j.ID] = e
	}
	e.job, e.sched = j, s
	if e.inFlight {
		return // the pending fire's commit computes the next time with the new schedule
	}
	c, has := l.cursors[j.ID]
	e.next = resetNext(s, c, has, l.clock.Now())
	l.heap.set(e)
}

func (l *loop) remove(id int64) {
	e, ok := l.entries[id]
	if !ok {
		return
	}
	delete(l.entries, id)
	l.heap.remove(e)
	l.placementDirty = true
}

// relistJobs reloads every enabled job (safety net for missed signals).
func (l *loop) relistJobs(ctx context.Context) error {
	jobs, err := l.cfg.Jobs.EnabledJobs(ctx)
	if err != nil {
		return fmt.Errorf("list enabled jobs: %w", err)
	}
	seen := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		seen[j.ID] = true
		l.upsert(j)
	}
	for id := range l.entries {
		if !seen[id] {
			l.remove(id)
		}
	}
	return nil
}

// reloadJob applies a job signal.
func (l *loop) reloadJob(ctx context.Context, id int64) error {
	j, err := l.cfg.Jobs.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		l.remove(id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("load job %d: %w", id, err)
	}
	l.upsert(*j)
	return nil
}

// --- fires

// newFire builds a fire of job j scheduled at at. fireID "" means the
// scheduled fire id; node "" means the normal target choice.
func (l *loop) newFire(j *store.Job, at time.Time, fireID, node string, now time.Time) *fire {
	trigger := cluster.TriggerManual
	if fireID == "" {
		fireID = cluster.FireID(j.ID, at)
		trigger = cluster.TriggerSchedule
	}
	now = now.UTC()
	f := &fire{run: store.Run{
		FireID:      fireID,
		JobID:       j.ID,
		Trigger:     trigger,
		ScheduledAt: at.UTC(),
	}}
	var msg string
	switch {
	case node == "":
		var ok bool
		if node, ok = l.pick(j); !ok {
			msg = fmt.Sprintf("no live node of group %q offers handler %q", j.Group, j.Handler)
		}
	case !l.live(node):
		msg = fmt.Sprintf("node %s is not live", node)
	case !l.nodes[node].HasHandler(j.Handler):
		msg = fmt.Sprintf("node %s does not offer handler %q", node, j.Handler)
	}
	if msg != "" {
		f.run.Status = cluster.StatusFailed
		f.run.Message = msg
		f.run.FinishedAt = &now
		return f
	}
	f.run.Status = cluster.StatusTriggered
	f.run.Node = node
	f.run.DispatchedAt = &now
	f.item = &dispatch.DispatchItem{Node: node, Dispatch: cluster.Dispatch{
		FireID:       fireID,
		Trigger:      trigger,
		ScheduledAt:  at.UTC(),
		DispatchedAt: now,
		Term:         l.term,
		Job:          jobConfig(j),
	}}
	return f
}

func jobConfig(j *store.Job) cluster.JobConfig {
	return cluster.JobConfig{
		JobID:          j.ID,
		Name:           j.Name,
		Group:          j.Group,
		Handler:        j.Handler,
		Params:         j.Params,
		TimeoutSeconds: j.TimeoutSeconds,
		Revision:       j.Revision,
	}
}

// commit writes the pending batch ahead in three steps, each once for the
// whole batch: (1) record runs in SQL, (2) dispatch them to etcd (fenced),
// (3) advance the cursors in raft. A step that fails is retried later from
// where it stopped; fires dispatched before a failure are not dispatched
// again. Only ErrFenced ends the loop.
func (l *loop) commit(ctx context.Context) error {
	if len(l.pending) == 0 {
		return nil
	}
	start := l.clock.Now()
	var runs []store.Run
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
		for _, f := range l.pending {
			if f.stage == stageNew {
				f.stage = stageRecorded
			}
		}
	}

	var items []dispatch.DispatchItem
	var sent []*fire
	failedRuns := 0
	for _, f := range l.pending {
		if f.stage != stageRecorded {
			continue
		}
		if f.item == nil {
			f.stage = stageDispatched
			failedRuns++
			continue
		}
		items = append(items, *f.item)
		sent = append(sent, f)
	}
	if len(items) > 0 {
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
		for _, f := range sent {
			f.stage = stageDispatched
		}
	}

	cur := map[int64]int64{}
	for _, f := range l.pending {
		if f.entry != nil {
			id, ms := f.run.JobID, f.run.ScheduledAt.UnixMilli()
			if ms > cur[id] {
				cur[id] = ms
			}
		}
	}
	if len(cur) > 0 {
		if err := l.cfg.Cursors.ApplyCursors(ctx, cur); err != nil {
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
	for _, f := range l.pending {
		if e := f.entry; e != nil {
			e.inFlight = false
			if l.entries[e.job.ID] == e {
				c, ok := l.cursors[e.job.ID]
				e.next = afterFire(e.sched, f.run.ScheduledAt, c, ok)
				l.heap.set(e)
			}
		}
		if f.once != nil {
			l.onceDelete = append(l.onceDelete, *f.once)
		}
	}
	l.log.Debug("batch fired", "fires", len(l.pending), "dispatched", len(items), "failed", failedRuns,
		"cursors", len(cur), "took", now.Sub(start))
	l.pending = nil
	l.backoff = 0
	l.flushOnceDeletes(ctx)
	return nil
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
	l.placementDirty = true
}

// pick chooses the target node of a job: a stable choice among the live
// nodes of its group offering its handler (hash of the job id modulo the
// sorted eligible nodes). Route strategies replace this later.
func (l *loop) pick(j *store.Job) (string, bool) {
	ns := l.groups[j.Group]
	n := 0
	for _, node := range ns {
		if node.HasHandler(j.Handler) {
			n++
		}
	}
	if n == 0 {
		return "", false
	}
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(j.ID))
	_, _ = h.Write(b[:])
	k := int(h.Sum64() % uint64(n))
	for _, node := range ns {
		if node.HasHandler(j.Handler) {
			if k == 0 {
				return node.UUID, true
			}
			k--
		}
	}
	return "", false
}
