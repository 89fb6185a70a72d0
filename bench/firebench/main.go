// Command firebench measures Cronix standalone end to end: N jobs firing
// every second for T seconds through the real binary, shell plugin and
// SQLite. It reports fires expected / recorded / duplicated, lateness
// (scheduled instant → handler start) and server RSS, and writes them into
// docs/benchmarks.md between firebench markers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/store"
)

func main() {
	binary := flag.String("binary", "bin/cronix", "cronix binary to run")
	jobs := flag.Int("jobs", 1000, "number of jobs firing every second")
	seconds := flag.Int("seconds", 60, "length of the measured window in seconds")
	out := flag.String("out", "docs/benchmarks.md", "Markdown file to update ('' = print only)")
	flag.Parse()
	if err := run(*binary, *jobs, *seconds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "firebench:", err)
		os.Exit(1)
	}
}

type result struct {
	Jobs, Seconds                          int
	Expected, Recorded, Succeeded, Missing int
	Executions, Duplicated                 int
	P50, P99, Max                          time.Duration
	DispP50, DispP99                       time.Duration
	RSSPeakMiB, RSSEndMiB                  float64
	CreateTook                             time.Duration
}

func run(binary string, jobs, seconds int, out string) error {
	dir, err := os.MkdirTemp("", "cronix-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	execLog := filepath.Join(dir, "exec.log")
	addrs := make([]string, 4)
	for i := range addrs {
		if addrs[i], err = harness.FreeAddr(); err != nil {
			return err
		}
	}
	dataDir := filepath.Join(dir, "data")
	p, err := harness.Start(binary, []string{"CRONIX_ADMIN_PASSWORD=bench-pw", "CRONIX_LOG_LEVEL=warn"},
		"standalone", "--data-dir", dataDir, "--http-addr", addrs[0], "--etcd-client-addr", addrs[1],
		"--etcd-peer-addr", addrs[2], "--raft-addr", addrs[3])
	if err != nil {
		return err
	}
	defer func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
	}()
	if _, err := p.WaitOutput(regexp.MustCompile(`URL:\s+(\S+)`), 60*time.Second); err != nil {
		return err
	}
	api := harness.NewClient("http://" + addrs[0])
	if err := api.WaitHealthy(30 * time.Second); err != nil {
		return err
	}
	if err := api.Login("admin", "bench-pw"); err != nil {
		return err
	}

	params, _ := json.Marshal(map[string]string{"script": `echo "$CRONIX_FIRE_ID" >> ` + execLog})
	created := time.Now()
	jobIDs := make([]int64, 0, jobs)
	for i := 0; i < jobs; i++ {
		j, err := api.CreateJob(harness.Job{Name: fmt.Sprintf("bench-%04d", i), Schedule: "*/1 * * * * *",
			Handler: "shell", Params: params})
		if err != nil {
			return fmt.Errorf("creating job %d: %w", i, err)
		}
		jobIDs = append(jobIDs, j.ID)
	}
	res := result{Jobs: jobs, Seconds: seconds, CreateTook: time.Since(created)}
	fmt.Printf("created %d jobs in %s\n", jobs, res.CreateTook.Round(time.Millisecond))

	// Measured window: whole seconds, starting after a 3 s warm-up.
	start := time.Now().Truncate(time.Second).Add(3 * time.Second)
	end := start.Add(time.Duration(seconds) * time.Second)
	pid := p.Cmd.Process.Pid
	for time.Now().Before(end.Add(5 * time.Second)) {
		if rss, err := rssMiB(pid); err == nil {
			res.RSSPeakMiB = max(res.RSSPeakMiB, rss)
			res.RSSEndMiB = rss
		}
		time.Sleep(time.Second) // sampling period of the RSS probe, not a wait for an event
	}
	if err := p.Interrupt(60 * time.Second); err != nil {
		return err
	}

	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(dataDir, "cronix.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	var lateness, dispatchLate []time.Duration
	for _, jobID := range jobIDs {
		runs, _, err := st.ListRuns(context.Background(), jobID, store.Page{Page: 1, PageSize: 10 * (seconds + 60)})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.ScheduledAt.Before(start) || !r.ScheduledAt.Before(end) || r.Trigger != cluster.TriggerSchedule {
				continue
			}
			res.Recorded++
			if r.Status == cluster.StatusSuccess {
				res.Succeeded++
			}
			if r.StartedAt != nil {
				lateness = append(lateness, r.StartedAt.Sub(r.ScheduledAt))
			}
			if r.DispatchedAt != nil {
				dispatchLate = append(dispatchLate, r.DispatchedAt.Sub(r.ScheduledAt))
			}
		}
	}
	res.Expected = jobs * seconds
	res.Missing = res.Expected - res.Recorded
	execs, err := benchreport.CountExecutions(execLog, func(id string) bool {
		_, ms, ok := strings.Cut(id, "-")
		at, err := strconv.ParseInt(ms, 10, 64)
		return ok && err == nil && at >= start.UnixMilli() && at < end.UnixMilli()
	})
	if err != nil {
		return err
	}
	for _, n := range execs {
		res.Executions += n
		if n > 1 {
			res.Duplicated += n - 1
		}
	}
	res.P50, res.P99, res.Max = benchreport.Percentiles(lateness)
	res.DispP50, res.DispP99, _ = benchreport.Percentiles(dispatchLate)
	report := render(res)
	fmt.Print(report)
	if out != "" {
		return benchreport.UpdateSection(out, "firebench", report)
	}
	return nil
}

func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func render(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Fire throughput and lateness (standalone)\n\n")
	fmt.Fprintf(&b, "Measured %s on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), benchreport.Machine())
	fmt.Fprintf(&b, "`make bench BENCH_JOBS=%d BENCH_SECONDS=%d`: %d jobs on `*/1 * * * * *`, handler `shell` "+
		"(each run forks `/bin/sh` and appends its fire id to a file), one standalone process (embedded etcd, "+
		"SQLite, single-voter raft, one node), measured over a %d s window after a 3 s warm-up.\n\n",
		r.Jobs, r.Seconds, r.Jobs, r.Seconds)
	b.WriteString("| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| fires expected | %d |\n", r.Expected)
	fmt.Fprintf(&b, "| fires recorded (SQL runs) | %d |\n", r.Recorded)
	fmt.Fprintf(&b, "| runs succeeded | %d |\n", r.Succeeded)
	fmt.Fprintf(&b, "| fires missing | %d |\n", r.Missing)
	fmt.Fprintf(&b, "| handler executions | %d |\n", r.Executions)
	fmt.Fprintf(&b, "| duplicated executions | %d |\n", r.Duplicated)
	fmt.Fprintf(&b, "| lateness p50 (scheduled → handler start) | %s |\n", r.P50.Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| lateness p99 | %s |\n", r.P99.Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| lateness max | %s |\n", r.Max.Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| of which leader side p50 / p99 (scheduled → dispatched to etcd) | %s / %s |\n",
		r.DispP50.Round(100*time.Microsecond), r.DispP99.Round(100*time.Microsecond))
	fmt.Fprintf(&b, "| server RSS peak / end (standalone process, plugins excluded) | %.0f MiB / %.0f MiB |\n", r.RSSPeakMiB, r.RSSEndMiB)
	fmt.Fprintf(&b, "| creating %d jobs through the API | %s |\n\n", r.Jobs, r.CreateTook.Round(time.Millisecond))
	return b.String()
}
