package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// TestStopIsBoundedUnderBacklog stops an agent with many fires running, one
// handler that ignores cancellation, finished results queued and a server
// that accepts connections but never answers (a server drowning in a
// backlog). Stop must return within ShutdownGrace + the 5 s given to
// cancelled handlers + FlushTimeout (plus deregistration), and nothing is
// lost: the next process on the same spool delivers a final result for
// every fire — the finished and the cancelled ones from the spool, the
// abandoned one as lost from the start journal — without running any fire
// again.
func TestStopIsBoundedUnderBacklog(t *testing.T) {
	t.Parallel()
	unblock := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers while the first agent runs
		case <-r.Context().Done():
		case <-unblock:
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(unblock) })

	spoolDir := t.TempDir()
	const grace, flush = 300 * time.Millisecond, time.Second
	b := setup(t, func(c *Config) {
		c.SpoolDir = spoolDir
		c.ServerURLs = []string{hanging.URL}
		c.ShutdownGrace = grace
		c.FlushTimeout = flush
	})
	b.start(t)

	const running, finished = 300, 300
	var all []string
	for i := range running {
		id := fmt.Sprintf("%d-1", 1000+i)
		all = append(all, id)
		b.dispatch(t, id, "block", "", 0) // returns when cancelled
	}
	for i := range finished {
		id := fmt.Sprintf("%d-1", 2000+i)
		all = append(all, id)
		b.dispatch(t, id, "echo", "", 0) // result queued, never delivered
	}
	stuck := "3000-1"
	all = append(all, stuck)
	b.dispatch(t, stuck, "stuck", "", 0) // ignores cancellation
	require.Eventually(t, func() bool {
		for _, id := range all {
			if b.runner.Calls(id) != 1 {
				return false
			}
		}
		return true
	}, 30*time.Second, tick, "every fire started")

	start := time.Now()
	b.agent.Stop()
	took := time.Since(start)
	t.Logf("Stop took %s with %d fires running and %d results queued", took, running+1, finished)
	bound := grace + 5*time.Second + flush + 5*time.Second // + deregistration, on a loaded machine
	require.Less(t, took, bound, "Stop is bounded")

	// The next process, with a server that answers.
	b.srv = newResultServer(t)
	b.cfg.ServerURLs = []string{b.srv.URL}
	b.agent = b.newAgent(t)
	b.start(t)
	for _, id := range all {
		res := b.waitFinal(t, id)
		switch {
		case id == stuck:
			require.Equal(t, cluster.StatusLost, res.Status, "the abandoned fire is reported lost from the journal")
		case res.Output == id:
			require.Equal(t, cluster.StatusSuccess, res.Status)
		default:
			require.Equal(t, cluster.StatusKilled, res.Status, "fire %s", id)
		}
		require.Equal(t, 1, b.runner.Calls(id), "fire %s is not run again", id)
	}
	close(b.runner.release) // let the abandoned handler return
}
