package agent

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/cronix/cronix/cluster"
)

// maxHold bounds how long a fire dispatched ahead is held: a StartAt
// further away than this (the node's clock far behind the leader's) starts
// after maxHold instead, so a skewed clock delays fires by at most that.
const maxHold = 10 * time.Second

// holdQueue keeps the fires dispatched ahead of their time (StartAt still
// to come, see cluster.Dispatch.StartAt) until then. They are verified and
// decoded already, but not claimed or admitted: the block strategy of
// their job is applied at their start time, a kill request for one is
// remembered (pendingKills) and applied when it is admitted, and Stop
// drops them (their run keys stay for the next process, like queued
// fires). The release goroutine (releaseHeld) is owned by intake.
type holdQueue struct {
	mu    sync.Mutex
	byAt  map[int64][]opened // StartAt (Unix ns) → fires, in arrival order
	times timeHeap           // the keys of byAt
	held  map[string]bool    // fire ids held (a repeated delivery is held once)
	wake  chan struct{}      // cap 1: the earliest time changed
}

func newHoldQueue() *holdQueue {
	return &holdQueue{byAt: map[int64][]opened{}, held: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// startLead is how long before its StartAt a fire is released to a
// Runner that waits for Request.StartAt itself (pluginhost: a plugin whose
// Describe says HoldsStartAt; every plugin built with the Go SDK 1.1+):
// the journal write, the run goroutine and the call to the plugin happen
// before the start time and the plugin starts the handler at StartAt. The
// block strategy is then applied startLead before StartAt.
const startLead = 100 * time.Millisecond

// startHolder is a Runner that can be handed a run before its StartAt.
type startHolder interface {
	HoldsStartAt(handler string) bool
}

// releaseAt is when a fire dispatched ahead is released from the hold.
func (a *Agent) releaseAt(d *cluster.Dispatch) time.Time {
	if sh, ok := a.runner.(startHolder); ok && sh.HoldsStartAt(d.Job.Handler) {
		return d.StartAt.Add(-startLead)
	}
	return d.StartAt
}

// holdEarly moves the fires whose release time (releaseAt) is still to
// come into the hold and returns the others (due now), in order.
func (a *Agent) holdEarly(fires []opened) []opened {
	now := time.Now()
	due := fires[:0:0]
	q := a.hold
	var locked bool // q.mu is taken on the first fire held
	for _, f := range fires {
		if f.err != nil || f.d.StartAt.IsZero() {
			due = append(due, f)
			continue
		}
		at := a.releaseAt(&f.d)
		if !at.After(now) {
			due = append(due, f)
			continue
		}
		if lim := now.Add(maxHold); at.After(lim) {
			at = lim
		}
		if !locked {
			q.mu.Lock()
			locked = true
		}
		if q.held[f.d.FireID] {
			continue
		}
		q.held[f.d.FireID] = true
		k := at.UnixNano()
		if _, ok := q.byAt[k]; !ok {
			heap.Push(&q.times, k)
		}
		q.byAt[k] = append(q.byAt[k], f)
	}
	if locked {
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return due
}

// takeDue removes and returns the held fires whose time is at or before
// now, earliest first; next is the time of the earliest left (zero: none).
func (q *holdQueue) takeDue(now time.Time) (due []opened, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.times) > 0 {
		k := q.times[0]
		if k > now.UnixNano() {
			return due, time.Unix(0, k)
		}
		heap.Pop(&q.times)
		for _, f := range q.byAt[k] {
			delete(q.held, f.d.FireID)
		}
		due = append(due, q.byAt[k]...)
		delete(q.byAt, k)
	}
	return due, time.Time{}
}

// count is the number of fires held.
func (q *holdQueue) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.held)
}

// releaseHeld admits each held fire at its time (admitAll) until ctx ends.
func (a *Agent) releaseHeld(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		due, next := a.hold.takeDue(time.Now())
		if len(due) > 0 && !a.admitAll(ctx, due) {
			return
		}
		if len(due) > 0 {
			continue // more may have come due meanwhile
		}
		var tc <-chan time.Time
		if !next.IsZero() {
			t.Reset(time.Until(next))
			tc = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-a.hold.wake:
		case <-tc:
		}
		t.Stop()
	}
}

// timeHeap is a min-heap of Unix ns.
type timeHeap []int64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
