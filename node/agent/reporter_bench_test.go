package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronix/cronix/cluster"
)

// benchResults are n results like the http handler's (a short output).
func benchResults(n int) []cluster.RunResult {
	at := time.Now()
	exit := 0
	res := make([]cluster.RunResult, n)
	for i := range res {
		res[i] = cluster.RunResult{FireID: fmt.Sprintf("%d-1796442364000", i+1), JobID: int64(i + 1), Node: "6f1c2a4e-node",
			Status: cluster.StatusSuccess, Output: "HTTP 204 No Content\n" + strings.Repeat("x", 40), ExitCode: &exit,
			StartedAt: &at, FinishedAt: &at, Attempt: 1}
	}
	return res
}

// BenchmarkEnqueue is what a finishing run pays to queue its result on a
// node with a spool, in batches of 2,000 results each given to a fresh
// reporter.
func BenchmarkEnqueue(b *testing.B) {
	const batch = 2000
	res := benchResults(batch)
	dir := b.TempDir()
	b.ReportAllocs()
	var r *reporter
	for i := 0; b.Loop(); i++ {
		if i%batch == 0 {
			b.StopTimer()
			if r != nil {
				_ = r.spool.Close()
			}
			r = newSpooledReporter(b, dir, batch+1)
			b.StartTimer()
		}
		r.enqueue(res[i%batch])
	}
	_ = r.spool.Close()
}

// BenchmarkDeliver is the delivering goroutine's encoding of a batch of
// 2,000 results queued on a node with a spool (written to the spool, its
// fsync included, and the POST body built), per result.
func BenchmarkDeliver(b *testing.B) {
	const batch = 2000
	res := benchResults(batch)
	r := newSpooledReporter(b, b.TempDir(), batch+1)
	b.Cleanup(func() { _ = r.spool.Close() })
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range res {
			r.enqueue(res[i])
		}
		b.StartTimer()
		lines, err := r.encode(batch)
		if err != nil {
			b.Fatal(err)
		}
		_ = batchBody(lines)
		r.ack(batch)
		// What deleteRunKeys does once the run keys are gone.
		r.deletes, r.spoolAcks = nil, 0
		if err := r.spool.Ack(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/result")
}
