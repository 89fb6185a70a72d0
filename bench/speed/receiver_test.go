package main

import (
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
