// Command speed is Cronix's speed benchmark (issue 12): it runs workloads
// through the real binary ("cronix standalone") and writes one table to
// docs/benchmarks.md between the speed markers (the soak its own section):
//
//   - http: N jobs every second calling a receiver in this process;
//     lateness = request arrival − scheduled second (the arrival names its
//     fire in the http handler's X-Cronix-Fire-Id header); arrival is when
//     the lean receiver (benchreport.LeanReceiver) had read the request, or
//     with -receiver net/http when a net/http handler started;
//   - shell: N jobs every second running `t=$(date +%s%N); echo ...`;
//     lateness from the command's own timestamp; then the fork floor: this
//     process starting the same command N times at each second with a pool
//     of parallel starters;
//   - scale: many enabled hourly/daily jobs plus every-second http jobs:
//     start → /readyz and → first fire, jobs list latency, lateness;
//   - spread: N http jobs every second on 3 node agents of one group
//     (ROUND): lateness as for http, and each node's share of the runs;
//   - soak (-soak): shell for a long time with RSS sampled every 10 s,
//     after a short fork floor at its rate that refuses it on a machine
//     that cannot start that many commands a second (-soak-precheck).
//
// CPU is the whole process tree (standalone and its plugin processes and
// their reaped children) from /proc/<pid>/stat; RSS is summed over the tree
// and given for the standalone alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
)

type config struct {
	binary, out, label, pprofAddr  string
	logLevel                       string
	receiver                       string
	receiverNice                   int
	receiverAnswerQuiet            time.Duration
	receiverAnswerHold             time.Duration
	gcLimitMiB                     int
	samplesDir                     string
	workloads                      []string
	httpRates, shellRates          []int
	seconds, floorSeconds          int
	forkFloorSeconds               int
	warmup, bucket                 time.Duration
	floorWorkers, createWorkers    int
	batchWorkers                   int
	scaleJobs, scaleAPIJobs        int
	scaleEverySecond, listRequests int
	spreadRates                    []int
	spreadNodes                    int
	spreadRoute                    string
	soak                           bool
	soakRate                       int
	soakDuration, soakSample       time.Duration
	soakWarmup                     time.Duration
	soakPrecheck                   int
	keep                           bool
	seed                           int64
	clkTck                         int64
}

func (c config) cleanup(dir string) {
	if c.keep {
		fmt.Println("  kept", dir)
		return
	}
	_ = os.RemoveAll(dir)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("rate %q: want a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func main() {
	benchreport.RunCommit() // the commit measured: read as the run starts
	var cfg config
	var workloads, httpRates, shellRates, spreadRates string
	flag.StringVar(&cfg.binary, "binary", "bin/cronix", "cronix binary to run")
	flag.StringVar(&cfg.out, "out", "docs/benchmarks.md", "Markdown file to update ('' = print only)")
	flag.StringVar(&cfg.label, "label", "", "note printed above the table (e.g. that this is a smoke run)")
	flag.StringVar(&workloads, "workloads", "http,shell,scale,spread", "comma-separated workloads: http, shell, scale, spread")
	flag.StringVar(&httpRates, "http-rates", "1000,2000,3000,4000,5000", "http jobs per second, one run per rate (with more than one, the highest holding acceptance line 2 is named)")
	flag.StringVar(&shellRates, "shell-rates", "500", "shell jobs per second, one run per rate")
	flag.StringVar(&spreadRates, "spread-rates", "1500", "spread: http jobs per second shared by --spread-nodes nodes, one run per rate")
	flag.IntVar(&cfg.spreadNodes, "spread-nodes", 3, "spread: node agents in the group (the standalone's own and N-1 'cronix node' processes)")
	flag.StringVar(&cfg.spreadRoute, "spread-route", "ROUND", "spread: route strategy of the jobs (ROUND or CONSISTENT_HASH)")
	flag.IntVar(&cfg.seconds, "seconds", 180, "measured window of each run, seconds")
	flag.DurationVar(&cfg.warmup, "warmup", 5*time.Second, "firing before the window starts")
	flag.DurationVar(&cfg.bucket, "bucket", 30*time.Second, "drift bucket: p99 lateness per bucket")
	flag.IntVar(&cfg.floorSeconds, "floor-seconds", 60, "http floor window (at most --seconds; 0 = skip the floors, the fork floor too)")
	flag.IntVar(&cfg.forkFloorSeconds, "fork-floor-seconds", 0, "fork floor window (at most --seconds; 0 = the shell row's own window, so that line 3's ratio compares p99s over windows of one length)")
	flag.IntVar(&cfg.floorWorkers, "floor-workers", runtime.GOMAXPROCS(0), "parallel starters of the fork floor")
	flag.IntVar(&cfg.createWorkers, "create-workers", 8, "parallel API clients creating jobs")
	flag.IntVar(&cfg.scaleJobs, "scale-jobs", 100_000, "scale: enabled hourly/daily jobs")
	flag.IntVar(&cfg.scaleAPIJobs, "scale-api-jobs", 10_000, "scale: how many of them are created through POST /api/v1/jobs/batch (timed; the rest are inserted into SQLite)")
	flag.IntVar(&cfg.batchWorkers, "batch-workers", 2, "scale: batch create requests in flight")
	flag.IntVar(&cfg.scaleEverySecond, "scale-every-second", 200, "scale: every-second http jobs")
	flag.IntVar(&cfg.listRequests, "list-requests", 200, "scale: jobs list requests timed")
	flag.BoolVar(&cfg.soak, "soak", false, "run only the soak: shell at --soak-rate for --soak-duration, RSS every --soak-sample")
	flag.IntVar(&cfg.soakRate, "soak-rate", 500, "soak: shell jobs per second")
	flag.DurationVar(&cfg.soakDuration, "soak-duration", 30*time.Minute, "soak: length")
	flag.DurationVar(&cfg.soakSample, "soak-sample", 10*time.Second, "soak: RSS sampling period")
	flag.DurationVar(&cfg.soakWarmup, "soak-warmup", 5*time.Minute, "soak: samples before this are left out of the RSS slope")
	flag.IntVar(&cfg.soakPrecheck, "soak-precheck", 15, "soak: seconds of a fork floor at --soak-rate first; the soak is refused when its median "+
		"lateness passes 1 s (the machine cannot start that many commands a second, and the soak would measure its backlog); 0 = skip")
	flag.IntVar(&cfg.gcLimitMiB, "gc-limit-mib", 4096, "this process collects its garbage only when its heap nears this many MiB, and once before each "+
		"row's window, so that its own collections do not stall the receiver during a window (0: Go's default collector)")
	flag.StringVar(&cfg.receiver, "receiver", receiverLean, "http receiver: lean (epoll, arrival = request read) or net/http (arrival = handler start, the receiver until stop 39)")
	flag.IntVar(&cfg.receiverNice, "receiver-nice", 0, "lean receiver: run each of its loops on an OS thread of its own at this nice value "+
		"(negative: ahead of Cronix's and the floor client's threads, which needs CAP_SYS_NICE; 0: goroutines on Go's threads)")
	flag.DurationVar(&cfg.receiverAnswerQuiet, "receiver-answer-quiet", 2*time.Millisecond, "lean receiver: answer a loop's requests once it has had "+
		"nothing to read for this long (whole milliseconds), so that its answers, and the senders' work on them, come after a second's burst "+
		"and not inside it (0: answer as soon as nothing is ready to read, the receiver until stop 53)")
	flag.DurationVar(&cfg.receiverAnswerHold, "receiver-answer-hold", 50*time.Millisecond, "lean receiver: with --receiver-answer-quiet, "+
		"answer a request at the latest this long after the loop queued its oldest unanswered one")
	flag.StringVar(&cfg.pprofAddr, "pprof-addr", "", "start the standalone with --pprof-addr (for profiling during a run)")
	flag.StringVar(&cfg.logLevel, "log-level", "warn", "the standalone's (and the spread row's node processes') CRONIX_LOG_LEVEL; with --keep their output is kept as standalone.log (node-N.log) beside the data dir")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the temporary data dirs")
	flag.StringVar(&cfg.samplesDir, "samples-dir", "", "write each http row's samples (scheduled second, job, lateness at the handler and at the socket in µs) to DIR/<row>.txt")
	flag.Int64Var(&cfg.seed, "seed", time.Now().UnixNano(), "seed of the scale schedules")
	flag.Parse()
	if spec := os.Getenv(floorClientEnv); spec != "" { // this process is the http floor's client
		if err := floorClient(spec); err != nil {
			fmt.Fprintln(os.Stderr, "speed: http floor client:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	if cfg.httpRates, err = ints(httpRates); err == nil {
		cfg.shellRates, err = ints(shellRates)
	}
	if err == nil {
		cfg.spreadRates, err = ints(spreadRates)
	}
	if err == nil && cfg.spreadNodes < 1 {
		err = fmt.Errorf("--spread-nodes must be at least 1")
	}
	if err == nil && (cfg.seconds < 1 || cfg.floorSeconds < 0 || cfg.forkFloorSeconds < 0) {
		err = fmt.Errorf("--seconds must be at least 1, --floor-seconds and --fork-floor-seconds at least 0")
	}
	if err == nil && cfg.scaleAPIJobs < 1 {
		err = fmt.Errorf("--scale-api-jobs must be at least 1 (the bulk insert copies an API-created job)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "speed:", err)
		os.Exit(2)
	}
	for _, w := range strings.Split(workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.workloads = append(cfg.workloads, w)
		}
	}
	cfg.clkTck = clockTicks()
	quietGC(cfg.gcLimitMiB)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.soak {
		err = runSoak(ctx, cfg)
	} else {
		err = runAll(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "speed:", err)
		os.Exit(1)
	}
}

func runAll(ctx context.Context, cfg config) error {
	var rows []row
	var ratios []string
	for _, w := range cfg.workloads {
		switch w {
		case "http":
			held, heldSocket := map[int]tally{}, map[int]tally{}
			for _, rate := range cfg.httpRates {
				r, err := httpWorkload(ctx, cfg, rate)
				if err != nil {
					return fmt.Errorf("http %d/s: %w", rate, err)
				}
				rows = append(rows, r)
				held[rate] = r.tally
				if r.Socket != nil {
					heldSocket[rate] = *r.Socket
				}
				if cfg.floorSeconds > 0 {
					fl, x, err := floorBeside(ctx, cfg, fmt.Sprintf("http %d/s", rate), rate, r)
					if err != nil {
						return err
					}
					rows, ratios = append(rows, fl), append(ratios, x)
				}
			}
			if len(cfg.httpRates) > 1 {
				ratios = append(ratios, highestLine(cfg.httpRates, held, heldSocket))
			}
		case "shell":
			for _, rate := range cfg.shellRates {
				r, fl, _, err := shellWorkload(ctx, cfg, rate, cfg.seconds, time.Second)
				if err != nil {
					return fmt.Errorf("shell %d/s: %w", rate, err)
				}
				rows = append(rows, r)
				if fl.Workload != "" {
					rows = append(rows, fl)
					ratios = append(ratios, shellRatio(rate, r.tally, fl.tally))
				}
			}
		case "spread":
			for _, rate := range cfg.spreadRates {
				r, err := spreadWorkload(ctx, cfg, rate)
				if err != nil {
					return fmt.Errorf("spread %d/s: %w", rate, err)
				}
				rows = append(rows, r)
				if cfg.floorSeconds > 0 {
					// The same number of simultaneous requests from one client
					// process: the lateness this machine itself gives them, to
					// read line 6's bound against.
					fl, x, err := floorBeside(ctx, cfg, fmt.Sprintf("spread %d/s", rate), rate, r)
					if err != nil {
						return err
					}
					rows, ratios = append(rows, fl), append(ratios, x)
				}
			}
		case "scale":
			r, err := scaleWorkload(ctx, cfg)
			if err != nil {
				return fmt.Errorf("scale: %w", err)
			}
			rows = append(rows, r)
		default:
			return fmt.Errorf("unknown workload %q (want http, shell, scale, spread)", w)
		}
	}
	report := renderSpeed(cfg, rows, ratios)
	fmt.Print(report)
	if cfg.out == "" {
		return nil
	}
	if err := benchreport.UpdateSection(cfg.out, "speed", report); err != nil {
		return fmt.Errorf("writing %s: %w", cfg.out, err)
	}
	return nil
}

// floorBeside measures the http floor at rate for the row r (named name)
// and returns the floor's row and the line comparing r with it.
func floorBeside(ctx context.Context, cfg config, name string, rate int, r row) (row, string, error) {
	fl, err := httpFloor(ctx, cfg, rate, min(cfg.seconds, cfg.floorSeconds))
	if err != nil {
		return row{}, "", fmt.Errorf("http floor %d/s: %w", rate, err)
	}
	return fl, httpFloorRatio(name, r, fl), nil
}

// httpFloorRatio compares row r (named name) with the http floor fl of the
// same rate, in the handler and at the socket.
func httpFloorRatio(name string, r, fl row) string {
	x := fmt.Sprintf("%s ÷ http floor: p50 %s, p99 %s", name, ratio(r.P50, fl.P50), ratio(r.P99, fl.P99))
	if r.Socket != nil && fl.Socket != nil {
		x += fmt.Sprintf("; at the socket p50 %s, p99 %s", ratio(r.Socket.P50, fl.Socket.P50), ratio(r.Socket.P99, fl.Socket.P99))
	}
	return x + " (the floor is this machine's own lateness for that many simultaneous requests)"
}

// http2Bound is acceptance line 2's lateness bound: the highest http rate
// whose p99 stays within it is reported.
const http2Bound = 100 * time.Millisecond

// highestHolding is the highest of the measured rates whose run had no
// missed and no duplicated fire and a p99 lateness within bound, or 0.
func highestHolding(rates []int, runs map[int]tally, bound time.Duration) int {
	best := 0
	for _, rate := range rates {
		t, ok := runs[rate]
		if ok && t.Missed == 0 && t.Duplicated == 0 && t.P99 <= bound && rate > best {
			best = rate
		}
	}
	return best
}

// highestLine names the highest rate holding acceptance line 2 at the
// handler and, when every run has it, at the socket.
func highestLine(rates []int, handler, socket map[int]tally) string {
	name := func(rate int) string {
		if rate == 0 {
			return "none"
		}
		return strconv.Itoa(rate) + "/s"
	}
	measured := make([]string, len(rates))
	for i, r := range rates {
		measured[i] = strconv.Itoa(r)
	}
	line := fmt.Sprintf("highest of the http rates measured (%s/s) holding 0 missed, 0 duplicated and p99 ≤ %s: %s at the handler",
		strings.Join(measured, ", "), ms(http2Bound), name(highestHolding(rates, handler, http2Bound)))
	if len(socket) == len(handler) {
		line += ", " + name(highestHolding(rates, socket, http2Bound)) + " at the socket"
	}
	return line
}

// msList writes durations in ms, joined by " · ".
func msList(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = strings.TrimSuffix(ms(d), " ms")
	}
	return strings.Join(out, " · ")
}

// shellRatio is the line comparing the shell row at rate with its fork
// floor, or saying that the floor itself fell behind: with half its
// commands starting over a second late, the starters were never idle and
// this machine cannot start rate such commands a second, so a ratio to it
// says nothing about Cronix.
func shellRatio(rate int, cronix, floor tally) string {
	if floor.P50 > time.Second {
		return fmt.Sprintf("shell %d/s: the fork floor itself falls behind (p50 %s): this machine cannot start %d such "+
			"commands a second without a scheduler, so there is no ratio to judge (acceptance: each ≤ 1.15)",
			rate, ms(floor.P50), rate)
	}
	return fmt.Sprintf("shell %d/s ÷ fork floor: p50 %s, p99 %s (acceptance: each ≤ 1.15)",
		rate, ratio(cronix.P50, floor.P50), ratio(cronix.P99, floor.P99))
}

// quietGC turns the collector's pacing off and lets it run only when the
// heap nears limitMiB (window collects before each row): this process's
// receiver shares 2 cores with Cronix, and a collection's mark phase,
// paced by a heap that grows with the samples, took one of them and
// charged the receiver's allocations with assists, for 50-125 ms at a
// time, holding that second's requests in the socket. limitMiB 0
// keeps Go's default.
func quietGC(limitMiB int) {
	if limitMiB <= 0 {
		return
	}
	debug.SetMemoryLimit(int64(limitMiB) << 20)
	debug.SetGCPercent(-1)
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64)
}

func header(b *strings.Builder, cfg config, title string) {
	fmt.Fprintf(b, "### %s\n\n", title)
	if cfg.label != "" {
		fmt.Fprintf(b, "> **%s**\n\n", cfg.label)
	}
	fmt.Fprintf(b, "Measured %s on %s, commit `%s`, `%s`.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		benchreport.Machine(), benchreport.RunCommit(), "go run ./bench/speed "+shellArgs(os.Args[1:]))
}

// arrivalMeaning says what a request's arrival is with cfg's receiver
// (--receiver, --receiver-nice, --receiver-answer-quiet and -hold).
func arrivalMeaning(cfg config) string {
	kind, nice := cfg.receiver, cfg.receiverNice
	if kind == receiverNetHTTP {
		return "when the receiver's handler starts (a `net/http` server, `--receiver net/http`)"
	}
	loops := ""
	if nice != 0 {
		loops = fmt.Sprintf(", each on an OS thread of its own at nice %d (`--receiver-nice`)", nice)
	}
	answers := "answering as soon as nothing is ready to read (`--receiver-answer-quiet 0`)"
	if cfg.receiverAnswerQuiet > 0 {
		answers = fmt.Sprintf("answering a loop's requests once it has had nothing to read for %s, or %s after the oldest "+
			"(`--receiver-answer-quiet`, `--receiver-answer-hold`; until stop 53 it answered as soon as nothing was ready, and its "+
			"answers' loopback sends, and the senders' work on the answers, took both cores' time inside a second's burst)",
			cfg.receiverAnswerQuiet, cfg.receiverAnswerHold)
	}
	return "when the receiver had read the whole request (the bench's lean receiver: epoll loops, one per core" + loops + ", that read and " +
		"stamp every request ready before answering any, " + answers + "; until stop 39 the bench used a `net/http` server, whose handler " +
		"started 10–30 ms later at p99, for the floor as for Cronix; since stop 40 the bench process collects its garbage " +
		"before each window and not during it, `--gc-limit-mib`, where its collections had held the receiver 50–125 ms " +
		"in a few seconds of a window)"
}

func renderSpeed(cfg config, rows []row, ratios []string) string {
	var b strings.Builder
	header(&b, cfg, "Speed: lateness, CPU and memory at fires every second (standalone)")
	b.WriteString("One `cronix standalone` per row (embedded etcd, SQLite, single-voter raft, one node, `--http-allow-loopback`), " +
		"jobs on `*/1 * * * * *` created through the API, measured over whole seconds after a " + cfg.warmup.String() + " warm-up. " +
		"Lateness: **http** = request arrival at the bench's receiver − scheduled second (the fire is the one the request names in " +
		"its `X-Cronix-Fire-Id` header), arrival being " + arrivalMeaning(cfg) + "; **at the socket** (http rows) = " +
		"when the request's bytes reached the receiver's socket (the kernel's receive timestamp, `SO_TIMESTAMPNS`) − scheduled " +
		"second, which leaves out the receiver's own wait for a CPU to read and parse the requests (it shares this machine's cores " +
		"with Cronix); **shell** = the command's own " +
		"`date +%s%N` − scheduled second (from `$CRONIX_FIRE_ID`). Missed = fires of the window with no execution; duplicated = " +
		"extra executions of one fire. CPU = utime+stime of the standalone, its plugin processes and their reaped children over " +
		"the window, in % of one core (this machine has " + strconv.Itoa(runtime.NumCPU()) + "). RSS = peak of the process tree's " +
		"summed VmRSS (shared pages counted per process) / of the standalone alone, sampled every second. Each row's notes give " +
		"the hypervisor's steal over its window (the `steal` time of /proc/stat: CPU time this virtual machine wanted and its host " +
		"gave to something else), over the window and in its worst sampled second: a row with more than a few per cent measured " +
		"a shared machine, not Cronix.\n\n")
	b.WriteString("A **spread** row adds `cronix node` processes to the standalone's own node in group `default` " +
		"(joining its embedded etcd as the README shows), the jobs routed by the named strategy; its CPU and tree RSS include " +
		"those processes, and its notes give each node's share of the window's runs and the largest deviation from an even share within one second (until stop 53 ROUND sent all of a second's fires to one node, the next second's to the next). Like an http row it is followed by the http " +
		"floor at its rate (one client process sending that many requests at each second, no scheduler): what this machine " +
		"allows that many simultaneous requests, against which line 6's bound can be read.\n\n")
	b.WriteString("| workload | rate | window | lateness p50 / p99 / max | at the socket p50 / p99 / max | missed | duplicated | CPU (of " + strconv.Itoa(100*runtime.NumCPU()) + "%) | peak RSS tree / standalone |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cpu, rss := fmt.Sprintf("%.0f%%", r.CPU), mib(r.PeakRSS)+" / "+mib(r.PeakRootRSS)
		if r.PeakRSS == 0 {
			cpu, rss = "–", "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %d s | %s / %s / %s | %s | %d of %d | %d | %s | %s |\n", r.Workload, r.Rate, r.Seconds,
			ms(r.P50), ms(r.P99), ms(r.Max), r.socketCell(), r.Missed, r.Expected, r.Duplicated, cpu, rss)
	}
	b.WriteString("\n")
	for _, r := range rows {
		drift := []string{msList(r.Drift)}
		fmt.Fprintf(&b, "- **%s %s**: drift (p99 per %s bucket, ms): %s", r.Workload, r.Rate, cfg.bucket, strings.Join(drift, " · "))
		if r.Socket != nil {
			fmt.Fprintf(&b, "; at the socket: %s", msList(r.Socket.Drift))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "; %s", n)
		}
		if n := r.stealNote(); n != "" {
			fmt.Fprintf(&b, "; %s", n)
		}
		b.WriteString(".\n")
	}
	for _, x := range ratios {
		fmt.Fprintf(&b, "- %s.\n", x)
	}
	b.WriteString("\n")
	return b.String()
}

func runSoak(ctx context.Context, cfg config) error {
	seconds := int(cfg.soakDuration / time.Second)
	cfg.floorSeconds = 0
	if err := soakPrecheck(ctx, cfg); err != nil {
		return err
	}
	r, _, usage, err := shellWorkload(ctx, cfg, cfg.soakRate, seconds, cfg.soakSample)
	if err != nil {
		return err
	}
	var ts []time.Duration
	var service, root, rootFile, all, goal, steals []float64
	var goalTS []time.Duration
	var t0 time.Time
	var lines []string
	for i, u := range usage {
		if i == 0 {
			t0 = u.At
		}
		v := float64(u.ServiceRSS) / (1 << 20)
		all = append(all, v)
		cpu, steal := "–", "–"
		if i > 0 {
			p := usage[i-1]
			cpu = fmt.Sprintf("%.0f%% / %.0f%%", cpuPercent(p.treeUsage, u.treeUsage, cfg.clkTck, u.At.Sub(p.At)),
				cpuPercent(treeUsage{Ticks: p.RootTicks}, treeUsage{Ticks: u.RootTicks}, cfg.clkTck, u.At.Sub(p.At)))
			if p.CPU.All > 0 && u.CPU.All > 0 {
				st := stealShare(p.CPU, u.CPU)
				steal = fmt.Sprintf("%.1f%%", 100*st)
				if u.At.Sub(t0) >= cfg.soakWarmup {
					steals = append(steals, st)
				}
			}
		}
		g := "–"
		if u.GCGoal > 0 {
			g = fmt.Sprintf("%.0f", float64(u.GCGoal)/(1<<20))
		}
		lines = append(lines, fmt.Sprintf("| %s | %.0f | %.0f | %.0f | %.0f | %s | %s | %s |", u.At.Sub(t0).Round(time.Second),
			float64(u.RSS)/(1<<20), v, float64(u.RootRSS)/(1<<20), float64(u.RootRSSFile)/(1<<20), g, cpu, steal))
		if u.At.Sub(t0) >= cfg.soakWarmup {
			ts = append(ts, u.At.Sub(t0))
			service = append(service, v)
			root = append(root, float64(u.RootRSS)/(1<<20))
			rootFile = append(rootFile, float64(u.RootRSSFile)/(1<<20))
			if u.GCGoal > 0 {
				goalTS = append(goalTS, u.At.Sub(t0))
				goal = append(goal, float64(u.GCGoal)/(1<<20))
			}
		}
	}
	var b strings.Builder
	header(&b, cfg, "Soak: shell jobs for a long run, RSS over time (standalone)")
	fmt.Fprintf(&b, "`make bench-soak`: %d shell jobs every second for %s, RSS sampled every %s: of the whole tree, "+
		"of the standalone with its plugin processes (the tree without the short-lived commands the shell plugin starts: "+
		"what a leak would grow) and of the standalone alone.\n\n", cfg.soakRate, cfg.soakDuration, cfg.soakSample)
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| lateness p50 / p99 / max | %s / %s / %s |\n", ms(r.P50), ms(r.P99), ms(r.Max))
	fmt.Fprintf(&b, "| missed / duplicated | %d of %d / %d |\n", r.Missed, r.Expected, r.Duplicated)
	fmt.Fprintf(&b, "| CPU (of %d%%) | %.0f%% |\n", 100*runtime.NumCPU(), r.CPU)
	fmt.Fprintf(&b, "| peak RSS tree / standalone | %s / %s |\n", mib(r.PeakRSS), mib(r.PeakRootRSS))
	if r.stealRead {
		fmt.Fprintf(&b, "| hypervisor steal over the run / worst sampling period (of the machine's CPU time) | %.1f%% / %.1f%% |\n",
			100*r.Steal, 100*r.WorstSteal)
	}
	fmt.Fprintf(&b, "| RSS slope after %s warm-up (least squares over %d samples): standalone + plugins / standalone | %+.1f / %+.1f MiB/h |\n",
		cfg.soakWarmup, len(service), slopePerHour(ts, service), slopePerHour(ts, root))
	fmt.Fprintf(&b, "| the standalone's RSS of mapped files (`RssFile`: the binary, etcd's bbolt file, the raft log's raft.db): slope | %+.1f MiB/h |\n",
		slopePerHour(ts, rootFile))
	if len(goal) > 1 {
		fmt.Fprintf(&b, "| the standalone's Go heap goal (`go_memstats_next_gc_bytes`: twice the heap live after the last collection) "+
			"after warm-up: first / last / slope over %d samples | %.0f / %.0f MiB / %+.1f MiB/h |\n",
			len(goal), goal[0], goal[len(goal)-1], slopePerHour(goalTS, goal))
	}
	if means := windowMeans(ts, service, soakMeanWindow); len(means) > 0 {
		fmt.Fprintf(&b, "| RSS after warm-up, mean per %s: standalone + plugins / standalone | %s / %s MiB |\n",
			soakMeanWindow, joinMiB(means), joinMiB(windowMeans(ts, root, soakMeanWindow)))
	}
	fmt.Fprintf(&b, "| RSS (standalone + plugins) over time | `%s` |\n\n", sparkline(all))
	fmt.Fprintf(&b, "%s\n\n", soakConditions(steals, r.DriftP50, cfg.bucket))
	fmt.Fprintf(&b, "Lateness over time, per %s of scheduled time (ms, p50 / p99): %s.\n\n", cfg.bucket, driftPairs(r.DriftP50, r.Drift))
	b.WriteString("<details><summary>RSS (MiB), CPU (of one core) and the host's steal (of the machine's CPU time) per sample</summary>\n\n" +
		"| t | tree | standalone + plugins | standalone | of which mapped files | standalone's Go heap goal | CPU since the last sample: tree / standalone | steal since the last sample |\n|---|---|---|---|---|---|---|---|\n")
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n\n</details>\n\n")
	fmt.Print(b.String())
	if cfg.out == "" {
		return nil
	}
	if err := benchreport.UpdateSection(cfg.out, "speed-soak", b.String()); err != nil {
		return fmt.Errorf("writing %s: %w", cfg.out, err)
	}
	return nil
}

// soakPrecheck runs the fork floor at the soak's rate for --soak-precheck
// seconds and refuses the soak when the floor itself falls behind: on a
// machine that cannot start that many commands a second without a
// scheduler (stops 53–56 and 58: 200 sequential forks in 1.5–2.6 s), the
// soak's lateness and RSS would grow with its backlog for 30 minutes.
func soakPrecheck(ctx context.Context, cfg config) error {
	if cfg.soakPrecheck <= 0 {
		return nil
	}
	// A floor that keeps up ends a moment after its window; one whose
	// starters fall behind would take until its backlog has started.
	return precheckFloor(ctx, cfg, cfg.warmup+time.Duration(cfg.soakPrecheck)*time.Second+soakBehindP50+10*time.Second)
}

// precheckFloor runs soakPrecheck's floor, refusing the soak when it has
// not started its commands within limit or its median lateness passes
// soakBehindP50.
func precheckFloor(ctx context.Context, cfg config, limit time.Duration) error {
	dir, err := os.MkdirTemp("", "cronix-soak-precheck-")
	if err != nil {
		return fmt.Errorf("soak precheck: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	fctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	r, err := forkFloor(fctx, cfg, dir, cfg.soakRate, cfg.soakPrecheck)
	refuse := func(what string) error {
		return fmt.Errorf("soak refused: the fork floor at %d commands/s for %d s %s: this machine cannot start that many "+
			"commands a second without a scheduler, so the soak would measure its backlog (--soak-precheck 0 runs it anyway)",
			cfg.soakRate, cfg.soakPrecheck, what)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return refuse(fmt.Sprintf("had not started all its commands within %s", limit))
	case err != nil:
		return fmt.Errorf("soak precheck: %w", err)
	case r.P50 > soakBehindP50:
		return refuse(fmt.Sprintf("had a median lateness of %s (more than %s)", ms(r.P50), soakBehindP50))
	}
	return nil
}

// driftPairs writes per-bucket p50 / p99 pairs in ms, joined by " · ".
func driftPairs(p50, p99 []time.Duration) string {
	out := make([]string, len(p99))
	for i := range p99 {
		out[i] = fmt.Sprintf("%.0f / %.0f", float64(p50[i])/float64(time.Millisecond), float64(p99[i])/float64(time.Millisecond))
	}
	return strings.Join(out, " · ")
}

// shellArgs joins args for display, quoting the ones a shell would split.
func shellArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
