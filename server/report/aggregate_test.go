package report

import (
	"cmp"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistogramQuantiles: exact nearest-rank quantiles below 128 ms, at
// most 1/64 low above, for values up to days.
func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	for v := int64(0); v < 1<<22; v = v*9/8 + 1 {
		b := bucket(v)
		lo := lower(b)
		require.LessOrEqual(t, lo, v, "bucket of %d starts above it", v)
		require.Equal(t, b, bucket(lo), "lower bound of bucket %d is in another bucket", b)
		require.Equal(t, lo, Reported(v))
		if v < exactBelow {
			require.Equal(t, v, lo)
		} else {
			require.LessOrEqual(t, float64(v-lo)/float64(v), 1.0/64, "bucket of %d is too wide", v)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []int64{exactBelow, 1000, 100_000, 86_400_000} {
		var h, odd, even hist
		vals := make([]int64, 2001)
		for i := range vals {
			vals[i] = rng.Int64N(scale)
			h.add(vals[i])
			[]*hist{&even, &odd}[i%2].add(vals[i])
		}
		require.True(t, slices.IsSortedFunc(h.bins, func(a, b bin) int { return cmp.Compare(a.b, b.b) }))
		before := slices.Clone(even.bins)
		require.Equal(t, h, even.plus(&odd), "scale %d: the sum of two halves is the whole", scale)
		require.Equal(t, before, even.bins, "plus leaves its operands as they are")
		sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
		for _, p := range []float64{0.5, 0.99} {
			want := vals[Rank(p, int64(len(vals)))-1]
			got := h.quantile(p)
			require.LessOrEqual(t, got, want, "scale %d p%v", scale, p)
			require.Equal(t, Reported(want), got, "scale %d p%v: the quantile is the reported value", scale, p)
			if scale <= exactBelow {
				require.Equal(t, want, got)
			} else {
				require.GreaterOrEqual(t, float64(got), float64(want)*(1-1.0/64), "scale %d p%v", scale, p)
			}
		}
	}
	var empty hist
	require.Zero(t, empty.quantile(0.99))
	require.Equal(t, int64(1), Rank(0.5, 1))
	require.Equal(t, int64(99), Rank(0.99, 100))
	require.Equal(t, int64(100), Rank(0.99, 101))
}

// TestHistogramSize: every value of the first second fills at most 317
// buckets (exact milliseconds would be 1,000), and a bucket's width never
// exceeds 1/64 of its lower bound.
func TestHistogramSize(t *testing.T) {
	t.Parallel()
	var h hist
	for v := range int64(1000) {
		h.add(v)
	}
	require.Len(t, h.bins, 317)
	require.Equal(t, int64(1000), h.n)
	for i, x := range h.bins[1:] {
		lo, next := lower(int64(h.bins[i].b)), lower(int64(x.b))
		require.Equal(t, int64(h.bins[i].b)+1, int64(x.b), "buckets are consecutive")
		require.LessOrEqual(t, next-lo, max(1, lo/64), "bucket at %d is too wide", lo)
	}
}

// BenchmarkOpenDayMemory reports the heap an open day keeps per job for an
// every-second job through half an hour (1,800 runs) whose lateness spreads
// over 250–850 ms and duration over 2–20 ms, as 500 shell jobs a second do
// on a 2-core machine: the growth the soak measures.
func BenchmarkOpenDayMemory(b *testing.B) {
	const jobs, runs = 500, 1800
	rng := rand.New(rand.NewPCG(3, 4))
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		days := make([]jobDay, jobs)
		for range runs {
			for j := range days {
				days[j].lateness.add(250 + rng.Int64N(600))
				days[j].duration.add(2 + rng.Int64N(18))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/jobs, "B/job")
		runtime.KeepAlive(days)
	}
}
