package scheduler

import (
	"container/heap"
	"time"

	"github.com/cronix/cronix/server/schedule"
)

// entry is one enabled job known to the loop.
type entry struct {
	job   jobSpec
	sched schedule.Schedule
	// next is the scheduled time of the job's next fire (in heap order).
	next time.Time
	// index is the position in the heap, -1 when not in it (in flight, or
	// the schedule never fires again).
	index int
	// inFlight: a fire of this entry is in the pending batch; the entry
	// returns to the heap when the batch commits.
	inFlight bool
	// misfired: next is a fire missed while no leader ran; the tick applies
	// the job's misfire policy to it and the later missed ones.
	misfired bool
	// delay > 0 for a fixed_delay job: the next fire is delay after the
	// job's previous run ended (not sched.Next).
	delay time.Duration
	// waitRuns holds the run keys a fixed_delay job waits for (out of the
	// heap) before its next fire; nil when it waits for none.
	waitRuns map[string]bool
}

// fireHeap is a min-heap of entries by next fire time (ties by job id, so
// the order is deterministic).
type fireHeap []*entry

var _ heap.Interface = (*fireHeap)(nil)

func (h fireHeap) Len() int { return len(h) }

func (h fireHeap) Less(i, j int) bool {
	if h[i].next.Equal(h[j].next) {
		return h[i].job.ID < h[j].job.ID
	}
	return h[i].next.Before(h[j].next)
}

func (h fireHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *fireHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *fireHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.index = -1
	*h = old[:n-1]
	return e
}

// peek is the earliest entry, nil when empty.
func (h fireHeap) peek() *entry {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

// set puts e in the heap at its (new) next time, or takes it out when next
// is zero (never fires again).
func (h *fireHeap) set(e *entry) {
	switch {
	case e.next.IsZero():
		h.remove(e)
	case e.index >= 0:
		heap.Fix(h, e.index)
	default:
		heap.Push(h, e)
	}
}

func (h *fireHeap) remove(e *entry) {
	if e.index >= 0 {
		heap.Remove(h, e.index)
	}
}

func (h *fireHeap) pop() *entry { return heap.Pop(h).(*entry) }
