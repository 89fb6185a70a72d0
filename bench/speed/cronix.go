package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/store"
)

// standalone is one "cronix standalone" process under measurement.
type standalone struct {
	p       *harness.Proc
	api     *harness.Client
	dataDir string
	started time.Time // just before the process was started
	ready   time.Time // first /readyz 200 seen by the bench
}

// addrs are the four listeners of a standalone; kept for a restart on the
// same data dir.
type addrs struct{ http, etcdClient, etcdPeer, raft string }

func freeAddrs() (addrs, error) {
	var a addrs
	for _, p := range []*string{&a.http, &a.etcdClient, &a.etcdPeer, &a.raft} {
		v, err := harness.FreeAddr()
		if err != nil {
			return a, fmt.Errorf("free address: %w", err)
		}
		*p = v
	}
	return a, nil
}

const adminPassword = "bench-pw"

// startStandalone starts the binary on dataDir and waits for /readyz and a
// logged-in API client.
func startStandalone(cfg config, dataDir string, a addrs, extra ...string) (*standalone, error) {
	args := []string{"standalone", "--data-dir", dataDir, "--http-addr", a.http, "--etcd-client-addr", a.etcdClient,
		"--etcd-peer-addr", a.etcdPeer, "--raft-addr", a.raft, "--http-allow-loopback"}
	if cfg.pprofAddr != "" {
		args = append(args, "--pprof-addr", cfg.pprofAddr)
	}
	args = append(args, extra...)
	s := &standalone{dataDir: dataDir, started: time.Now()}
	p, err := harness.Start(cfg.binary, []string{"CRONIX_ADMIN_PASSWORD=" + adminPassword, "CRONIX_LOG_LEVEL=" + cfg.logLevel}, args...)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", cfg.binary, err)
	}
	s.p = p
	s.api = harness.NewClient("http://" + a.http)
	s.api.HTTP.Transport = &http.Transport{MaxIdleConnsPerHost: 32}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if code, _, err := s.api.Ready(); err == nil && code == http.StatusOK {
			s.ready = time.Now()
			break
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("standalone exited before ready:\n%s", tail(p.Output()))
		case <-time.After(20 * time.Millisecond): // poll period of /readyz
		}
		if time.Now().After(deadline) {
			s.p.KillGroup()
			return nil, fmt.Errorf("standalone not ready within 3m:\n%s", tail(p.Output()))
		}
	}
	if _, err := p.WaitOutput(regexp.MustCompile(`URL:\s+(\S+)`), time.Minute); err != nil {
		s.p.KillGroup()
		return nil, err
	}
	if err := s.api.Login("admin", adminPassword); err != nil {
		s.p.KillGroup()
		return nil, fmt.Errorf("login: %w", err)
	}
	return s, nil
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// gcGoal is the standalone's go_memstats_next_gc_bytes from /metrics: the
// heap size at which its next collection starts, which with the default
// GOGC is twice the heap found live by the last one. Unlike RSS it follows
// live memory only: not the garbage between collections, nor the pages the
// runtime has not yet given back, nor memory outside the Go heap.
func (s *standalone) gcGoal(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api.Base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.api.Token)
	resp, err := s.api.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	return metricValue(string(body), "go_memstats_next_gc_bytes")
}

// metricValue is the value of the unlabelled sample name in a Prometheus
// text exposition.
func metricValue(text, name string) (int64, error) {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			return int64(f), nil
		}
	}
	return 0, fmt.Errorf("%s not in the exposition", name)
}

// stop interrupts the standalone (SIGINT) and waits for it.
func (s *standalone) stop() error {
	defer s.saveLog()
	select {
	case <-s.p.Done():
		return nil
	default:
	}
	if err := s.p.Interrupt(2 * time.Minute); err != nil {
		return fmt.Errorf("stopping standalone: %w", err)
	}
	return nil
}

// saveLog writes what the standalone printed (at --log-level, warn by
// default) beside its data dir, as standalone.log, for a row kept with
// --keep: a slow second is explained there, if anywhere.
func (s *standalone) saveLog() {
	_ = os.WriteFile(filepath.Join(filepath.Dir(s.dataDir), "standalone.log"), []byte(s.p.Output()), 0o600)
}

// createJobs creates n jobs through the API with a few parallel clients;
// body(i) is job i's body. It returns the ids in the order of i.
func createJobs(ctx context.Context, api *harness.Client, n, workers int, body func(i int) map[string]any) ([]int64, error) {
	ids := make([]int64, n)
	err := inPool(ctx, n, 1, workers, func(i int) error {
		j, err := api.CreateJobBody(body(i))
		if err != nil {
			return fmt.Errorf("creating job %d: %w", i, err)
		}
		ids[i] = j.ID
		return nil
	})
	return ids, err
}

// inPool calls fn(start) for start = 0, step, 2*step, ... below n on
// workers goroutines, stopping at the first error or when ctx is done.
func inPool(ctx context.Context, n, step, workers int, fn func(start int) error) error {
	starts := make(chan int)
	errs := make(chan error, max(1, workers))
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range starts {
				if err := fn(start); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for start := 0; start < n; start += step {
		select {
		case starts <- start:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(starts)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// readRuns reads the scheduled runs of jobs from the (stopped) standalone's
// SQLite file.
func readRuns(ctx context.Context, dataDir string, jobs []int64, perJob int) ([]run, error) {
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dataDir, "cronix.db"))
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite store: %w", err)
	}
	defer st.Close()
	var out []run
	for _, id := range jobs {
		rs, _, err := st.ListRuns(ctx, id, store.Page{Page: 1, PageSize: perJob})
		if err != nil {
			return nil, fmt.Errorf("runs of job %d: %w", id, err)
		}
		for _, r := range rs {
			x := run{Job: r.JobID, Scheduled: r.ScheduledAt}
			if r.StartedAt != nil {
				x.Started = *r.StartedAt
			}
			out = append(out, x)
		}
	}
	return out, nil
}

// usageSample is one reading of the standalone's process tree.
type usageSample struct {
	At time.Time
	treeUsage
	// CPU is the machine's CPU ticks at the sample (steal: see cpuTicks);
	// zero when /proc/stat could not be read.
	CPU cpuTicks
	// GCGoal is the standalone's heap goal at the sample (see
	// standalone.gcGoal); 0 when not probed.
	GCGoal int64
}

// sampler reads the process tree of pid every period until stopped.
type sampler struct {
	mu      sync.Mutex
	samples []usageSample
	cancel  context.CancelFunc
	done    chan struct{}
}

// probe, when not nil, is read with each sample into its GCGoal. With pid
// 0 it samples only the machine's CPU ticks (for a floor's steal).
func startSampler(ctx context.Context, pid int, period time.Duration, probe func(context.Context) (int64, error)) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			var u treeUsage
			var err error
			if pid != 0 {
				u, err = readTree("/proc", pid)
			}
			if err == nil {
				smp := usageSample{At: time.Now(), treeUsage: u}
				smp.CPU, _ = readCPUTicks("/proc")
				if probe != nil {
					smp.GCGoal, _ = probe(ctx) // 0 when unread
				}
				s.mu.Lock()
				s.samples = append(s.samples, smp)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() []usageSample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// resources are the CPU and memory figures of a window.
type resources struct {
	CPU                  float64 // % of one core, whole tree
	PeakRSS, PeakRootRSS int64
	// Steal is the share of the machine's CPU time its hypervisor stole
	// over the window, WorstSteal the most in one sampling period; a row
	// with much of it measured a machine shared with others.
	Steal, WorstSteal float64
	stealRead         bool
}

// takeSteal keeps the steal figures of the samples ss over [start, end]
// (a floor's machine-only samples: its own CPU and memory are counted
// otherwise).
func (r *resources) takeSteal(ss []usageSample, start, end time.Time) {
	r.Steal, r.WorstSteal, r.stealRead = stealOver(ss, start, end)
}

// stealOver is the share of the machine's CPU time stolen between the
// window's end samples (windowEnds), and the most stolen between two
// consecutive samples within [start, end]; ok is false without /proc/stat
// readings at both ends.
func stealOver(ss []usageSample, start, end time.Time) (steal, worst float64, ok bool) {
	for i := 1; i < len(ss); i++ {
		p, q := &ss[i-1], &ss[i]
		if !p.At.Before(start) && !q.At.After(end) && p.CPU.All > 0 && q.CPU.All > 0 {
			worst = max(worst, stealShare(p.CPU, q.CPU))
		}
	}
	a, b := windowEnds(ss, start, end)
	if a == nil || b == nil || !b.At.After(a.At) || a.CPU.All == 0 || b.CPU.All == 0 {
		return 0, worst, false
	}
	return stealShare(a.CPU, b.CPU), worst, true
}

// windowEnds are the first sample at or after start and the last at or
// before end (nil when there is none).
func windowEnds(ss []usageSample, start, end time.Time) (a, b *usageSample) {
	for i := range ss {
		s := &ss[i]
		if a == nil && !s.At.Before(start) {
			a = s
		}
		if !s.At.After(end) {
			b = s
		}
	}
	return a, b
}

// stealBrief is the steal figures for a row's live line.
func (r resources) stealBrief() string {
	return fmt.Sprintf("steal %.1f%% (worst sample %.1f%%)", 100*r.Steal, 100*r.WorstSteal)
}

// stealNote says how much CPU time the hypervisor took during the window.
func (r resources) stealNote() string {
	if !r.stealRead {
		return ""
	}
	return fmt.Sprintf("hypervisor steal over the window %.1f%% of the machine's CPU time, worst sampled second %.1f%%",
		100*r.Steal, 100*r.WorstSteal)
}

// windowResources computes CPU between the samples closest to start and end,
// and the peak RSS over the samples within [start, end+grace].
func windowResources(ss []usageSample, start, end time.Time, clkTck int64) resources {
	var r resources
	for _, s := range ss {
		if !s.At.Before(start) && !s.At.After(end) {
			r.PeakRSS, r.PeakRootRSS = max(r.PeakRSS, s.RSS), max(r.PeakRootRSS, s.RootRSS)
		}
	}
	a, b := windowEnds(ss, start, end)
	if a != nil && b != nil && b.At.After(a.At) {
		r.CPU = cpuPercent(a.treeUsage, b.treeUsage, clkTck, b.At.Sub(a.At))
	}
	r.takeSteal(ss, start, end)
	return r
}

// clockTicks is the kernel's USER_HZ (the unit of /proc/<pid>/stat times).
func clockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}
