package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// BenchmarkHeldRelease is a tick's batch dispatched ahead: n fires of n
// jobs with one StartAt 500ms after the txns (as the leader dispatches
// ahead), with a spool. It reports how long after StartAt the handlers
// were called (the node's share of a fire's lateness with dispatch ahead):
// the median fire and the last one.
//
//	go test ./node/agent -run '^$' -bench HeldRelease -benchtime 10x
func BenchmarkHeldRelease(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bu, run := startBenchAgent(b)
			var p50, last time.Duration
			for i := range b.N {
				at := time.Now().Add(500 * time.Millisecond).UTC()
				ops := make([]clientv3.Op, n)
				for j := range ops {
					id := fmt.Sprintf("%d-%d", j+1, 1764000000000+int64(i)*1000)
					key := bu.cfg.Keys.Run(bu.cfg.UUID, id)
					var d cluster.Dispatch
					if err := json.Unmarshal([]byte(dispatchValue(b, id, "echo", "", 0)), &d); err != nil {
						b.Fatal(err)
					}
					d.ScheduledAt, d.StartAt = at, at
					v, err := json.Marshal(d)
					if err != nil {
						b.Fatal(err)
					}
					ops[j] = clientv3.OpPut(key, seal(b, key, string(v)))
				}
				run.expect(n)
				for c := 0; c < n; c += 1000 {
					if _, err := bu.etcd.Txn(b.Context()).Then(ops[c:min(n, c+1000)]...).Commit(); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-run.done:
				case <-time.After(30 * time.Second):
					b.Fatalf("only %d of %d fires started", len(run.starts), n)
				}
				run.mu.Lock()
				starts := slices.Clone(run.starts)
				run.mu.Unlock()
				slices.SortFunc(starts, func(x, y time.Time) int { return x.Compare(y) })
				if starts[0].Before(at) {
					b.Fatalf("a fire started %s before its StartAt", at.Sub(starts[0]))
				}
				p50 += starts[len(starts)/2].Sub(at)
				last += starts[len(starts)-1].Sub(at)
				b.StopTimer()
				waitNoRunKeys(b, bu, 2*time.Minute) // results delivered, keys deleted: the next tick starts clean
				b.StartTimer()
			}
			b.ReportMetric(float64(p50.Microseconds())/1000/float64(b.N), "ms-p50-start")
			b.ReportMetric(float64(last.Microseconds())/1000/float64(b.N), "ms-last-start")
		})
	}
}
