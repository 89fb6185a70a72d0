package report

import (
	"cmp"
	"math/bits"
	"slices"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// hist is a sparse histogram of millisecond values: exact below 128 ms,
// then 64 sub-buckets per power of two (a bucket is reported by its lower
// bound, at most 1/64 ≈ 1.6% below the true value). Its size does not
// depend on how many values it holds: the buckets it has, sorted, 8 bytes
// each (the report keeps two per job and open day). Values spread over
// 0–1 s fill at most 317 buckets (exact milliseconds up to 1 s would fill
// 1,000, a share of the leader's heap growth through the day at 500 shell
// runs a second).
type hist struct {
	n    int64
	bins []bin
}

// bin is one bucket of a hist and its count.
type bin struct {
	b     uint32
	count uint32
}

const (
	subBits = 6            // 64 sub-buckets per power of two
	small   = 1 << subBits // values below this are their own bucket
	// exactBelow: below it every bucket is one value wide (the first
	// power of two, [64, 128), has 64 sub-buckets of 1 ms).
	exactBelow = 2 * small
)

// bucket maps a value (ms, >= 0) to its bucket index; for v < exactBelow
// the index is v.
func bucket(v int64) int64 {
	if v < small {
		return v
	}
	e := int64(63 - bits.LeadingZeros64(uint64(v))) // 2^e <= v < 2^(e+1), e >= subBits
	sub := (v >> (e - subBits)) & (small - 1)
	return small + (e-subBits)<<subBits + sub
}

// lower is the smallest value of bucket b.
func lower(b int64) int64 {
	if b < small {
		return b
	}
	b -= small
	e := b>>subBits + subBits
	sub := b & (small - 1)
	return (small | sub) << (e - subBits)
}

// Reported is what the report gives for a lateness or duration of v ms
// (its quantiles are values so reported): v itself below 128 ms, else the
// lower bound of v's bucket, at most 1/64 below v. It is monotone, so a
// quantile of reported values is the reported value of the quantile.
func Reported(v int64) int64 { return lower(bucket(max(v, 0))) }

func (h *hist) add(v int64) {
	h.addN(bucket(max(v, 0)), 1)
	h.n++
}

// addN counts n more values in bucket b.
func (h *hist) addN(b int64, n uint32) {
	i, found := slices.BinarySearchFunc(h.bins, uint32(b), func(x bin, b uint32) int { return cmp.Compare(x.b, b) })
	if found {
		h.bins[i].count += n
		return
	}
	h.bins = slices.Insert(h.bins, i, bin{b: uint32(b), count: n})
}

// quantile is the nearest-rank p-quantile (0 < p <= 1): the value at rank
// ceil(p·n) in ascending order; 0 when empty.
func (h *hist) quantile(p float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := Rank(p, h.n)
	var seen int64
	for _, x := range h.bins {
		seen += int64(x.count)
		if seen >= rank {
			return lower(int64(x.b))
		}
	}
	return lower(int64(h.bins[len(h.bins)-1].b))
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

// jobDay accumulates one job's runs of one day. The report keeps one per
// job and open day between passes, so it is small: counts by status and
// two histograms.
type jobDay struct {
	runs     [nKinds]int32 // by kind; the day's runs of one job fit
	lateness hist
	duration hist
}

// Kinds of runs a jobDay counts (the index in jobDay.runs).
const (
	kindTotal = iota
	kindSuccess
	kindFailed
	kindTimeout
	kindKilled
	kindLost
	kindSkipped
	kindUnfinished
	nKinds
)

// kindOf is the kind a run's status counts as.
func kindOf(status string) int {
	switch status {
	case cluster.StatusSuccess:
		return kindSuccess
	case cluster.StatusFailed:
		return kindFailed
	case cluster.StatusTimeout:
		return kindTimeout
	case cluster.StatusKilled:
		return kindKilled
	case cluster.StatusLost:
		return kindLost
	case cluster.StatusSkipped:
		return kindSkipped
	}
	return kindUnfinished
}

// add counts one run.
func (a *jobDay) add(r *store.ReportRun) {
	a.runs[kindTotal]++
	a.runs[kindOf(r.Status)]++
	if r.StartedAt != nil && r.Trigger == cluster.TriggerSchedule {
		a.lateness.add(ms(r.StartedAt.Sub(r.ScheduledAt)))
	}
	if r.StartedAt != nil && r.FinishedAt != nil {
		a.duration.add(ms(r.FinishedAt.Sub(*r.StartedAt)))
	}
}

// ms is d in whole milliseconds, never negative.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 0) }

// result is the row of job (named name, in group).
func (a *jobDay) result(job int64, name, group string) store.DailyReport {
	n := func(kind int) int { return int(a.runs[kind]) }
	return store.DailyReport{JobID: job, JobName: name, Group: group,
		Total: n(kindTotal), Success: n(kindSuccess), Failed: n(kindFailed), Timeout: n(kindTimeout),
		Killed: n(kindKilled), Lost: n(kindLost), Skipped: n(kindSkipped), Unfinished: n(kindUnfinished),
		LatenessCount: a.lateness.n, LatenessP50: a.lateness.quantile(0.5), LatenessP99: a.lateness.quantile(0.99),
		DurationCount: a.duration.n, DurationP50: a.duration.quantile(0.5), DurationP99: a.duration.quantile(0.99)}
}

// plus is a new aggregate of a's and b's runs (same job); a and b are not
// changed.
func (a *jobDay) plus(b *jobDay) *jobDay {
	out := &jobDay{lateness: a.lateness.plus(&b.lateness), duration: a.duration.plus(&b.duration)}
	for i := range out.runs {
		out.runs[i] = a.runs[i] + b.runs[i]
	}
	return out
}

// plus is a new histogram of h's and o's values.
func (h *hist) plus(o *hist) hist {
	out := hist{n: h.n + o.n, bins: make([]bin, len(h.bins), len(h.bins)+len(o.bins))}
	copy(out.bins, h.bins)
	for _, x := range o.bins {
		out.addN(int64(x.b), x.count)
	}
	return out
}
