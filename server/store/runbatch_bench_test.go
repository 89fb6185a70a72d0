package store

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// BenchmarkRunBatch is the SQL of one second at 500 fires/s on a SQLite
// file: the tick's InsertRuns of 500 runs, then ApplyResultsFinished of
// their 500 results (one node report), as the standalone does them.
// "default" opens the file as Open does; "temp_store=file" keeps SQLite's
// own default for temporary files, to compare.
func BenchmarkRunBatch(b *testing.B) {
	for _, tc := range []struct{ name, params string }{
		{"default", ""},
		{"temp_store=file", "?_pragma=temp_store(DEFAULT)"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := b.Context()
			s, err := Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "c.db")+tc.params)
			require.NoError(b, err)
			defer s.Close()
			const n = 500
			at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			started := at.Add(time.Millisecond)
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for i := 0; b.Loop(); i++ {
				runs := make([]Run, n)
				results := make([]cluster.RunResult, n)
				sec := at.Add(time.Duration(i) * time.Second)
				for j := range runs {
					id := fmt.Sprintf("%d-%d", j+1, sec.Unix())
					runs[j] = Run{FireID: id, JobID: int64(j + 1), Trigger: cluster.TriggerSchedule,
						Status: cluster.StatusTriggered, Node: "n1", ScheduledAt: sec, DispatchedAt: &sec, Attempt: 1}
					fin := sec.Add(5 * time.Millisecond)
					results[j] = cluster.RunResult{FireID: id, JobID: int64(j + 1), Status: cluster.StatusSuccess,
						Node: "n1", ScheduledAt: sec, StartedAt: &started, FinishedAt: &fin, Output: "1764000000123456789\n", Attempt: 1}
				}
				_, err := s.InsertRuns(ctx, runs)
				require.NoError(b, err)
				_, err = s.ApplyResultsFinished(ctx, results)
				require.NoError(b, err)
			}
			// The process's CPU (user + system) per batch: the wall time
			// is mostly the two commits' fsyncs.
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
