package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
)

// row is one line of the report table plus its notes.
type row struct {
	Workload, Rate string
	Seconds        int
	tally
	// Socket (http) is the lateness at the receiver's socket.
	Socket *tally
	resources
	Notes []string
}

// socketCell is the row's lateness at the socket, p50 / p99 / max.
func (r row) socketCell() string {
	if r.Socket == nil {
		return "–"
	}
	return ms(r.Socket.P50) + " / " + ms(r.Socket.P99) + " / " + ms(r.Socket.Max)
}

// noteSeconds adds the spread of the row's per-second p99s (at the handler
// and the socket) to its notes and, with --samples-dir, writes its samples
// to <dir>/<name>.txt.
func (r *row) noteSeconds(cfg config, name string, samples []sample) error {
	sp := r.PerSecond
	if sp != (secondSpread{}) {
		note := fmt.Sprintf("p99 of each second, best / median / worst: %s / %s / %s", ms(sp.Best), ms(sp.Median), ms(sp.Worst))
		if r.Socket != nil {
			so := r.Socket.PerSecond
			note += fmt.Sprintf("; at the socket %s / %s / %s", ms(so.Best), ms(so.Median), ms(so.Worst))
		}
		r.Notes = append(r.Notes, note)
	}
	if cfg.samplesDir == "" {
		return nil
	}
	return writeSamples(filepath.Join(cfg.samplesDir, name+".txt"), samples)
}

// receiver is the http workload's target: it records the arrival time of
// every request to /j/<index>, with the fire it names in the http
// handler's X-Cronix-Fire-Id header (its job id and scheduled second, see
// parseFireID), so each arrival is attributed to its fire exactly. It is
// the lean receiver (benchreport.LeanReceiver: arrival = when it had read
// the request) unless --receiver net/http asks for a net/http server
// (arrival = when its handler started), the bench's receiver until stop 39.
type receiver struct {
	url   func(path string) string
	close func()

	mu       sync.Mutex
	arrivals sampleLog // Job = the job's index until mapped to its id
	// last is, per job index, the latest scheduled second an arrival named
	// (its arrival time when it named none): allPast waits on it.
	last map[int64]time.Time
	bg   int
}

// sampleBlock is how many arrivals one block of a sampleLog holds (1.3 MB).
const sampleBlock = 1 << 14

// sampleLog is the receiver's arrivals in blocks of sampleBlock: it grows
// by a block and never copies what it holds. A single slice grew by a
// quarter at a time, copying every arrival before under the receiver's
// lock, which held both receiving loops: in a 30-minute row at 500/s
// (900,000 arrivals, 72 MB) the copies stalled arrivals 100-270 ms at
// 9.5, 11.5, 14.5, 18, 22.5 and 28 minutes, each 1.25 times the one
// before; in a 180-s row at 3,000/s they reached tens of MB, and a row
// longer than its floor's had longer stalls than its floor.
type sampleLog struct{ blocks [][]sample }

func (l *sampleLog) add(s sample) {
	b := len(l.blocks) - 1
	if b < 0 || len(l.blocks[b]) == cap(l.blocks[b]) {
		l.blocks = append(l.blocks, make([]sample, 0, sampleBlock))
		b++
	}
	l.blocks[b] = append(l.blocks[b], s)
}

// len is how many samples l holds: every block but the last is full.
func (l *sampleLog) len() int {
	if len(l.blocks) == 0 {
		return 0
	}
	return (len(l.blocks)-1)*sampleBlock + len(l.blocks[len(l.blocks)-1])
}

// all yields the samples in the order added.
func (l *sampleLog) all(yield func(sample) bool) {
	for _, b := range l.blocks {
		for _, s := range b {
			if !yield(s) {
				return
			}
		}
	}
}

// Receivers of --receiver.
const (
	receiverLean    = "lean"
	receiverNetHTTP = "net/http"
)

func startReceiver(cfg config) (*receiver, error) {
	kind, nice := cfg.receiver, cfg.receiverNice
	r := &receiver{last: map[int64]time.Time{}}
	switch kind {
	case receiverLean:
		lr, err := benchreport.StartLeanReceiver(runtime.NumCPU(), func(a benchreport.Arrived) {
			r.record(a.Path, a.FireID, a.At, a.Socket)
		}, benchreport.WithNice(nice),
			benchreport.WithAnswerHold(cfg.receiverAnswerQuiet, cfg.receiverAnswerHold))
		if errors.Is(err, os.ErrPermission) && nice != 0 {
			return nil, fmt.Errorf("%w (--receiver-nice %d: a negative value needs CAP_SYS_NICE, 0 runs the receiver without)", err, nice)
		}
		if err != nil {
			return nil, err
		}
		r.url, r.close = lr.URL, lr.Close
	case receiverNetHTTP:
		if nice != 0 {
			return nil, fmt.Errorf("receiver %s: a nice value is for the %s receiver only", kind, receiverLean)
		}
		hr, err := benchreport.StartReceiver(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			at := time.Now()
			sock, _ := benchreport.Arrival(req)
			r.record(req.URL.Path, req.Header.Get(fireIDHeader), at, sock)
			w.WriteHeader(http.StatusNoContent)
		}))
		if err != nil {
			return nil, err
		}
		r.url, r.close = hr.URL, hr.Close
	default:
		return nil, fmt.Errorf("receiver %q: want %s or %s", kind, receiverLean, receiverNetHTTP)
	}
	return r, nil
}

// URL is the address of path (starting with "/") on the receiver.
func (r *receiver) URL(path string) string { return r.url(path) }

// Close stops the receiver.
func (r *receiver) Close() { r.close() }

// record notes a request to path that arrived at at, having reached the
// socket at sock (zero: unknown).
func (r *receiver) record(path, fireID string, at, sock time.Time) {
	rest, ok := strings.CutPrefix(path, "/j/")
	i, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil {
		r.mu.Lock()
		r.bg++
		r.mu.Unlock()
		return
	}
	a := sample{Job: i, At: at}
	if !sock.IsZero() && !sock.After(at) && at.Sub(sock) < time.Second {
		a.Socket = sock
	}
	if _, sched, err := parseFireID(fireID); err == nil {
		a.Scheduled = sched
	}
	reached := a.Scheduled
	if reached.IsZero() {
		reached = at
	}
	r.mu.Lock()
	r.arrivals.add(a)
	if reached.After(r.last[i]) {
		r.last[i] = reached
	}
	r.mu.Unlock()
}

// allPast reports whether every index in [0, n) has an arrival of a fire
// scheduled at or after t (of any fire at or after t, for requests that
// name none). Not the arrival time: a row that fell seconds behind still
// has the window's last seconds in flight when its first arrivals after
// the window's end come in, and stopping the standalone then counted them
// as missed.
func (r *receiver) allPast(n int, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < n; i++ {
		if r.last[int64(i)].Before(t) {
			return false
		}
	}
	return true
}

func (r *receiver) first() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var f time.Time
	for a := range r.arrivals.all {
		if f.IsZero() || a.At.Before(f) {
			f = a.At
		}
	}
	return f
}

// socketTally is the tally of the http samples at the receiver's socket;
// nil when the kernel gave no receive timestamps.
func socketTally(samples []sample, ids []int64, start, end time.Time, bucket time.Duration) *tally {
	if !slices.ContainsFunc(samples, func(s sample) bool { return !s.Socket.IsZero() }) {
		return nil
	}
	t := tallySamples(atSocket(samples), ids, start, end, bucket)
	return &t
}

// fireIDHeader is the header in which the http handler names the fire.
const fireIDHeader = "X-Cronix-Fire-Id"

// snapshot returns the arrivals with the index mapped to the job id;
// Scheduled is set for the arrivals that named their fire.
func (r *receiver) snapshot(ids []int64) []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]sample, 0, r.arrivals.len())
	for a := range r.arrivals.all {
		if a.Job >= 0 && int(a.Job) < len(ids) {
			out = append(out, sample{Job: ids[a.Job], Scheduled: a.Scheduled, At: a.At, Socket: a.Socket})
		}
	}
	return out
}

// rig is a receiver and a standalone on a fresh temp data dir.
type rig struct {
	rec          *receiver
	dir, dataDir string
	a            addrs
	s            *standalone
}

// newRig starts the receiver and the standalone; close stops both and
// removes the temp dir (unless --keep).
func newRig(cfg config, name string) (*rig, error) {
	rg := &rig{}
	var err error
	if rg.rec, err = startReceiver(cfg); err != nil {
		return nil, err
	}
	if rg.dir, err = os.MkdirTemp("", "cronix-speed-"+name+"-"); err != nil {
		rg.rec.Close()
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	rg.dataDir = filepath.Join(rg.dir, "data")
	if rg.a, err = freeAddrs(); err == nil {
		rg.s, err = startStandalone(cfg, rg.dataDir, rg.a)
	}
	if err != nil {
		rg.close(cfg)
		return nil, err
	}
	return rg, nil
}

func (rg *rig) close(cfg config) {
	if rg.s != nil {
		rg.s.p.KillGroup()
	}
	rg.rec.Close()
	cfg.cleanup(rg.dir)
}

// window is the measured span: whole seconds after a warm-up. It collects
// this process's garbage first, so that with quietGC none is collected
// during the window.
func window(cfg config, seconds int) (start, end time.Time) {
	if cfg.gcLimitMiB > 0 {
		runtime.GC()
	}
	start = time.Now().Truncate(time.Second).Add(cfg.warmup)
	return start, start.Add(time.Duration(seconds) * time.Second)
}

// waitUntil polls cond every period until it holds or the deadline passes.
func waitUntil(ctx context.Context, deadline time.Time, period time.Duration, cond func() bool) bool {
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(period):
		}
	}
	return true
}

func everySecond(name, handler string, params any) map[string]any {
	return map[string]any{"name": name, "schedule": "*/1 * * * * *", "handler": handler, "params": params}
}

// httpWorkload runs rate http jobs every second against the receiver.
func httpWorkload(ctx context.Context, cfg config, rate int) (row, error) {
	rg, err := newRig(cfg, "http")
	if err != nil {
		return row{}, err
	}
	defer rg.close(cfg)
	rec, s := rg.rec, rg.s
	created := time.Now()
	ids, err := createJobsBatch(ctx, s.api, rate, cfg.batchWorkers, func(i int) map[string]any {
		return everySecond(fmt.Sprintf("http-%05d", i), "http", map[string]any{"url": rec.URL(fmt.Sprintf("/j/%d", i))})
	})
	if err != nil {
		return row{}, err
	}
	fmt.Printf("http %d/s: created %d jobs in %s\n", rate, rate, time.Since(created).Round(time.Millisecond))
	r, err := measureHTTP(ctx, cfg, fmt.Sprintf("http-%d", rate), s, rec, ids, cfg.seconds)
	if err != nil {
		return row{}, err
	}
	r.Workload, r.Rate = "http", fmt.Sprintf("%d/s", rate)
	return r, nil
}

// measureHTTP measures the window with the jobs ids firing against rec,
// then stops the standalone and matches arrivals to runs.
func measureHTTP(ctx context.Context, cfg config, name string, s *standalone, rec *receiver, ids []int64, seconds int) (row, error) {
	start, end := window(cfg, seconds)
	fmt.Printf("  window %s .. %s (unix %d .. %d)\n", start.UTC().Format(time.TimeOnly), end.UTC().Format(time.TimeOnly), start.Unix(), end.Unix())
	smp := startSampler(ctx, s.p.Cmd.Process.Pid, time.Second, nil)
	if !waitUntil(ctx, end.Add(2*time.Minute), 200*time.Millisecond, func() bool { return !time.Now().Before(end) && rec.allPast(len(ids), end) }) {
		fmt.Println("  warning: not every job reached the end of the window within 2 minutes")
	}
	usage := smp.stop()
	res := windowResources(usage, start, end, cfg.clkTck)
	if err := s.stop(); err != nil {
		return row{}, err
	}
	arrivals := rec.snapshot(ids)
	var runs []run
	if slices.ContainsFunc(arrivals, func(a sample) bool { return a.Scheduled.IsZero() }) {
		// A handler that does not send the fire id: attribute by start time.
		var err error
		if runs, err = readRuns(ctx, s.dataDir, ids, 4*(seconds+int(cfg.warmup/time.Second)+180)); err != nil {
			return row{}, err
		}
	}
	samples, unmatched := matchArrivals(arrivals, runs, 5*time.Millisecond)
	r := row{Seconds: seconds, tally: tallySamples(samples, ids, start, end, cfg.bucket), resources: res}
	if unmatched > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d arrivals matched no started run", unmatched))
	}
	if r.Missed > 0 {
		m, err := explainMissed(ctx, s, samples, usage, ids, start, end)
		if err != nil {
			return row{}, err
		}
		r.Notes = append(r.Notes, m.note())
		fmt.Printf("  %s\n", m.note())
		for _, line := range m.Log {
			fmt.Printf("    %s\n", line)
		}
	}
	r.Socket = socketTally(samples, ids, start, end, cfg.bucket)
	if err := r.noteSeconds(cfg, name, samples); err != nil {
		return row{}, err
	}
	fmt.Printf("  p50 %s p99 %s max %s missed %d dup %d cpu %.0f%% rss %s; at the socket %s; %s\n", ms(r.P50), ms(r.P99), ms(r.Max), r.Missed, r.Duplicated, r.CPU, mib(r.PeakRSS), r.socketCell(), r.stealBrief())
	return r, nil
}

// shellScript is the shell workload's command: its own start timestamp,
// appended with the fire id to the exec log (O_APPEND, one small write).
func shellScript(log string) string {
	return `t=$(date +%s%N); echo "$CRONIX_FIRE_ID $t" >> ` + log
}

// shellWorkload runs rate shell jobs every second, then the fork floor.
func shellWorkload(ctx context.Context, cfg config, rate, seconds int, rssPeriod time.Duration) (row, row, []usageSample, error) {
	dir, err := os.MkdirTemp("", "cronix-speed-shell-")
	if err != nil {
		return row{}, row{}, nil, fmt.Errorf("temp dir: %w", err)
	}
	defer cfg.cleanup(dir)
	a, err := freeAddrs()
	if err != nil {
		return row{}, row{}, nil, err
	}
	s, err := startStandalone(cfg, filepath.Join(dir, "data"), a)
	if err != nil {
		return row{}, row{}, nil, err
	}
	defer s.p.KillGroup()
	execLog := filepath.Join(dir, "exec.log")
	ids, err := createJobs(ctx, s.api, rate, cfg.createWorkers, func(i int) map[string]any {
		return everySecond(fmt.Sprintf("shell-%05d", i), "shell", map[string]any{"script": shellScript(execLog)})
	})
	if err != nil {
		return row{}, row{}, nil, fmt.Errorf("%w\nstandalone's log:\n%s", err, tail(s.p.Output()))
	}
	start, end := window(cfg, seconds)
	var probe func(context.Context) (int64, error)
	if cfg.soak {
		probe = s.gcGoal
	}
	smp := startSampler(ctx, s.p.Cmd.Process.Pid, rssPeriod, probe)
	var samples []sample
	var off int64
	var bad int
	last := map[int64]time.Time{}
	past := func() bool {
		got, next, b, err := readExecLog(execLog, off)
		if err != nil {
			return false
		}
		off, bad = next, bad+b
		for _, x := range got {
			if x.Scheduled.After(last[x.Job]) {
				last[x.Job] = x.Scheduled
			}
		}
		samples = append(samples, got...)
		if time.Now().Before(end) {
			return false
		}
		for _, id := range ids {
			if last[id].Before(end) {
				return false
			}
		}
		return true
	}
	if !waitUntil(ctx, end.Add(2*time.Minute), 500*time.Millisecond, past) {
		fmt.Println("  warning: not every job reached the end of the window within 2 minutes")
	}
	usage := smp.stop()
	res := windowResources(usage, start, end, cfg.clkTck)
	if err := s.stop(); err != nil {
		return row{}, row{}, nil, err
	}
	r := row{Workload: "shell", Rate: fmt.Sprintf("%d/s", rate), Seconds: seconds,
		tally: tallySamples(samples, ids, start, end, cfg.bucket), resources: res}
	ran := 0 // executions that started within the window (a backlog runs fewer than the rate)
	for _, x := range samples {
		if !x.At.Before(start) && x.At.Before(end) {
			ran++
		}
	}
	perK := cpuPer1000(res.CPU/100*float64(seconds), ran)
	r.Notes = append(r.Notes, fmt.Sprintf("CPU per 1,000 fires: %.2f s (the tree's CPU over the window ÷ the %d executions that started in it)", perK, ran))
	if bad > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d unreadable exec log lines", bad))
	}
	fmt.Printf("shell %d/s: p50 %s p99 %s max %s missed %d dup %d cpu %.0f%% (%.2f s per 1,000 fires) rss %s; %s\n", rate, ms(r.P50), ms(r.P99), ms(r.Max), r.Missed, r.Duplicated, r.CPU, perK, mib(r.PeakRSS), r.stealBrief())
	if cfg.floorSeconds == 0 {
		return r, row{}, usage, nil
	}
	floor := seconds
	if cfg.forkFloorSeconds > 0 {
		floor = min(seconds, cfg.forkFloorSeconds)
	}
	fl, err := forkFloor(ctx, cfg, dir, rate, floor)
	if err != nil {
		return row{}, row{}, nil, err
	}
	return r, fl, usage, nil
}

// forkFloor starts the shell workload's command rate times at each second
// from this process, with cfg.floorWorkers parallel starters and no
// scheduler, and measures lateness the same way.
func forkFloor(ctx context.Context, cfg config, dir string, rate, seconds int) (row, error) {
	execLog := filepath.Join(dir, "floor.log")
	script := shellScript(execLog)
	sh, err := exec.LookPath("sh")
	if err != nil {
		return row{}, fmt.Errorf("fork floor: %w", err)
	}
	start, end := window(cfg, seconds)
	cpu0 := ownCPU()
	machine := startSampler(ctx, 0, time.Second, nil)
	defer machine.stop()
	fired := 0
	type task struct {
		job int64
		at  time.Time
	}
	tasks := make(chan task, rate)
	var wg, waits sync.WaitGroup
	var startErrs int
	var mu sync.Mutex
	for w := 0; w < cfg.floorWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				cmd := exec.Command(sh, "-c", script)
				cmd.Env = append(os.Environ(), "CRONIX_FIRE_ID="+strconv.FormatInt(t.job, 10)+"-"+strconv.FormatInt(t.at.UnixMilli(), 10))
				if err := cmd.Start(); err != nil {
					mu.Lock()
					startErrs++
					mu.Unlock()
					continue
				}
				waits.Add(1)
				go func() { defer waits.Done(); _ = cmd.Wait() }()
			}
		}()
	}
	ids := make([]int64, rate)
	for i := range ids {
		ids[i] = int64(i)
	}
	// One tick per second from the warm-up on; the ticks before start warm
	// up. A cancelled ctx stops it at once, also in a send that blocks while
	// the starters are behind.
	send := func() error {
		for at := start.Add(-cfg.warmup + time.Second); at.Before(end); at = at.Add(time.Second) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(at)): // the scheduled second, as a scheduler would wait for it
			}
			for _, id := range ids {
				select {
				case tasks <- task{id, at}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			fired += len(ids)
		}
		return nil
	}
	err = send()
	close(tasks)
	wg.Wait()
	waits.Wait()
	if err != nil {
		return row{}, err
	}
	cpu := ownCPU() - cpu0
	samples, _, bad, err := readExecLog(execLog, 0)
	if err != nil {
		return row{}, err
	}
	r := row{Workload: "fork floor (bench process, no scheduler)", Rate: fmt.Sprintf("%d/s", rate), Seconds: seconds,
		tally: tallySamples(samples, ids, start, end, cfg.bucket)}
	r.takeSteal(machine.stop(), start, end)
	r.Notes = append(r.Notes, fmt.Sprintf("%d parallel starters (exec.Cmd.Start of `sh -c`, waits not blocking the starters)", cfg.floorWorkers),
		fmt.Sprintf("CPU per 1,000 fires: %.2f s (this process and its reaped children over the whole floor run, warm-up included ÷ its %d fires)", cpuPer1000(cpu.Seconds(), fired), fired))
	if startErrs+bad > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d start errors, %d unreadable lines", startErrs, bad))
	}
	fmt.Printf("fork floor %d/s: p50 %s p99 %s max %s missed %d cpu %.2f s per 1,000 fires; %s\n", rate, ms(r.P50), ms(r.P99), ms(r.Max), r.Missed, cpuPer1000(cpu.Seconds(), fired), r.stealBrief())
	return r, nil
}

// ownCPU is the user+system CPU of this process and of its reaped children.
func ownCPU() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// cpuPer1000 is CPU seconds per 1,000 fires.
func cpuPer1000(cpuSeconds float64, fires int) float64 {
	if fires == 0 {
		return 0
	}
	return cpuSeconds / float64(fires) * 1000
}

// scaleWorkload: many enabled hourly/daily jobs plus every-second http jobs.
func scaleWorkload(ctx context.Context, cfg config) (row, error) {
	rg, err := newRig(cfg, "scale")
	if err != nil {
		return row{}, err
	}
	defer rg.close(cfg)
	rec, dataDir, a := rg.rec, rg.dataDir, rg.a
	s := rg.s
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5ca1e))
	slow := func(i int) string { // hourly for even i, daily for odd i, spread over the hour/day
		if i%2 == 0 {
			return fmt.Sprintf("%d %d * * * *", rng.IntN(60), rng.IntN(60))
		}
		return fmt.Sprintf("%d %d %d * * *", rng.IntN(60), rng.IntN(60), rng.IntN(24))
	}
	var rngMu sync.Mutex
	apiN := min(cfg.scaleAPIJobs, cfg.scaleJobs)
	created := time.Now()
	_, err = createJobsBatch(ctx, s.api, apiN, cfg.batchWorkers, func(i int) map[string]any {
		rngMu.Lock()
		sch := slow(i)
		rngMu.Unlock()
		return map[string]any{"name": fmt.Sprintf("scale-%06d", i), "schedule": sch, "handler": "http",
			"params": map[string]any{"url": rec.URL("/bg/")}}
	})
	if err != nil {
		return row{}, err
	}
	apiTook := time.Since(created)
	fmt.Printf("scale: created %d jobs through POST /api/v1/jobs/batch in %s\n", apiN, apiTook.Round(time.Millisecond))
	oneStart := time.Now()
	ids, err := createJobs(ctx, s.api, cfg.scaleEverySecond, cfg.createWorkers, func(i int) map[string]any {
		return everySecond(fmt.Sprintf("scale-1s-%04d", i), "http", map[string]any{"url": rec.URL(fmt.Sprintf("/j/%d", i))})
	})
	if err != nil {
		return row{}, err
	}
	oneTook := time.Since(oneStart)
	fmt.Printf("scale: created %d jobs one POST /api/v1/jobs each in %s\n", cfg.scaleEverySecond, oneTook.Round(time.Millisecond))
	if err := s.stop(); err != nil {
		return row{}, err
	}
	bulkN := cfg.scaleJobs - apiN
	bulkStart := time.Now()
	if err := bulkInsertJobs(ctx, filepath.Join(dataDir, "cronix.db"), bulkN, slow); err != nil {
		return row{}, err
	}
	bulkTook := time.Since(bulkStart)
	fmt.Printf("scale: inserted %d jobs into SQLite in %s\n", bulkN, bulkTook.Round(time.Millisecond))

	rec.mu.Lock()
	rec.arrivals, rec.last = sampleLog{}, map[int64]time.Time{}
	rec.mu.Unlock()
	s, err = startStandalone(cfg, dataDir, a)
	if err != nil {
		return row{}, err
	}
	rg.s = s // killed by rg.close
	readyIn := s.ready.Sub(s.started)
	var firstIn time.Duration
	if waitUntil(ctx, time.Now().Add(2*time.Minute), 20*time.Millisecond, func() bool { return !rec.first().IsZero() }) {
		firstIn = rec.first().Sub(s.started)
	}
	fmt.Printf("scale: start → /readyz %s, → first fire %s\n", readyIn.Round(time.Millisecond), firstIn.Round(time.Millisecond))

	// The jobs list page, filtered by group, while the every-second jobs fire.
	listP99, listMax, err := listLatency(s, cfg.listRequests, cfg.scaleJobs+cfg.scaleEverySecond)
	if err != nil {
		return row{}, err
	}
	r, err := measureHTTP(ctx, cfg, "scale", s, rec, ids, cfg.seconds)
	if err != nil {
		return row{}, err
	}
	r.Workload = fmt.Sprintf("scale: %d enabled hourly/daily jobs + %d every-second http jobs", cfg.scaleJobs, cfg.scaleEverySecond)
	r.Rate = fmt.Sprintf("%d/s", cfg.scaleEverySecond)
	r.Notes = append(r.Notes,
		fmt.Sprintf("start → /readyz %s, start → first fire %s", sec(readyIn), sec(firstIn)),
		fmt.Sprintf("jobs list page (50 items, `?group=default`, %d requests) p99 %s, max %s", cfg.listRequests, ms(listP99), ms(listMax)),
		fmt.Sprintf("%d jobs created through `POST /api/v1/jobs/batch` (%d per request, %d requests in flight) in %s (%.0f/s); the %d every-second jobs one `POST /api/v1/jobs` each (%d parallel clients) in %s (%.0f/s); the other %d inserted into the SQLite file of the stopped standalone in one transaction (copying an API-created row) in %s",
			apiN, batchSize, cfg.batchWorkers, sec(apiTook), float64(apiN)/apiTook.Seconds(),
			cfg.scaleEverySecond, cfg.createWorkers, sec(oneTook), float64(cfg.scaleEverySecond)/oneTook.Seconds(), bulkN, sec(bulkTook)),
		fmt.Sprintf("hourly/daily fires received during the run: %d", rec.bgCount()),
	)
	return r, nil
}

func (r *receiver) bgCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bg
}

// listLatency times n GET /api/v1/jobs?group=default&page_size=50 on random pages.
func listLatency(s *standalone, n, total int) (p99, maxd time.Duration, err error) {
	pages := max(1, total/50)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		var out struct {
			Items []json.RawMessage `json:"items"`
		}
		t := time.Now()
		code, err := s.api.Do(http.MethodGet, fmt.Sprintf("/api/v1/jobs?group=default&page_size=50&page=%d", 1+rand.IntN(pages)), nil, &out)
		d := time.Since(t)
		if err != nil {
			return 0, 0, fmt.Errorf("jobs list: %w", err)
		}
		if code != http.StatusOK {
			return 0, 0, fmt.Errorf("jobs list: status %d", code)
		}
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, len(ds)*99/100)], ds[len(ds)-1], nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func sec(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
