package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSampleLogNeverMovesWhatItHolds: the receiver's log keeps every
// arrival in order and grows by whole blocks, so an arrival once recorded
// stays where it is (a slice's growth would copy it, under the receiver's
// lock, stalling the receiving loops).
func TestSampleLogNeverMovesWhatItHolds(t *testing.T) {
	var l sampleLog
	t0 := time.Unix(1_800_000_000, 0)
	total := 2*sampleBlock + sampleBlock/2
	require.Zero(t, l.len())
	var first *sample
	for i := range total {
		l.add(sample{Job: int64(i), At: t0.Add(time.Duration(i) * time.Microsecond)})
		if i == 0 {
			first = &l.blocks[0][0]
		}
		require.Same(t, first, &l.blocks[0][0], "the first arrival moved after %d more", i)
	}
	require.Equal(t, total, l.len())
	require.Len(t, l.blocks, 3)
	i := 0
	for s := range l.all {
		require.Equal(t, int64(i), s.Job, "out of order")
		i++
	}
	require.Equal(t, total, i)

	// Stopping early stops.
	seen := 0
	for range l.all {
		seen++
		if seen == 3 {
			break
		}
	}
	require.Equal(t, 3, seen)
}

// TestAllPastWaitsForTheScheduledSecond: a job counts as past the window's
// end only once a fire scheduled at or after it arrived, not when any late
// fire arrives after it; a request naming no fire counts by its arrival.
func TestAllPastWaitsForTheScheduledSecond(t *testing.T) {
	r := &receiver{last: map[int64]time.Time{}}
	end := time.UnixMilli(1_796_000_000_000)
	fire := func(at time.Time) string { return "7-" + strconv.FormatInt(at.UnixMilli(), 10) }

	// Job 0's fire of 3 s before the end arrives 2 s after it: still in flight.
	r.record("/j/0", fire(end.Add(-3*time.Second)), end.Add(2*time.Second), time.Time{})
	r.record("/j/1", fire(end), end.Add(10*time.Millisecond), time.Time{})
	require.False(t, r.allPast(2, end))
	// An older fire arriving later does not move a job back.
	r.record("/j/1", fire(end.Add(-time.Second)), end.Add(3*time.Second), time.Time{})
	r.record("/j/0", fire(end), end.Add(3*time.Second), time.Time{})
	require.True(t, r.allPast(2, end))

	// No fire id: the arrival time decides.
	r.record("/j/2", "", end.Add(-time.Millisecond), time.Time{})
	require.False(t, r.allPast(3, end))
	r.record("/j/2", "", end, time.Time{})
	require.True(t, r.allPast(3, end))
}
