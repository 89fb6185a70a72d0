package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/spool"
)

// BenchmarkEnqueue is what a finishing run pays to queue its result on a
// node with a spool (the http handler's typical result: a short output),
// in batches of 2,000 results each given to a fresh reporter.
func BenchmarkEnqueue(b *testing.B) {
	const batch = 2000
	at := time.Now()
	exit := 0
	res := make([]cluster.RunResult, batch)
	for i := range res {
		res[i] = cluster.RunResult{FireID: fmt.Sprintf("%d-1796442364000", i+1), JobID: int64(i + 1), Node: "6f1c2a4e-node",
			Status: cluster.StatusSuccess, Output: "HTTP 204 No Content\n" + strings.Repeat("x", 40), ExitCode: &exit,
			StartedAt: &at, FinishedAt: &at, Attempt: 1}
	}
	sp, _, err := spool.Open(b.TempDir(), testLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sp.Close() })
	b.ReportAllocs()
	var r *reporter
	for i := 0; b.Loop(); i++ {
		if i%batch == 0 {
			r = &reporter{log: testLogger(), batch: batch + 1, maxBytes: 1 << 30,
				notify: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
			r.setSpoolLocked(sp)
		}
		r.enqueue(res[i%batch])
	}
}

// BenchmarkDeliver is the delivering goroutine's encoding of a batch of
// 2,000 results queued on a node with a spool (written to the spool's
// buffer and the POST body built), per result.
func BenchmarkDeliver(b *testing.B) {
	const batch = 2000
	at := time.Now()
	exit := 0
	sp, _, err := spool.Open(b.TempDir(), testLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sp.Close() })
	r := &reporter{log: testLogger(), batch: batch + 1, maxBytes: 1 << 30,
		notify: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	r.setSpoolLocked(sp)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range batch {
			r.enqueue(cluster.RunResult{FireID: fmt.Sprintf("%d-1796442364000", i+1), JobID: int64(i + 1), Node: "6f1c2a4e-node",
				Status: cluster.StatusSuccess, Output: "HTTP 204 No Content\n" + strings.Repeat("x", 40), ExitCode: &exit,
				StartedAt: &at, FinishedAt: &at, Attempt: 1})
		}
		b.StartTimer()
		lines, err := r.encode(batch)
		if err != nil {
			b.Fatal(err)
		}
		_ = batchBody(lines)
		r.ack(batch)
		if err := sp.Ack(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/result")
}
