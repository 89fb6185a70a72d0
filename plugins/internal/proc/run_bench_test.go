//go:build linux

package proc

import (
	"bytes"
	"context"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRun starts /bin/true through Run from 2 goroutines (a burst's
// parallel starts) and reports this process's own CPU per run (user+system
// from getrusage, the children's excluded): what the plugin spends on a
// start, wait and output besides the fork+exec the child pays for itself.
//
//	go test ./plugins/internal/proc -run XXX -bench Run -benchtime 3000x -count 5
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	var wg sync.WaitGroup
	runs := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			var out bytes.Buffer
			for range runs {
				out.Reset()
				res, err := Run(ctx, exec.Command("/bin/true"), &out, Options{})
				if err != nil || res.ExitCode != 0 {
					b.Error(res, err)
				}
			}
		})
	}
	for b.Loop() {
		runs <- struct{}{}
	}
	close(runs)
	wg.Wait()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "self-cpu-µs/op")
}
