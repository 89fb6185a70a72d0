package agent

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

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
	byAt  map[int64][]opened // release time (Unix ns) → fires, in arrival order
	times timeHeap           // the keys of byAt
	held  map[string]bool    // fire ids held (a repeated delivery is held once)
	wake  chan struct{}      // cap 1: the earliest time changed
	// arrived counts the scheduled fires delivered for each scheduled
	// instant (Unix ms, from their keys' fire ids): the size of a batch
	// before its fires are verified, for batchLead (see noteArrivals).
	arrived map[int64]int
}

func newHoldQueue() *holdQueue {
	return &holdQueue{byAt: map[int64][]opened{}, held: map[string]bool{}, wake: make(chan struct{}, 1),
		arrived: map[int64]int{}}
}

// arrivedKeep is how long past its instant a batch's count is kept.
const arrivedKeep = time.Minute

// noteArrivals counts the fires of a watch response (or listing) by the
// scheduled instant their keys name, before any is verified: a fire
// dispatched ahead names its StartAt there. A large batch arrives as a
// few etcd transactions and is verified and admitted intakeChunk fires at
// a time by parallel shards, so the fires of one call of holdEarly are not
// the batch; a fire that arrives after its idleLead time is released
// batchLead of this count ahead (at once for thousands), not of its chunk's
// 64 (startLead: its hand-over then began too late to end before the
// second). The count only moves a verified fire's release within idleLead
// of its StartAt: a forged key cannot run anything.
func (q *holdQueue) noteArrivals(kvs []*mvccpb.KeyValue, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, kv := range kvs {
		ms, ok := cluster.ScheduledMilliOfFire(cluster.LastSegment(string(kv.Key)))
		if !ok {
			continue
		}
		if _, seen := q.arrived[ms]; !seen {
			old := now.Add(-arrivedKeep).UnixMilli()
			for k := range q.arrived {
				if k < old {
					delete(q.arrived, k)
				}
			}
		}
		q.arrived[ms]++
	}
}

// startLead is how long before its StartAt a fire is released to a
// Runner that waits for Request.StartAt itself (pluginhost: a plugin whose
// Describe says HoldsStartAt; every plugin built with the Go SDK 1.1+)
// when its job has a fire running or queued on this node: the journal
// write, the run goroutine and the call to the plugin happen before the
// start time and the plugin starts the handler at StartAt. The block
// strategy is then applied startLead before StartAt.
const startLead = 100 * time.Millisecond

// idleLead is the most before its StartAt such a fire is released, when
// its job has nothing running or queued on this node then: startLead plus
// leadPerFire for each fire due at the same StartAt (batchLead), so that
// the hand-over of a large batch (thousands of gRPC calls to the plugin)
// does not have to fit in startLead: at 3,000 fires per second it did
// not, and the last fires reached the plugin after their second. A small
// batch stays near startLead: released earlier, it would take CPU from the
// previous second's runs (the shell plugin's forks at 500/s go on for
// ~600 ms). The block strategy of an idle job cannot decide differently
// at StartAt unless another fire of the job starts in between. A fire
// whose job is busy waits for startLead, so a run that ends in the last
// idleLead still counts as ended for the block strategy, as before.
const (
	idleLead    = 400 * time.Millisecond
	leadPerFire = 100 * time.Microsecond
)

// batchLead is how long before their StartAt n fires of idle jobs due
// then are released.
func batchLead(n int) time.Duration {
	return min(idleLead, startLead+time.Duration(n)*leadPerFire)
}

// startHolder is a Runner that can be handed a run before its StartAt.
type startHolder interface {
	HoldsStartAt(handler string) bool
}

// releaseAt is when a fire dispatched ahead is released from the hold,
// at now; batch counts the fires due at a StartAt and busy reports
// whether a job has a fire running or queued on this node (each asked
// only when it matters).
func (a *Agent) releaseAt(d *cluster.Dispatch, now time.Time, batch func(startAt time.Time) int, busy func(jobID int64) bool) time.Time {
	sh, ok := a.runner.(startHolder)
	if !ok || !sh.HoldsStartAt(d.Job.Handler) {
		return d.StartAt
	}
	if first := d.StartAt.Add(-idleLead); first.After(now) {
		return first // asked again then, with the whole batch
	}
	late := d.StartAt.Add(-startLead)
	if !late.After(now) {
		return now
	}
	if busy(d.Job.JobID) {
		return late
	}
	if at := d.StartAt.Add(-batchLead(batch(d.StartAt))); at.After(now) {
		return at
	}
	return now
}

// busyJobs returns a func reporting whether a job has a fire running or
// queued on this node; it takes a.mu once, on its first call.
func (a *Agent) busyJobs() func(jobID int64) bool {
	var lanes map[int64]bool
	return func(jobID int64) bool {
		if lanes == nil {
			a.mu.Lock()
			lanes = make(map[int64]bool, len(a.lanes))
			for id, ln := range a.lanes {
				lanes[id] = ln.cur != nil || len(ln.waiting) > 0
			}
			a.mu.Unlock()
		}
		return lanes[jobID]
	}
}

// holdEarly moves the fires whose release time (releaseAt) is still to
// come into the hold and returns the others (due now), in order. The
// release goroutine passes the fires it takes from the hold through it
// again, so the fires taken at their idleLead time go back until their
// batch's time (batchLead of how many are due at their StartAt) or, for
// a busy job, their startLead time.
func (a *Agent) holdEarly(fires []opened) []opened {
	now := time.Now()
	var due []opened
	q := a.hold
	busy := a.busyJobs()
	var locked bool // q.mu is taken on the first fire held
	// The batch due at a StartAt: the fires delivered for it (noteArrivals)
	// or, if more, those of this call; counted once per StartAt.
	var batch map[int64]int // StartAt (Unix ns) → fires due then
	count := func(at time.Time) int {
		if batch == nil {
			batch = map[int64]int{}
			for _, f := range fires {
				if f.err == nil && !f.d.StartAt.IsZero() {
					batch[f.d.StartAt.UnixNano()]++
				}
			}
			if !locked {
				q.mu.Lock()
			}
			for k, n := range batch {
				batch[k] = max(n, q.arrived[time.Unix(0, k).UnixMilli()])
			}
			if !locked {
				q.mu.Unlock()
			}
		}
		return batch[at.UnixNano()]
	}
	// A batch is thousands of fires that mostly go the same way (all held
	// at intake, all due at release): the slices are sized for the rest of
	// the batch when first needed instead of doubled up to it.
	addDue := func(i int, f opened) {
		if due == nil {
			due = make([]opened, 0, len(fires)-i)
		}
		due = append(due, f)
	}
	for i, f := range fires {
		if f.err != nil || f.d.StartAt.IsZero() {
			addDue(i, f)
			continue
		}
		at := a.releaseAt(&f.d, now, count, busy)
		if !at.After(now) {
			addDue(i, f)
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
			q.byAt[k] = make([]opened, 0, len(fires)-i)
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
		if len(due) > 0 {
			if due = a.holdEarly(due); len(due) > 0 && !a.admitAll(ctx, due) {
				return
			}
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
