package agent

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
)

// startRunner records when each fire's handler was called and succeeds at
// once; done is closed when want calls were made.
type startRunner struct {
	mu     sync.Mutex
	starts []time.Time
	want   int
	done   chan struct{}
}

func (r *startRunner) Handlers() []cluster.PluginInfo {
	return []cluster.PluginInfo{{Name: "echo", Version: "1.0.0"}}
}

func (r *startRunner) Run(context.Context, string, pluginapi.Request, io.Writer) (pluginapi.Result, error) {
	now := time.Now()
	r.mu.Lock()
	r.starts = append(r.starts, now)
	if len(r.starts) == r.want {
		close(r.done)
	}
	r.mu.Unlock()
	return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
}

func (r *startRunner) expect(n int) {
	r.mu.Lock()
	r.starts, r.want, r.done = r.starts[:0], n, make(chan struct{})
	r.mu.Unlock()
}

// batchWait bounds each wait of BenchmarkBatchStart: a batch's handler
// calls, then its run keys' deletion (milliseconds when all is well).
const batchWait = 2 * time.Minute

// waitNoRunKeys waits until the node has no run key left (every result
// delivered and its key deleted): it counts the keys, then follows the
// deletions (and any new key) on a watch from that count's revision. It
// fails b when keys are still there after timeout.
func waitNoRunKeys(b *testing.B, bu *bundle, timeout time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), timeout)
	defer cancel()
	prefix := bu.cfg.Keys.RunPrefix(bu.cfg.UUID)
	resp, err := bu.etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	n := resp.Count
	wch := bu.etcd.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	for n > 0 {
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			b.Fatalf("%d run keys still there after %s (watch: %v)", n, timeout, wr.Err())
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				n--
			case ev.IsCreate():
				n++
			}
		}
	}
}

// startBenchAgent starts an agent with a spool (start journal and result
// spool on disk) whose runner records when each handler was called.
func startBenchAgent(b *testing.B) (*bundle, *startRunner) {
	b.Helper()
	spoolDir := b.TempDir()
	bu := setup(b, func(c *Config) { c.SpoolDir = spoolDir })
	run := &startRunner{}
	a, err := New(bu.cfg, bu.etcd, run)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Stop)
	if err := a.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	return bu, run
}

// BenchmarkBatchStart is a tick's batch on one node: n fires of n jobs
// put under the node's run prefix in txns of 1,000 (as the leader
// dispatches), with a spool (start journal and result spool on disk). It
// reports how long after the first txn's commit the handlers were called:
// the median fire and the last one (the node's share of a fire's lateness).
//
//	go test ./node/agent -run '^$' -bench BatchStart -benchtime 20x
func BenchmarkBatchStart(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bu, run := startBenchAgent(b)
			var p50, last time.Duration
			for i := range b.N {
				ops := make([]clientv3.Op, n)
				for j := range ops {
					id := fmt.Sprintf("%d-%d", j+1, 1764000000000+int64(i)*1000)
					key := bu.cfg.Keys.Run(bu.cfg.UUID, id)
					ops[j] = clientv3.OpPut(key, seal(b, key, dispatchValue(b, id, "echo", "", 0)))
				}
				run.expect(n)
				var t0 time.Time
				for c := 0; c < n; c += 1000 {
					if _, err := bu.etcd.Txn(b.Context()).Then(ops[c:min(n, c+1000)]...).Commit(); err != nil {
						b.Fatal(err)
					}
					if c == 0 {
						t0 = time.Now()
					}
				}
				select {
				case <-run.done:
				case <-time.After(batchWait):
					run.mu.Lock()
					started := len(run.starts)
					run.mu.Unlock()
					b.Fatalf("%d of %d handlers called after %s", started, n, batchWait)
				}
				run.mu.Lock()
				starts := slices.Clone(run.starts)
				run.mu.Unlock()
				slices.SortFunc(starts, func(x, y time.Time) int { return x.Compare(y) })
				p50 += starts[len(starts)/2].Sub(t0)
				last += starts[len(starts)-1].Sub(t0)
				b.StopTimer()
				waitNoRunKeys(b, bu, batchWait) // results delivered, keys deleted: the next tick starts clean
				b.StartTimer()
			}
			b.ReportMetric(float64(p50.Microseconds())/1000/float64(b.N), "ms-p50-start")
			b.ReportMetric(float64(last.Microseconds())/1000/float64(b.N), "ms-last-start")
		})
	}
}
