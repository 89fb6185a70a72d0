package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFireID(t *testing.T) {
	job, at, err := parseFireID("42-1700000001000")
	require.NoError(t, err)
	require.Equal(t, int64(42), job)
	require.Equal(t, time.UnixMilli(1700000001000), at)

	for _, bad := range []string{"", "42", "x-1000", "42-x", "42-1000-s2"} {
		_, _, err := parseFireID(bad)
		require.Error(t, err, bad)
	}
}

func TestExecLogIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exec.log")
	require.NoError(t, os.WriteFile(path, []byte("7-1700000001000 1700000001012000000\ngarbage\n7-1700000002000 17000"), 0o600))
	got, next, bad, err := readExecLog(path, 0)
	require.NoError(t, err)
	require.Equal(t, 1, bad)
	require.Len(t, got, 1, "the partial last line waits")
	require.Equal(t, 12*time.Millisecond, got[0].Lateness())

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("00002020000000\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, _, bad, err = readExecLog(path, next)
	require.NoError(t, err)
	require.Zero(t, bad)
	require.Len(t, got, 1)
	require.Equal(t, int64(7), got[0].Job)
	require.Equal(t, 20*time.Millisecond, got[0].Lateness())

	got, _, _, err = readExecLog(filepath.Join(t.TempDir(), "none"), 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestTallyMissedDuplicatedAndDrift(t *testing.T) {
	start := time.Unix(1700000000, 0)
	end := start.Add(60 * time.Second)
	var ss []sample
	for sec := 0; sec < 60; sec++ {
		at := start.Add(time.Duration(sec) * time.Second)
		late := 10 * time.Millisecond
		if sec >= 30 {
			late = 50 * time.Millisecond // second bucket drifts
		}
		for _, job := range []int64{1, 2} {
			if job == 2 && sec == 5 {
				continue // missed
			}
			ss = append(ss, sample{Job: job, Scheduled: at, At: at.Add(late)})
		}
	}
	ss = append(ss,
		sample{Job: 1, Scheduled: start.Add(3 * time.Second), At: start.Add(3*time.Second + 900*time.Millisecond)}, // duplicate, later
		sample{Job: 1, Scheduled: end, At: end},                    // after the window
		sample{Job: 3, Scheduled: start, At: start.Add(time.Hour)}, // not a measured job
	)
	tl := tallySamples(ss, []int64{1, 2}, start, end, 30*time.Second)
	require.Equal(t, 120, tl.Expected)
	require.Equal(t, 119, tl.Executed)
	require.Equal(t, 1, tl.Missed)
	require.Equal(t, 1, tl.Duplicated)
	require.Equal(t, 50*time.Millisecond, tl.Max, "the duplicate's lateness does not count: the first execution does")
	require.Equal(t, []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}, tl.Drift)
	require.Equal(t, 50*time.Millisecond, tl.P99)
}

func TestMatchArrivals(t *testing.T) {
	s0 := time.Unix(1700000000, 0)
	runs := []run{
		{Job: 1, Scheduled: s0, Started: s0.Add(1200 * time.Millisecond)}, // late: starts after the next second
		{Job: 1, Scheduled: s0.Add(time.Second), Started: s0.Add(1300 * time.Millisecond)},
		{Job: 1, Scheduled: s0.Add(2 * time.Second), Started: s0.Add(2005 * time.Millisecond)},
		{Job: 2, Scheduled: s0, Started: time.Time{}}, // never started
	}
	arr := []sample{
		{Job: 1, At: s0.Add(1250 * time.Millisecond)},
		{Job: 1, At: s0.Add(1310 * time.Millisecond)},
		{Job: 1, At: s0.Add(2004 * time.Millisecond)}, // started_at rounded up past the arrival: slack
		{Job: 1, At: s0.Add(2100 * time.Millisecond)}, // a second arrival for the same fire
		{Job: 2, At: s0.Add(10 * time.Millisecond)},
	}
	got, unmatched := matchArrivals(arr, runs, 2*time.Millisecond)
	require.Equal(t, 1, unmatched)
	require.Len(t, got, 4)
	require.Equal(t, 1250*time.Millisecond, got[0].Lateness())
	require.Equal(t, 310*time.Millisecond, got[1].Lateness())
	require.Equal(t, s0.Add(2*time.Second), got[2].Scheduled)
	require.Equal(t, s0.Add(2*time.Second), got[3].Scheduled)
	tl := tallySamples(got, []int64{1}, s0, s0.Add(3*time.Second), 30*time.Second)
	require.Equal(t, 0, tl.Missed)
	require.Equal(t, 1, tl.Duplicated)
}

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (cronix (x) y) S 4200 4242 4242 0 -1 4194560 100 0 0 0 150 25 7 3 20 0 12 0 100 1000 200 18446744073709551615\n"
	st, err := parseProcStat(line)
	require.NoError(t, err)
	require.Equal(t, procStat{PID: 4242, PPID: 4200, Ticks: 150 + 25 + 7 + 3}, st)

	_, err = parseProcStat("4242 (short) S 1 2")
	require.Error(t, err)
	_, err = parseProcStat("no name here")
	require.Error(t, err)
}

func TestParseVmRSS(t *testing.T) {
	rss, err := parseVmRSS("Name:\tcronix\nVmPeak:\t  900 kB\nVmRSS:\t  2048 kB\nRssFile:\t  512 kB\nThreads: 9\n")
	require.NoError(t, err)
	require.Equal(t, int64(2048<<10), rss)
	file, err := parseStatusKB("VmRSS:\t  2048 kB\nRssFile:\t  512 kB\n", "RssFile")
	require.NoError(t, err)
	require.Equal(t, int64(512<<10), file)
	_, err = parseVmRSS("Name:\tzombie\n")
	require.Error(t, err)
}

func TestDescendantsAndCPU(t *testing.T) {
	stats := []procStat{
		{PID: 1, PPID: 0, Ticks: 1000},
		{PID: 10, PPID: 1, Ticks: 200}, // root
		{PID: 11, PPID: 10, Ticks: 50}, // plugin
		{PID: 12, PPID: 11, Ticks: 5},  // its shell
		{PID: 20, PPID: 1, Ticks: 999}, // unrelated
	}
	tree := descendants(10, stats)
	require.ElementsMatch(t, []int{10, 11, 12}, []int{tree[0].PID, tree[1].PID, tree[2].PID})
	require.Len(t, tree, 3)
	require.Nil(t, descendants(99, stats))

	a, b := treeUsage{Ticks: 255}, treeUsage{Ticks: 255 + 800}
	require.InDelta(t, 80.0, cpuPercent(a, b, 100, 10*time.Second), 1e-9, "800 ticks at 100 Hz over 10 s = 0.8 core")
}

func TestReadTreeOfThisProcess(t *testing.T) {
	u, err := readTree("/proc", os.Getpid())
	require.NoError(t, err)
	require.Positive(t, u.RootRSS)
	require.GreaterOrEqual(t, u.RSS, u.RootRSS)
	require.GreaterOrEqual(t, u.Procs, 1)
	_, err = readTree("/proc", 1<<30)
	require.Error(t, err)
}

// ServiceRSS counts the process and its children, not their children
// (the commands a plugin starts).
func TestServiceRSSLeavesOutGrandchildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & wait")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var u treeUsage
	require.Eventually(t, func() bool {
		var err error
		u, err = readTree("/proc", os.Getpid())
		return err == nil && u.Procs >= 3
	}, 10*time.Second, 10*time.Millisecond, "this process, sh and sleep")
	require.Greater(t, u.ServiceRSS, u.RootRSS, "sh is counted")
	require.Greater(t, u.RSS, u.ServiceRSS, "sleep is not")
}

func TestSlopeAndSparkline(t *testing.T) {
	ts := []time.Duration{0, 30 * time.Minute, time.Hour}
	require.InDelta(t, 10.0, slopePerHour(ts, []float64{100, 105, 110}), 1e-9)
	require.InDelta(t, 0.0, slopePerHour(ts, []float64{100, 100, 100}), 1e-9)
	require.Equal(t, "▁▄█", sparkline([]float64{1, 1.5, 2}))
	require.Equal(t, "▁▁", sparkline([]float64{3, 3}))
}

// TestArrivalsNamingTheirFireAreExact: arrivals carrying the fire id are
// attributed to that fire even when no run's started_at is known (results
// still queued on the node), so a late arrival is late, not a duplicate of
// an earlier fire plus a missed one.
func TestArrivalsNamingTheirFireAreExact(t *testing.T) {
	s0 := time.Unix(1700000000, 0)
	arr := []sample{
		{Job: 1, Scheduled: s0, At: s0.Add(1200 * time.Millisecond)}, // late past the next second
		{Job: 1, Scheduled: s0.Add(time.Second), At: s0.Add(1300 * time.Millisecond)},
		{Job: 1, Scheduled: s0.Add(time.Second), At: s0.Add(1400 * time.Millisecond)}, // delivered twice
	}
	got, unmatched := matchArrivals(arr, nil, 2*time.Millisecond)
	require.Zero(t, unmatched)
	require.Equal(t, arr, got)
	tl := tallySamples(got, []int64{1}, s0, s0.Add(2*time.Second), 30*time.Second)
	require.Equal(t, 0, tl.Missed)
	require.Equal(t, 1, tl.Duplicated)
	require.Equal(t, 1200*time.Millisecond, tl.Max)
}

// TestReceiverReadsTheFireIDHeader: both receivers take the scheduled
// second from X-Cronix-Fire-Id, leave it unset without the header, and
// count requests outside /j/ apart.
func TestReceiverReadsTheFireIDHeader(t *testing.T) {
	for _, kind := range []string{receiverLean, receiverNetHTTP} {
		t.Run(kind, func(t *testing.T) {
			rec, err := startReceiver(config{receiver: kind, receiverAnswerQuiet: 2 * time.Millisecond,
				receiverAnswerHold: 50 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(rec.Close)
			for _, c := range []struct{ path, id string }{{"/j/0", "42-1700000001000"}, {"/j/0", ""}, {"/bg/", ""}} {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL(c.path), nil)
				require.NoError(t, err)
				if c.id != "" {
					req.Header.Set(fireIDHeader, c.id)
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, http.StatusNoContent, resp.StatusCode)
			}
			got := rec.snapshot([]int64{42})
			require.Len(t, got, 2)
			require.Equal(t, int64(42), got[0].Job)
			require.True(t, got[0].Scheduled.Equal(time.UnixMilli(1700000001000)), got[0].Scheduled)
			require.True(t, got[1].Scheduled.IsZero())
			require.Equal(t, 1, rec.bgCount())
		})
	}
	_, err := startReceiver(config{receiver: "nginx"})
	require.ErrorContains(t, err, "want lean or net/http")
	_, err = startReceiver(config{receiver: receiverNetHTTP, receiverNice: -10})
	require.ErrorContains(t, err, "a nice value is for the lean receiver only")
}

func TestDescribeShares(t *testing.T) {
	got := describeShares(map[string]int{"aaaaaaaaaaaa": 90, "bbbbbbbb": 100, "cc": 110}, 300)
	require.Contains(t, got, "aaaaaaaa 90, bbbbbbbb 100, cc 110")
	require.Contains(t, got, "-10.0%")
	require.Equal(t, "runs per node: none recorded", describeShares(nil, 0))
	require.Contains(t, describeShares(map[string]int{"a": 50, "b": 50}, 100), "+0.0%")
}

// TestDescribeSecondShares: the worst second's deviation, against the
// window's nodes (a node with no fire in a second is -100%).
func TestDescribeSecondShares(t *testing.T) {
	nodes := map[string]int{"a": 3, "b": 3, "c": 3}
	even := map[int64]map[string]int{1700000000: {"a": 1, "b": 1, "c": 1}, 1700000001: {"a": 1, "b": 1, "c": 1}}
	require.Contains(t, describeSecondShares(even, nodes), "+0.0% (at 22:13:20, of 2 seconds)")
	lockstep := map[int64]map[string]int{1700000000: {"a": 3}, 1700000001: {"b": 3}, 1700000002: {"c": 3}}
	require.Contains(t, describeSecondShares(lockstep, nodes), "+200.0% (at 22:13:20, of 3 seconds)")
	require.Equal(t, "per second: none recorded", describeSecondShares(nil, nodes))
}

// TestSocketTally: the lateness at the socket uses each sample's receive
// timestamp, and the handler's time where a sample has none; without any
// timestamp there is no tally.
func TestSocketTally(t *testing.T) {
	s0 := time.Unix(1700000000, 0)
	ss := []sample{
		{Job: 1, Scheduled: s0, At: s0.Add(30 * time.Millisecond), Socket: s0.Add(10 * time.Millisecond)},
		{Job: 2, Scheduled: s0, At: s0.Add(40 * time.Millisecond)},
	}
	require.Nil(t, socketTally(ss[1:], []int64{2}, s0, s0.Add(time.Second), 30*time.Second))
	sock := socketTally(ss, []int64{1, 2}, s0, s0.Add(time.Second), 30*time.Second)
	require.NotNil(t, sock)
	require.Equal(t, 40*time.Millisecond, sock.Max)
	require.Equal(t, 0, sock.Missed)
	all := tallySamples(ss, []int64{1, 2}, s0, s0.Add(time.Second), 30*time.Second)
	require.Equal(t, 40*time.Millisecond, all.Max)
	lo := socketTally(ss[:1], []int64{1}, s0, s0.Add(time.Second), 30*time.Second)
	require.Equal(t, 10*time.Millisecond, lo.Max, "the socket's time, not the handler's")
	require.Equal(t, s0.Add(30*time.Millisecond), ss[0].At, "the samples are not changed")
}

// TestMetricValue reads an unlabelled sample out of a Prometheus text
// exposition, and not a longer name sharing its prefix.
func TestMetricValue(t *testing.T) {
	text := "# HELP go_memstats_next_gc_bytes_total x\ngo_memstats_next_gc_bytes_total 1\n" +
		"# TYPE go_memstats_next_gc_bytes gauge\ngo_memstats_next_gc_bytes 1.2345678e+08\n"
	v, err := metricValue(text, "go_memstats_next_gc_bytes")
	require.NoError(t, err)
	require.Equal(t, int64(123456780), v)
	_, err = metricValue(text, "go_memstats_heap_inuse_bytes")
	require.Error(t, err, "a missing metric")
}

func TestHighestHolding(t *testing.T) {
	runs := map[int]tally{
		1000: {P99: 40 * time.Millisecond},
		2000: {P99: 90 * time.Millisecond},
		2500: {P99: 95 * time.Millisecond, Missed: 1}, // a miss disqualifies
		3000: {P99: 140 * time.Millisecond},
	}
	rates := []int{1000, 2000, 2500, 3000}
	require.Equal(t, 2000, highestHolding(rates, runs, 100*time.Millisecond))
	require.Zero(t, highestHolding([]int{3000}, map[int]tally{3000: {P99: time.Second}}, 100*time.Millisecond))
	socket := map[int]tally{1000: {}, 2000: {}, 2500: {}, 3000: {P99: 50 * time.Millisecond}}
	require.Equal(t, "highest of the http rates measured (1000, 2000, 2500, 3000/s) holding 0 missed, 0 duplicated and p99 ≤ 100.0 ms: 2000/s at the handler, 3000/s at the socket",
		highestLine(rates, runs, socket))
	require.Equal(t, "highest of the http rates measured (3000/s) holding 0 missed, 0 duplicated and p99 ≤ 100.0 ms: none at the handler",
		highestLine([]int{3000}, map[int]tally{3000: {P99: time.Second}}, nil))
}

// TestPerSecondSpread: the tally keeps the best, median and worst of the
// per-second p99s of the first executions (a duplicate's later start does
// not count), and the note and samples file report them.
func TestPerSecondSpread(t *testing.T) {
	s0 := time.Unix(1700000000, 0)
	var ss []sample
	for sec, late := range []time.Duration{5, 50, 20} { // ms, one per second
		at := s0.Add(time.Duration(sec) * time.Second)
		ss = append(ss, sample{Job: 1, Scheduled: at, At: at.Add(late * time.Millisecond), Socket: at.Add(time.Millisecond)})
	}
	ss = append(ss, sample{Job: 1, Scheduled: s0, At: s0.Add(900 * time.Millisecond)}) // a duplicate
	tl := tallySamples(ss, []int64{1}, s0, s0.Add(3*time.Second), 30*time.Second)
	require.Equal(t, 1, tl.Duplicated)
	require.Equal(t, secondSpread{Best: 5 * time.Millisecond, Median: 20 * time.Millisecond, Worst: 50 * time.Millisecond}, tl.PerSecond)
	require.Equal(t, secondSpread{}, perSecond(nil))

	dir := t.TempDir()
	r := row{tally: tl, Socket: socketTally(ss, []int64{1}, s0, s0.Add(3*time.Second), 30*time.Second)}
	require.NoError(t, r.noteSeconds(config{samplesDir: dir}, "http-3", ss[:2]))
	require.Equal(t, []string{"p99 of each second, best / median / worst: 5.0 ms / 20.0 ms / 50.0 ms; at the socket 1.0 ms / 1.0 ms / 1.0 ms"}, r.Notes)
	b, err := os.ReadFile(filepath.Join(dir, "http-3.txt"))
	require.NoError(t, err)
	require.Equal(t, "# scheduled_unix job handler_us socket_us\n1700000000 1 5000 1000\n1700000001 1 50000 1000\n", string(b))
}

func TestShellRatioNamesAFloorThatFallsBehind(t *testing.T) {
	t.Parallel()
	cronix := tally{P50: 400 * time.Millisecond, P99: 800 * time.Millisecond}
	require.Equal(t, "shell 500/s ÷ fork floor: p50 1.14, p99 1.14 (acceptance: each ≤ 1.15)",
		shellRatio(500, cronix, tally{P50: 350 * time.Millisecond, P99: 700 * time.Millisecond}))
	behind := shellRatio(250, cronix, tally{P50: 32 * time.Second, P99: 55 * time.Second})
	require.Contains(t, behind, "the fork floor itself falls behind (p50 32000.0 ms)")
	require.NotContains(t, behind, "÷")
}

// TestStealOfAWindow: the machine's steal is read from /proc/stat's cpu
// line and a window reports its share of the CPU time and the worst
// sampled second's; a /proc/stat without it reports none.
func TestStealOfAWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(line string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(line+"\ncpu0 1 2 3\nintr 5\n"), 0o600))
	}
	write("cpu  100 0 50 800 10 0 5 35 7 0")
	c, err := readCPUTicks(dir)
	require.NoError(t, err)
	require.Equal(t, cpuTicks{Steal: 35, All: 1000}, c, "guest times are inside user and not counted twice")
	write("cpu  100 0 50 800")
	_, err = readCPUTicks(dir)
	require.ErrorContains(t, err, "no cpu line with a steal field")

	t0 := time.Unix(1000, 0)
	at := func(s int, steal, all int64) usageSample {
		return usageSample{At: t0.Add(time.Duration(s) * time.Second), CPU: cpuTicks{Steal: 5 + steal, All: 1000 + all}}
	}
	// 200 ticks a second; 10, 80 and 0 of them stolen in the window's three
	// seconds, 150 in the second after it (not counted).
	ss := []usageSample{at(0, 0, 0), at(1, 10, 200), at(2, 90, 400), at(3, 90, 600), at(4, 240, 800)}
	r := windowResources(ss, t0, t0.Add(3*time.Second), 100)
	require.True(t, r.stealRead)
	require.InDelta(t, 90.0/600, r.Steal, 1e-9)
	require.InDelta(t, 80.0/200, r.WorstSteal, 1e-9)
	require.Contains(t, r.stealNote(), "steal over the window 15.0% of the machine's CPU time, worst sampled second 40.0%")

	ss = []usageSample{{At: t0}, {At: t0.Add(time.Second)}}
	require.Empty(t, windowResources(ss, t0, t0.Add(time.Second), 100).stealNote(), "no /proc/stat: no note")
}

func TestWindowMeans(t *testing.T) {
	t.Parallel()
	var ts []time.Duration
	var vs []float64
	// Every 10 s from 5m to 30m: 100 MiB for the first 5 minutes, then 110,
	// and one sample at 30m0s that starts a window of its own (left out).
	for s := 300; s <= 1800; s += 10 {
		ts = append(ts, time.Duration(s)*time.Second)
		v := 110.0
		if s < 600 {
			v = 100
		}
		vs = append(vs, v)
	}
	require.Equal(t, []float64{100, 110, 110, 110, 110}, windowMeans(ts, vs, 5*time.Minute))
	require.Equal(t, "100 · 110 · 110 · 110 · 110", joinMiB(windowMeans(ts, vs, 5*time.Minute)))
	require.Empty(t, windowMeans(ts[:2], []float64{100, 110}, time.Minute), "10 s of a 1-min window is less than half of it")
	require.Equal(t, []float64{105}, windowMeans(ts[:2], []float64{100, 110}, 20*time.Second))
	require.Nil(t, windowMeans(ts, vs[:1], time.Minute), "lengths differ")
}

func TestSoakConditions(t *testing.T) {
	t.Parallel()
	quiet := []float64{0, 0.004, 0.01}
	onTime := []time.Duration{230 * time.Millisecond, 280 * time.Millisecond}
	got := soakConditions(quiet, onTime, 30*time.Second)
	require.Contains(t, got, ": met.**")
	require.Contains(t, got, "at most 1.0% of the machine's CPU time")
	require.NotContains(t, got, "not an acceptance figure")

	// Stop 57's soak 3: the host took up to 57 % of a period and three
	// buckets had medians of seconds.
	got = soakConditions([]float64{0.01, 0.57, 0.2}, append(onTime, 4738*time.Millisecond, 12213*time.Millisecond, 4730*time.Millisecond), 30*time.Second)
	require.Contains(t, got, "not met; not an acceptance figure.** The host took more than 5% of the machine's CPU time in 2 of the 3 sampling periods after warm-up (at most 57.0%)")
	require.Contains(t, got, "the scheduler fell behind: 3 of 5 30s buckets had a median lateness over 1s (at most 12213.0 ms)")

	// A quiet host that cannot keep up (forks too slow for the rate).
	got = soakConditions(quiet, []time.Duration{2 * time.Second}, 30*time.Second)
	require.Contains(t, got, "not met; not an acceptance figure.** The scheduler fell behind: 1 of 1")
	require.Contains(t, soakConditions(nil, onTime, 30*time.Second), "steal could not be read")
}

// TestSoakPrecheck: a fork floor that keeps up lets the soak run, 0 skips
// the check, and a floor that has not started its commands within its limit
// refuses the soak (here a limit shorter than the floor's warm-up).
func TestSoakPrecheck(t *testing.T) {
	cfg := config{warmup: time.Second, bucket: 30 * time.Second, floorWorkers: 2, soakRate: 5, soakPrecheck: 1}
	require.NoError(t, soakPrecheck(t.Context(), cfg), "5 commands a second keep up anywhere")
	// With a 2-s warm-up the floor's ticks are a second apart, so its second
	// one is always past the 100-ms limit.
	cfg.warmup = 2 * time.Second
	err := precheckFloor(t.Context(), cfg, 100*time.Millisecond)
	require.ErrorContains(t, err, "soak refused: the fork floor at 5 commands/s for 1 s had not started all its commands within 100ms")
	// A floor that ran would return the cancelled context's error.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, soakPrecheck(cancelled, cfg), context.Canceled)
	cfg.soakPrecheck = 0
	require.NoError(t, soakPrecheck(cancelled, cfg), "0 skips the check")
}
