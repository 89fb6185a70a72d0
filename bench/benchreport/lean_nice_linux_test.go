package benchreport

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// threadNices counts this process's threads by nice value (field 19 of
// /proc/self/task/<tid>/stat), the main thread only with withMain.
func threadNices(t *testing.T, withMain bool) map[int]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	n := map[int]int{}
	for _, task := range tasks {
		if !withMain && task.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		// The command name may hold spaces: the fields start after its ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		v, err := strconv.Atoi(f[16]) // field 19 of stat, the 17th after the name
		require.NoError(t, err)
		n[v]++
	}
	return n
}

// TestLeanReceiverNice: WithNice(n) puts each worker on a thread of its
// own at nice n, which still serves requests; Close ends those threads.
// (A positive value, which needs no privilege: the bench asks for a
// negative one.)
func TestLeanReceiverNice(t *testing.T) {
	const nice = 7
	before, others := threadNices(t, true)[nice], threadNices(t, false)[nice]
	got := make(chan Arrived, 1)
	rec, err := StartLeanReceiver(2, func(a Arrived) { got <- a }, WithNice(nice))
	require.NoError(t, err)
	require.Equal(t, before+2, threadNices(t, true)[nice], "one thread at nice %d per worker", nice)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL("/j/3"), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "/j/3", (<-got).Path)
	rec.Close()
	// A locked thread whose goroutine returns is ended by the runtime: no
	// thread at that nice value goes back to run other goroutines. The
	// main thread is the exception: Go cannot end it and parks it for good
	// instead, so a worker that ran there leaves it at nice 7, running
	// nothing.
	require.Eventually(t, func() bool { return threadNices(t, false)[nice] == others }, 10*time.Second, 10*time.Millisecond)
}
