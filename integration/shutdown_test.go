package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// TestStandaloneStopIsBoundedWithRunsInFlight interrupts (SIGINT) a
// standalone whose node has hundreds of runs in flight — http jobs firing
// every second at a receiver that holds every request — and checks that it
// exits within the documented bound (the node's 10 s grace, the cancel, the
// result flush, the server and etcd), then that the next start leaves no run
// of before the stop unfinished: the cancelled runs' results come from the
// node's spool, the dispatched but not started fires run then.
func TestStandaloneStopIsBoundedWithRunsInFlight(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(rec.Close)
	var released atomic.Bool
	releaseAll := func() {
		if released.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(releaseAll)

	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, newStandalone(t, dataDir, "--http-allow-loopback"))
	const jobs = 200
	body := make([]map[string]any, jobs)
	for i := range body {
		body[i] = map[string]any{"name": fmt.Sprintf("held-%03d", i), "schedule": "*/1 * * * * *", "handler": "http",
			"params": map[string]any{"url": rec.URL + "/held"}}
	}
	var out struct {
		Items []struct {
			ID int64 `json:"id"`
		} `json:"items"`
	}
	code, err := s.api.Do(http.MethodPost, "/api/v1/jobs/batch", map[string]any{"jobs": body}, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	require.Len(t, out.Items, jobs)

	inFlight := time.Now().Add(60 * time.Second)
	for arrived.Load() < jobs { // one run per job in flight (SERIAL_EXECUTION queues the next)
		if time.Now().After(inFlight) {
			runs, _, err := s.api.Runs(out.Items[0].ID, 10)
			t.Fatalf("%d requests held after 60 s; runs of job %d: %+v (%v)", arrived.Load(), out.Items[0].ID, runs, err)
		}
		time.Sleep(50 * time.Millisecond) // poll period
	}
	stopAt := time.Now()
	require.NoError(t, s.proc.Interrupt(2*time.Minute))
	took := time.Since(stopAt)
	t.Logf("standalone stopped %s after SIGINT with %d requests held", took.Round(time.Millisecond), arrived.Load())
	require.Less(t, took, 75*time.Second, "stop is bounded")

	// Next start: the receiver answers again.
	releaseAll()
	s = startStandalone(t, dataDir, s)
	var pending []string
	done := func() bool {
		pending = pending[:0]
		for _, it := range out.Items {
			runs, _, err := s.api.Runs(it.ID, 500)
			if err != nil {
				pending = append(pending, err.Error())
				return false
			}
			for _, r := range runs {
				if r.ScheduledAt.Before(stopAt.Add(-time.Second)) && !cluster.Terminal(r.Status) {
					pending = append(pending, r.FireID+"="+r.Status)
				}
			}
		}
		return len(pending) == 0
	}
	deadline := time.Now().Add(90 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // poll period
	}
	require.Empty(t, pending, "runs fired before the stop still not finished 90 s after the restart")
}
