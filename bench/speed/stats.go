package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
)

// parseFireID splits a scheduled fire id "<job>-<unix ms>" (cluster.FireID)
// into the job id and the scheduled instant; shard and manual ids are refused.
func parseFireID(id string) (job int64, at time.Time, err error) {
	j, ms, ok := strings.Cut(strings.TrimSpace(id), "-")
	if !ok {
		return 0, time.Time{}, fmt.Errorf("fire id %q: want <job>-<unix ms>", id)
	}
	if job, err = strconv.ParseInt(j, 10, 64); err != nil {
		return 0, time.Time{}, fmt.Errorf("fire id %q: job: %w", id, err)
	}
	m, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("fire id %q: scheduled ms: %w", id, err)
	}
	return job, time.UnixMilli(m), nil
}

// sample is one execution seen by the bench: which fire (job, scheduled
// second) and when it started (the command's own clock, or the request's
// arrival at the receiver).
type sample struct {
	Job       int64
	Scheduled time.Time
	At        time.Time
	// Socket (http) is when the request reached the receiver's socket (the
	// kernel's receive timestamp); zero where there is none.
	Socket time.Time
}

// atSocket is samples with At moved to Socket where there is one: the
// lateness of the requests at the receiver's socket, before the receiver's
// own wait for a CPU to read and parse them.
func atSocket(samples []sample) []sample {
	out := make([]sample, len(samples))
	for i, s := range samples {
		if !s.Socket.IsZero() {
			s.At = s.Socket
		}
		out[i] = s
	}
	return out
}

// Lateness is how long after its scheduled instant the execution started.
func (s sample) Lateness() time.Duration { return s.At.Sub(s.Scheduled) }

// parseExecLine reads one line "<fire id> <unix ns>" written by the shell
// workload's command.
func parseExecLine(line string) (sample, error) {
	id, ns, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return sample{}, fmt.Errorf("exec line %q: want <fire id> <unix ns>", line)
	}
	job, at, err := parseFireID(id)
	if err != nil {
		return sample{}, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(ns), 10, 64)
	if err != nil {
		return sample{}, fmt.Errorf("exec line %q: timestamp: %w", line, err)
	}
	return sample{Job: job, Scheduled: at, At: time.Unix(0, n)}, nil
}

// readExecLog parses the exec log from offset, returning the samples, the
// offset after the last complete line and the lines it could not parse.
func readExecLog(path string, offset int64) (out []sample, next int64, bad int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, offset, 0, nil
	}
	if err != nil {
		return nil, offset, 0, fmt.Errorf("exec log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, 0, fmt.Errorf("exec log: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<16)
	next = offset
	for {
		line, rerr := r.ReadString('\n')
		if rerr != nil { // a partial last line is read again next time
			if errors.Is(rerr, io.EOF) {
				return out, next, bad, nil
			}
			return out, next, bad, fmt.Errorf("exec log: %w", rerr)
		}
		next += int64(len(line))
		s, perr := parseExecLine(line)
		if perr != nil {
			bad++
			continue
		}
		out = append(out, s)
	}
}

// tally is what a workload measured over its window.
type tally struct {
	Expected, Executed, Missed, Duplicated int
	P50, P99, Max                          time.Duration
	// Drift is the p99 lateness per 30-s bucket of the window, DriftP50
	// the p50.
	Drift, DriftP50 []time.Duration
	// PerSecond is the spread of the p99 lateness of each scheduled second
	// of the window: the best, median and worst second (zero when no
	// second had a sample). A bound the best second misses is not one a
	// few slow seconds (a GC, a checkpoint) make the window miss.
	PerSecond secondSpread
}

// secondSpread is the best, median and worst of the per-second p99s.
type secondSpread struct{ Best, Median, Worst time.Duration }

// perSecond returns the spread of the per-second p99 lateness of the
// first executions, by scheduled second.
func perSecond(first []sample) secondSpread {
	by := map[int64][]time.Duration{}
	for _, s := range first {
		by[s.Scheduled.Unix()] = append(by[s.Scheduled.Unix()], s.Lateness())
	}
	if len(by) == 0 {
		return secondSpread{}
	}
	p99s := make([]time.Duration, 0, len(by))
	for _, ds := range by {
		_, p99, _ := benchreport.Percentiles(ds)
		p99s = append(p99s, p99)
	}
	sort.Slice(p99s, func(i, j int) bool { return p99s[i] < p99s[j] })
	return secondSpread{Best: p99s[0], Median: p99s[len(p99s)/2], Worst: p99s[len(p99s)-1]}
}

// writeSamples writes the samples of one row to path, one line each:
// scheduled unix second, job, lateness at the handler and at the socket in
// µs (-1 where the kernel gave no receive time), for analysis by second.
func writeSamples(path string, samples []sample) error {
	var b strings.Builder
	b.WriteString("# scheduled_unix job handler_us socket_us\n")
	for _, s := range samples {
		sock := int64(-1)
		if !s.Socket.IsZero() {
			sock = s.Socket.Sub(s.Scheduled).Microseconds()
		}
		fmt.Fprintf(&b, "%d %d %d %d\n", s.Scheduled.Unix(), s.Job, s.Lateness().Microseconds(), sock)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	return nil
}

// tallySamples keeps the samples of the given jobs scheduled in [start,
// end) on whole seconds and computes lateness (first execution of each
// fire), missed and duplicated fires and the per-bucket p99.
func tallySamples(samples []sample, jobs []int64, start, end time.Time, bucket time.Duration) tally {
	want := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	type key struct {
		job int64
		sec int64
	}
	first := map[key]sample{}
	var t tally
	secs := int(end.Sub(start) / time.Second)
	t.Expected = len(jobs) * secs
	for _, s := range samples {
		if !want[s.Job] || s.Scheduled.Before(start) || !s.Scheduled.Before(end) {
			continue
		}
		k := key{s.Job, s.Scheduled.Unix()}
		if f, ok := first[k]; ok {
			t.Duplicated++
			if s.At.Before(f.At) {
				first[k] = s
			}
			continue
		}
		first[k] = s
	}
	t.Executed = len(first)
	t.Missed = t.Expected - t.Executed
	all := make([]time.Duration, 0, len(first))
	firsts := make([]sample, 0, len(first))
	nb := max(1, int((end.Sub(start)+bucket-1)/bucket))
	per := make([][]time.Duration, nb)
	for _, s := range first {
		l := s.Lateness()
		all = append(all, l)
		firsts = append(firsts, s)
		b := min(nb-1, int(s.Scheduled.Sub(start)/bucket))
		per[b] = append(per[b], l)
	}
	t.P50, t.P99, t.Max = benchreport.Percentiles(all)
	t.PerSecond = perSecond(firsts)
	for _, ds := range per {
		p50, p99, _ := benchreport.Percentiles(ds)
		t.Drift = append(t.Drift, p99)
		t.DriftP50 = append(t.DriftP50, p50)
	}
	return t
}

// run is the part of a Cronix run the http matching needs.
type run struct {
	Job       int64
	Scheduled time.Time
	Started   time.Time
}

// matchArrivals turns the receiver's arrivals into samples. An arrival
// that named its fire (X-Cronix-Fire-Id: Scheduled already set) is exact
// and kept as it is. One that did not (a handler without the header) is
// attributed to the job's run that started last at or before it (the node
// records started_at just before the handler sends the request; slack
// absorbs the timestamp's rounding); this guess needs every run's
// started_at in runs, and an arrival with no such run is returned as
// unmatched.
func matchArrivals(arrivals []sample, runs []run, slack time.Duration) (out []sample, unmatched int) {
	byJob := map[int64][]run{}
	for _, r := range runs {
		if !r.Started.IsZero() {
			byJob[r.Job] = append(byJob[r.Job], r)
		}
	}
	for _, rs := range byJob {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Started.Before(rs[j].Started) })
	}
	for _, a := range arrivals {
		if !a.Scheduled.IsZero() {
			out = append(out, a)
			continue
		}
		rs := byJob[a.Job]
		i := sort.Search(len(rs), func(i int) bool { return rs[i].Started.After(a.At.Add(slack)) }) - 1
		if i < 0 {
			unmatched++
			continue
		}
		out = append(out, sample{Job: a.Job, Scheduled: rs[i].Scheduled, At: a.At, Socket: a.Socket})
	}
	return out, unmatched
}

// procStat is what the bench reads from /proc/<pid>/stat.
type procStat struct {
	PID, PPID int
	// Ticks is utime+stime+cutime+cstime: CPU of the process and of its
	// children it has reaped (clock ticks).
	Ticks int64
}

// parseProcStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may contain spaces and parentheses, so
// the fields are counted from the last ')'.
func parseProcStat(b string) (procStat, error) {
	open, end := strings.IndexByte(b, '('), strings.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("proc stat %q: no command name", b)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(b[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("proc stat: pid: %w", err)
	}
	f := strings.Fields(b[end+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("proc stat of %d: %d fields after the name, want 15+", pid, len(f))
	}
	st := procStat{PID: pid}
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("proc stat of %d: ppid: %w", pid, err)
	}
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime: fields 14-17
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat of %d: field %d: %w", pid, i+3, err)
		}
		st.Ticks += v
	}
	return st, nil
}

// parseVmRSS returns VmRSS in bytes from the content of /proc/<pid>/status.
func parseVmRSS(b string) (int64, error) { return parseStatusKB(b, "VmRSS") }

// parseStatusKB returns the "<field>: <n> kB" line of /proc/<pid>/status
// in bytes.
func parseStatusKB(b, field string) (int64, error) {
	for _, line := range strings.Split(b, "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s line", field)
}

// descendants returns root and every process below it in stats.
func descendants(root int, stats []procStat) []procStat {
	children := map[int][]procStat{}
	var self *procStat
	for i, s := range stats {
		children[s.PPID] = append(children[s.PPID], s)
		if s.PID == root {
			self = &stats[i]
		}
	}
	if self == nil {
		return nil
	}
	out := []procStat{*self}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].PID]...)
	}
	return out
}

// treeUsage is the CPU ticks and RSS of a process tree at one instant.
type treeUsage struct {
	Ticks        int64 // whole tree, reaped children included
	RootTicks    int64 // root alone (its plugins live as long as it does, so none are reaped)
	RSS, RootRSS int64 // bytes: sum over the tree (shared pages counted per process), root alone
	// RootRSSFile is the part of RootRSS that maps files (RssFile: etcd's
	// bbolt database, the binary), the rest being anonymous memory (the Go
	// heap and stacks, SQLite's caches).
	RootRSSFile int64
	// ServiceRSS is root and its direct children (the plugin processes,
	// which live as long as it does), without the commands they start:
	// what a leak would grow, without the noise of short-lived commands.
	ServiceRSS int64
	Procs      int
}

// cpuTicks are the machine's CPU times from the "cpu" line of /proc/stat,
// in USER_HZ ticks summed over all CPUs: Steal is the time the hypervisor
// ran something else while a virtual CPU of this machine wanted to run,
// All every state's (steal included).
type cpuTicks struct{ Steal, All int64 }

// readCPUTicks reads the "cpu" line of procDir/stat.
func readCPUTicks(procDir string) (cpuTicks, error) {
	b, err := os.ReadFile(filepath.Join(procDir, "stat"))
	if err != nil {
		return cpuTicks{}, fmt.Errorf("reading %s/stat: %w", procDir, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, fmt.Errorf("%s/stat: no cpu line with a steal field", procDir)
	}
	var t cpuTicks
	// user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest times are already inside user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cpuTicks{}, fmt.Errorf("%s/stat: field %d: %w", procDir, i+1, err)
		}
		t.All += n
		if i == 7 {
			t.Steal = n
		}
	}
	return t, nil
}

// stealShare is the share of the machine's CPU time stolen between a and b.
func stealShare(a, b cpuTicks) float64 {
	if b.All <= a.All {
		return 0
	}
	return float64(b.Steal-a.Steal) / float64(b.All-a.All)
}

// readTree reads /proc under procDir for root and its descendants.
func readTree(procDir string, root int) (treeUsage, error) {
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return treeUsage{}, fmt.Errorf("reading %s: %w", procDir, err)
	}
	var stats []procStat
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		if st, err := parseProcStat(string(b)); err == nil {
			stats = append(stats, st)
		}
	}
	tree := descendants(root, stats)
	if len(tree) == 0 {
		return treeUsage{}, fmt.Errorf("process %d is gone", root)
	}
	u := treeUsage{Procs: len(tree)}
	for _, p := range tree {
		u.Ticks += p.Ticks
		if p.PID == root {
			u.RootTicks = p.Ticks
		}
		b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(p.PID), "status"))
		if err != nil {
			continue
		}
		rss, err := parseVmRSS(string(b))
		if err != nil {
			continue // a zombie has no VmRSS
		}
		u.RSS += rss
		if p.PID == root || p.PPID == root {
			u.ServiceRSS += rss
		}
		if p.PID == root {
			u.RootRSS = rss
			u.RootRSSFile, _ = parseStatusKB(string(b), "RssFile") // 0 on kernels without it
		}
	}
	return u, nil
}

// cpuPercent is the CPU used between two tree readings as a percentage of
// one core (a 2-core machine tops out at 200%).
func cpuPercent(a, b treeUsage, clkTck int64, window time.Duration) float64 {
	if window <= 0 || clkTck <= 0 {
		return 0
	}
	return float64(b.Ticks-a.Ticks) / float64(clkTck) / window.Seconds() * 100
}

// slopePerHour fits a least-squares line through (t, v) and returns its
// slope per hour.
func slopePerHour(ts []time.Duration, vs []float64) float64 {
	n := float64(len(ts))
	if len(ts) < 2 || len(ts) != len(vs) {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range ts {
		x := ts[i].Hours()
		sx += x
		sy += vs[i]
		sxx += x * x
		sxy += x * vs[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// sparkline draws vs as a line of block characters between their min and max.
func sparkline(vs []float64) string {
	if len(vs) == 0 {
		return ""
	}
	bars := []rune("▁▂▃▄▅▆▇█")
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	var b strings.Builder
	for _, v := range vs {
		i := 0
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(bars)-1))
		}
		b.WriteRune(bars[i])
	}
	return b.String()
}

// A soak's RSS after its warm-up is read for an upward trend (issue 12,
// line 5) only if it is the scheduler's own: the host took at most
// soakStealLimit of the machine's CPU time in every sampling period after
// the warm-up, and no bucket's median lateness passed soakBehindP50. A
// scheduler that falls behind holds its backlog's runs in flight, so its RSS
// rises with the backlog and not with a leak: stop 57's three soaks, on a
// host that took up to 57 % of a sampling period, rose that way.
const (
	soakStealLimit = 0.05
	soakBehindP50  = time.Second
	// soakMeanWindow is the width of the RSS means a soak reports.
	soakMeanWindow = 5 * time.Minute
)

// soakConditions says whether the soak's RSS after warm-up can be read as
// the scheduler's own, and if not, why: steals are the shares stolen in the
// sampling periods after the warm-up, p50s the median lateness per bucket.
func soakConditions(steals []float64, p50s []time.Duration, bucket time.Duration) string {
	const title = "**Conditions for reading the RSS trend (issue 12, line 5)"
	var stolen, behind int
	var worst float64
	for _, s := range steals {
		if s > soakStealLimit {
			stolen++
		}
		worst = max(worst, s)
	}
	var worstP50 time.Duration
	for _, p := range p50s {
		if p > soakBehindP50 {
			behind++
		}
		worstP50 = max(worstP50, p)
	}
	var why []string
	switch {
	case len(steals) == 0:
		why = append(why, "the host's steal could not be read (/proc/stat), so a quiet host is not shown")
	case stolen > 0:
		why = append(why, fmt.Sprintf("the host took more than %.0f%% of the machine's CPU time in %d of the %d sampling periods after warm-up (at most %.1f%%)",
			100*soakStealLimit, stolen, len(steals), 100*worst))
	}
	if behind > 0 {
		why = append(why, fmt.Sprintf("the scheduler fell behind: %d of %d %s buckets had a median lateness over %s (at most %s), "+
			"and the runs of a backlog are held in memory", behind, len(p50s), bucket, soakBehindP50, ms(worstP50)))
	}
	if len(why) > 0 {
		return title + ": not met; not an acceptance figure.** " + upperFirst(strings.Join(why, "; ")) + "."
	}
	return fmt.Sprintf("%s: met.** The host took at most %.1f%% of the machine's CPU time in any sampling period after warm-up "+
		"(limit %.0f%%), and no %s bucket's median lateness passed %s (at most %s): the RSS after warm-up is the scheduler's own.",
		title, 100*worst, 100*soakStealLimit, bucket, soakBehindP50, ms(worstP50))
}

// upperFirst is s with its first byte in upper case (ASCII).
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// windowMeans are the means of vs (sampled at ts, ascending) over
// consecutive windows of width from ts[0]; a last window whose samples span
// less than half of width is left out.
func windowMeans(ts []time.Duration, vs []float64, width time.Duration) []float64 {
	if len(ts) == 0 || len(ts) != len(vs) || width <= 0 {
		return nil
	}
	var out []float64
	start, sum, n := ts[0], 0.0, 0
	var last time.Duration
	for i, t := range ts {
		for t >= start+width {
			if n > 0 {
				out = append(out, sum/float64(n))
			}
			start, sum, n = start+width, 0, 0
		}
		sum, n, last = sum+vs[i], n+1, t
	}
	if n > 0 && last-start >= width/2 {
		out = append(out, sum/float64(n))
	}
	return out
}

// joinMiB writes vs in whole MiB, joined by " · ".
func joinMiB(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(out, " · ")
}
