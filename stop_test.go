package main

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStopWithinGoesOnWithoutAStuckComponent checks the bound of each stop
// step: a component that returns is waited for; one that does not is left
// behind after the bound, with an error naming it, so the process exits.
func TestStopWithinGoesOnWithoutAStuckComponent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))

	stopped := false
	stopWithin(log, "quick", time.Minute, func() { stopped = true })
	require.True(t, stopped, "a component that stops is waited for")

	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	stopWithin(log, "stuck", 200*time.Millisecond, func() { <-release })
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 200*time.Millisecond)
	require.Less(t, took, 10*time.Second, "a stuck component does not hold the stop")
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, buf.String(), `level=ERROR msg="stop did not finish in time; exiting without waiting for it" component=stuck`)
	require.Contains(t, buf.String(), `msg=stopped component=quick`)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
