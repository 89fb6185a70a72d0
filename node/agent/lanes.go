package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronix/cronix/cluster"
)

// execution is one accepted fire: queued in its job's lane or running.
type execution struct {
	d        cluster.Dispatch
	num      int // per-agent unique run number; the <pid> segment of its proc key
	received time.Time
	ctx      context.Context // cancelled (with a killCause) to kill the fire
	cancel   context.CancelCauseFunc
	out      *cappedOutput
	// done is set by run once the final result is queued: release then
	// does what finished does, in the same critical section.
	done bool
	// journaled: its start line is in the start journal already (written
	// with its batch by startBatch); run does not write it again.
	journaled bool
}

// killCause is why a fire was cancelled on purpose (kill request, covered
// by a newer fire); the fire is reported "killed" with Message and is not
// retried.
type killCause struct{ msg string }

func (k *killCause) Error() string { return k.msg }

// lane serialises the fires of one job on this node: cur runs (or is about
// to), waiting are SERIAL_EXECUTION fires queued behind it, FIFO.
type lane struct {
	cur     *execution
	waiting []*execution
}

// newExecution prepares a fire; its context descends from the agent's run
// context, so shutdown cancels it too.
func (a *Agent) newExecution(d cluster.Dispatch, received time.Time) *execution {
	ctx, cancel := context.WithCancelCause(a.runCtx)
	a.runSeq++
	return &execution{d: d, num: a.runSeq, received: received, ctx: ctx, cancel: cancel,
		out: newCappedOutput(a.cfg.OutputCap)}
}

// admitLocked applies the job's block strategy to a new fire. It returns
// the fire and true when it should start now (the caller then takes a run
// slot); otherwise the fire was queued, skipped or covered here. The func,
// when not nil, reports the fires this ended (skipped, covered, killed
// while queued); the caller holds a.mu and calls it once it released it.
func (a *Agent) admitLocked(d cluster.Dispatch, received time.Time) (*execution, bool, func()) {
	e := a.newExecution(d, received) // not a named result: the closures below report it
	jobID := d.Job.JobID
	ln := a.lanes[jobID]
	if ln == nil {
		ln = &lane{}
		a.lanes[jobID] = ln
	}
	a.execs[d.FireID] = e
	pk, killed := a.pendingKills[d.FireID]
	delete(a.pendingKills, d.FireID)
	if killed {
		delete(a.execs, d.FireID)
		if ln.cur == nil && len(ln.waiting) == 0 {
			delete(a.lanes, jobID)
		}
		if pk.cancel != "" {
			return nil, false, func() { a.finishUnstarted(e, cluster.StatusSkipped, pk.cancel) }
		}
		return nil, false, func() { a.finishUnstarted(e, cluster.StatusKilled, "killed by request before it started") }
	}
	if ln.cur == nil {
		ln.cur = e
		return e, true, nil
	}
	running := ln.cur.d.FireID
	switch d.Job.BlockStrategy {
	case cluster.BlockDiscardLater:
		delete(a.execs, d.FireID)
		return nil, false, func() {
			a.finishUnstarted(e, cluster.StatusSkipped,
				fmt.Sprintf("discarded: fire %s of this job is still running (DISCARD_LATER)", running))
		}
	case cluster.BlockCoverEarly:
		covered := ln.waiting
		ln.waiting = []*execution{e}
		for _, c := range covered {
			delete(a.execs, c.d.FireID)
		}
		ln.cur.cancel(&killCause{msg: "covered by " + d.FireID})
		if len(covered) == 0 {
			return nil, false, nil
		}
		return nil, false, func() {
			for _, c := range covered {
				a.finishUnstarted(c, cluster.StatusKilled, "covered by "+d.FireID)
			}
		}
	default:
		ln.waiting = append(ln.waiting, e)
		return nil, false, nil
	}
}

// unadmit undoes admit for a fire that will not start (the agent stops
// before a run slot freed); its run key stays for the next process.
func (a *Agent) unadmit(e *execution) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.execs, e.d.FireID)
	delete(a.active, e.d.FireID)
	if ln := a.lanes[e.d.Job.JobID]; ln != nil && ln.cur == e {
		if len(ln.waiting) == 0 {
			delete(a.lanes, e.d.Job.JobID)
		} else {
			ln.cur = nil // cannot happen: a job's fires are admitted and started in order
		}
	}
	e.cancel(nil)
}

// release is called when a running fire is done: the next fire queued in
// its lane inherits the run slot and starts; otherwise the slot is freed.
// While the agent stops, queued fires are not started: their run keys stay
// in etcd for the next process.
func (a *Agent) release(e *execution) {
	a.mu.Lock()
	if e.done {
		a.finishedLocked(e.d.FireID)
	}
	delete(a.execs, e.d.FireID)
	jobID := e.d.Job.JobID
	ln := a.lanes[jobID]
	var next *execution
	if ln != nil && ln.cur == e {
		if a.draining {
			for _, w := range ln.waiting {
				delete(a.execs, w.d.FireID)
				delete(a.active, w.d.FireID)
				w.cancel(nil)
				w.out.Close()
			}
			ln.waiting = nil
		}
		if len(ln.waiting) > 0 {
			next = ln.waiting[0]
			ln.waiting = ln.waiting[1:]
			ln.cur = next
		} else {
			delete(a.lanes, jobID)
		}
	}
	if next != nil {
		a.runs.Add(1) // before the caller's runs.Done, so Wait cannot miss it
	}
	a.mu.Unlock()
	e.cancel(nil)
	if next != nil {
		go a.run(next)
		return
	}
	<-a.sem
}

// finishUnstarted reports a fire that never ran (skipped, covered or killed
// while queued).
func (a *Agent) finishUnstarted(e *execution, status, msg string) {
	now := time.Now().UTC()
	res := a.newResult(e.d, status)
	res.FinishedAt = &now
	res.Message = msg
	res.Attempt = 0 // it never ran
	a.reporter.enqueue(res)
	a.finished(e.d.FireID)
	e.out.Close()
	e.cancel(nil)
}

// kill kills a fire this agent holds: a queued one is reported "killed" at
// once, a running one is cancelled (and reported "killed" when its handler
// returns). A fire not seen yet (its dispatch not taken yet) is remembered
// when remember is set, and reported "killed" without running when it comes.
// It reports whether the fire was found or remembered.
func (a *Agent) kill(fireID, msg string, remember bool) bool {
	a.mu.Lock()
	e, ok := a.execs[fireID]
	if !ok {
		if remember && a.rememberKillLocked(fireID, pendingKill{}) {
			a.mu.Unlock()
			return true
		}
		a.mu.Unlock()
		return false
	}
	ln := a.lanes[e.d.Job.JobID]
	if ln != nil && ln.cur != e {
		for i, w := range ln.waiting {
			if w == e {
				ln.waiting = append(ln.waiting[:i:i], ln.waiting[i+1:]...)
				delete(a.execs, fireID)
				a.mu.Unlock()
				a.finishUnstarted(e, cluster.StatusKilled, msg)
				return true
			}
		}
	}
	a.mu.Unlock()
	e.cancel(&killCause{msg: msg})
	return true
}

// pendingKill is a kill (or cancel) request for a fire not admitted yet:
// not seen yet, or held until its StartAt.
type pendingKill struct {
	at     time.Time
	cancel string // a cancel: report the fire skipped with this message
}

// rememberKillLocked keeps pk for fireID until the fire is admitted (or
// pendingKillTTL), unless the fire already ran here. a.mu is held.
func (a *Agent) rememberKillLocked(fireID string, pk pendingKill) bool {
	if _, finished := a.unacked[fireID]; finished || a.recent.has(fireID) {
		return false
	}
	now := time.Now()
	for id, p := range a.pendingKills {
		if now.Sub(p.at) > pendingKillTTL {
			delete(a.pendingKills, id)
		}
	}
	pk.at = now
	a.pendingKills[fireID] = pk
	return true
}

// cancelUnstarted drops a fire that has not started here (held until its
// StartAt, or not seen yet): it is reported skipped with msg when it would
// have been admitted. A fire already taken (running or queued) is left
// alone. It reports whether the cancel was kept.
func (a *Agent) cancelUnstarted(fireID, msg string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, taken := a.execs[fireID]; taken {
		return false
	}
	return a.rememberKillLocked(fireID, pendingKill{cancel: msg})
}

// pendingKillTTL is how long a kill request for a fire not seen yet is kept.
const pendingKillTTL = 10 * time.Minute

// killedCause returns the kill cause of a cancelled fire, if it was killed
// on purpose.
func killedCause(ctx context.Context) (*killCause, bool) {
	var kc *killCause
	if errors.As(context.Cause(ctx), &kc) {
		return kc, true
	}
	return nil, false
}

// lookup returns the fire this agent holds (queued or running).
func (a *Agent) lookup(fireID string) (*execution, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.execs[fireID]
	return e, ok
}
