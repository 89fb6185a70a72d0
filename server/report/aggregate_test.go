package report

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistogramQuantiles: exact nearest-rank quantiles below 1024 ms, at
// most 1/64 low above, for values up to days.
func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	for v := int64(0); v < 1<<22; v = v*9/8 + 1 {
		b := bucket(v)
		lo := lower(b)
		require.LessOrEqual(t, lo, v, "bucket of %d starts above it", v)
		require.Equal(t, b, bucket(lo), "lower bound of bucket %d is in another bucket", b)
		if v < exactBelow {
			require.Equal(t, v, lo)
		} else {
			require.LessOrEqual(t, float64(v-lo)/float64(v), 1.0/64, "bucket of %d is too wide", v)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []int64{1000, 100_000, 86_400_000} {
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
