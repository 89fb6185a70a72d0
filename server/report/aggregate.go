package report

import (
	"math/bits"
	"sort"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// hist is a sparse histogram of millisecond values: exact below 1024 ms,
// then 64 sub-buckets per power of two (a bucket is reported by its lower
// bound, at most 1/64 ≈ 1.6% below the true value). Its size does not
// depend on how many values it holds.
type hist struct {
	n       int64
	buckets map[int64]int64
}

const (
	exactBelow = 1024 // values below this are their own bucket
	subBits    = 6    // 64 sub-buckets per power of two above it
)

// bucket maps a value (ms, >= 0) to its bucket index.
func bucket(v int64) int64 {
	if v < exactBelow {
		return v
	}
	e := int64(63 - bits.LeadingZeros64(uint64(v))) // 2^e <= v < 2^(e+1), e >= 10
	sub := (v >> (e - subBits)) & (1<<subBits - 1)
	return exactBelow + (e-10)<<subBits + sub
}

// lower is the smallest value of bucket b.
func lower(b int64) int64 {
	if b < exactBelow {
		return b
	}
	b -= exactBelow
	e := b>>subBits + 10
	sub := b & (1<<subBits - 1)
	return (1<<subBits | sub) << (e - subBits)
}

func (h *hist) add(v int64) {
	if h.buckets == nil {
		h.buckets = map[int64]int64{}
	}
	h.buckets[bucket(max(v, 0))]++
	h.n++
}

// quantile is the nearest-rank p-quantile (0 < p <= 1): the value at rank
// ceil(p·n) in ascending order; 0 when empty.
func (h *hist) quantile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := Rank(p, h.n)
	keys := make([]int64, 0, len(h.buckets))
	for k := range h.buckets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var seen int64
	for _, k := range keys {
		seen += h.buckets[k]
		if seen >= rank {
			return lower(k)
		}
	}
	return lower(keys[len(keys)-1])
}

// Rank is the 1-based nearest rank of quantile p among n values: ceil(p·n),
// at least 1.
func Rank(p float64, n int64) int64 {
	r := int64(p * float64(n))
	if float64(r) < p*float64(n) {
		r++
	}
	return max(r, 1)
}

// jobDay accumulates one job's runs of one day.
type jobDay struct {
	row      store.DailyReport
	lateness hist
	duration hist
}

// add counts one run.
func (a *jobDay) add(r *store.ReportRun) {
	a.row.Total++
	switch r.Status {
	case cluster.StatusSuccess:
		a.row.Success++
	case cluster.StatusFailed:
		a.row.Failed++
	case cluster.StatusTimeout:
		a.row.Timeout++
	case cluster.StatusKilled:
		a.row.Killed++
	case cluster.StatusLost:
		a.row.Lost++
	case cluster.StatusSkipped:
		a.row.Skipped++
	default:
		a.row.Unfinished++
	}
	if r.StartedAt != nil && r.Trigger == cluster.TriggerSchedule {
		a.lateness.add(ms(r.StartedAt.Sub(r.ScheduledAt)))
	}
	if r.StartedAt != nil && r.FinishedAt != nil {
		a.duration.add(ms(r.FinishedAt.Sub(*r.StartedAt)))
	}
}

// ms is d in whole milliseconds, never negative.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 0) }

// result is the finished row.
func (a *jobDay) result() store.DailyReport {
	r := a.row
	r.LatenessCount, r.LatenessP50, r.LatenessP99 = a.lateness.n, a.lateness.quantile(0.5), a.lateness.quantile(0.99)
	r.DurationCount, r.DurationP50, r.DurationP99 = a.duration.n, a.duration.quantile(0.5), a.duration.quantile(0.99)
	return r
}

// plus is a new aggregate of a's and b's runs (same job); a and b are not
// changed.
func (a *jobDay) plus(b *jobDay) *jobDay {
	r := a.row
	r.Total += b.row.Total
	r.Success += b.row.Success
	r.Failed += b.row.Failed
	r.Timeout += b.row.Timeout
	r.Killed += b.row.Killed
	r.Lost += b.row.Lost
	r.Skipped += b.row.Skipped
	r.Unfinished += b.row.Unfinished
	return &jobDay{row: r, lateness: a.lateness.plus(&b.lateness), duration: a.duration.plus(&b.duration)}
}

// plus is a new histogram of h's and o's values.
func (h *hist) plus(o *hist) hist {
	out := hist{n: h.n + o.n, buckets: make(map[int64]int64, max(len(h.buckets), len(o.buckets)))}
	for k, v := range h.buckets {
		out.buckets[k] = v
	}
	for k, v := range o.buckets {
		out.buckets[k] += v
	}
	return out
}
