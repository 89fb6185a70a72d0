package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/spool"
)

// newSpooledReporter is a reporter with an empty spool in dir, batches of
// up to batch results, and no server to deliver to.
func newSpooledReporter(tb testing.TB, dir string, batch int) *reporter {
	tb.Helper()
	sp, held, err := spool.Open(dir, testLogger())
	require.NoError(tb, err)
	require.Empty(tb, held)
	r := &reporter{log: testLogger(), batch: batch, maxBytes: 1 << 30, servers: func() []string { return nil },
		notify: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	r.setSpoolLocked(sp)
	return r
}

// sampleResults are reports with the characters JSON escapes.
func sampleResults() []cluster.RunResult {
	at := time.Date(2026, 12, 5, 4, 30, 0, 123456789, time.UTC)
	exit := 3
	return []cluster.RunResult{
		{FireID: "1-1", JobID: 1, Node: "n", Status: cluster.StatusSuccess, Output: "<b>&amp;</b> \u2028 é\n\t\"q\"", StartedAt: &at},
		{FireID: "2-7", JobID: 2, Node: "n", Status: cluster.StatusFailed, ExitCode: &exit, Message: "exit 3", Attempt: 2},
		{FireID: "3-9", JobID: 3, Node: "n", Status: cluster.StatusRunning},
	}
}

// TestBatchBodyIsTheBatchsJSON: the POST body assembled from the results'
// own encodings is what json.Marshal makes of the batch.
func TestBatchBodyIsTheBatchsJSON(t *testing.T) {
	t.Parallel()
	rs := sampleResults()
	for n := 1; n <= len(rs); n++ {
		lines := make([][]byte, n)
		for i := range lines {
			var err error
			lines[i], err = spool.Encode(rs[i])
			require.NoError(t, err)
		}
		want, err := json.Marshal(cluster.ResultBatch{Results: rs[:n]})
		require.NoError(t, err)
		require.Equal(t, string(want), string(batchBody(lines)))
	}
}

// TestResultsAreEncodedAndSpooledAtDelivery: a finishing run only queues
// its result; the delivery encodes the queue, writes it to the spool in
// order and hands the batch's encodings over; what is queued later is
// written by the next delivery, or by stop.
func TestResultsAreEncodedAndSpooledAtDelivery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newSpooledReporter(t, dir, 10)
	sp := r.spool
	rs := sampleResults()

	r.enqueue(rs[0])
	r.enqueue(rs[1])
	require.Zero(t, sp.Pending(), "a finishing run does not write the spool")
	require.Equal(t, 2, r.unspooled)

	lines, err := r.encode(1)
	require.NoError(t, err)
	want0, err := spool.Encode(rs[0])
	require.NoError(t, err)
	require.Equal(t, [][]byte{want0}, lines, "the batch's encodings")
	require.Equal(t, 2, sp.Pending(), "every result queued so far is spooled")
	require.Zero(t, r.unspooled)
	lines, err = r.encode(2) // a retry: the batch again, nothing more to spool
	require.NoError(t, err)
	require.Len(t, lines, 2)
	require.Equal(t, 2, sp.Pending())

	r.enqueue(rs[2])
	require.Equal(t, 2, sp.Pending())
	require.Equal(t, 1, r.unspooled)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.stop(ctx) // no server, no time left: what it could not deliver stays in the spool

	sp, held, err := spool.Open(dir, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sp.Close() })
	require.Len(t, held, 3)
	for i := range rs {
		require.Equal(t, rs[i].FireID, held[i].FireID, "in the order they were queued")
		require.Equal(t, rs[i].Output, held[i].Output)
	}
}
