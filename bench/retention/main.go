// Command retention measures what run retention costs the trigger loop: a
// standalone with N jobs firing every second, on a database seeded with a
// large backlog of old finished runs, is measured twice — without
// retention, and with --run-retention/--output-retention deleting the
// backlog while the jobs fire — and the lateness (scheduled → handler
// start, and scheduled → dispatched) of both windows is compared. It writes
// the figures into docs/benchmarks.md between retention markers.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/report"
	"github.com/cronix/cronix/server/store"
)

func main() {
	benchreport.RunCommit() // the commit measured: read as the run starts
	binary := flag.String("binary", "bin/cronix", "cronix binary to run")
	jobs := flag.Int("jobs", 200, "number of jobs firing every second")
	seconds := flag.Int("seconds", 60, "length of each measured window in seconds")
	backlog := flag.Int("backlog", 300000, "old finished runs seeded before each phase")
	rounds := flag.Int("rounds", 1, "measure without/with retention this many times, alternating")
	handler := flag.String("handler", "shell", "handler of the firing jobs: shell (`true`, a fork per run) or http (a request to a receiver in this process, no fork)")
	note := flag.String("note", "", "a remark printed with the figures (e.g. that the machine was shared)")
	out := flag.String("out", "docs/benchmarks.md", "Markdown file to update ('' = print only)")
	flag.Parse()
	if *handler != "shell" && *handler != "http" {
		fmt.Fprintln(os.Stderr, "retention bench: --handler must be shell or http")
		os.Exit(2)
	}
	if err := run(*binary, *handler, *jobs, *seconds, *backlog, *rounds, *note, *out); err != nil {
		fmt.Fprintln(os.Stderr, "retention bench:", err)
		os.Exit(1)
	}
}

// phase is one measured window.
type phase struct {
	Name                    string
	Retention               bool
	Expected, Recorded      int
	P50, P99, Max           time.Duration
	DispP50, DispP99        time.Duration
	BacklogStart, BacklogAt int // old runs when the window started / ended
	BacklogEnd              int // old runs after the process stopped
	SeedTook                time.Duration
}

const (
	runRetention    = "7d"
	outputRetention = "2d"
)

func run(binary, handler string, jobs, seconds, backlog, rounds int, note, out string) error {
	var phases []phase
	for i := 0; i < 2*max(rounds, 1); i++ {
		p, err := measure(binary, handler, jobs, seconds, backlog, i%2 == 1)
		if err != nil {
			return err
		}
		if rounds > 1 {
			p.Name = fmt.Sprintf("%s, round %d", p.Name, i/2+1)
		}
		fmt.Printf("%s: lateness p50 %s p99 %s; backlog %d → %d (window) → %d\n", p.Name, p.P50, p.P99,
			p.BacklogStart, p.BacklogAt, p.BacklogEnd)
		phases = append(phases, p)
	}
	report := render(handler, jobs, seconds, backlog, note, phases)
	fmt.Print(report)
	if out != "" {
		return benchreport.UpdateSection(out, "retention", report)
	}
	return nil
}

// seed writes backlog finished runs, 8 to 40 days old, with some output,
// and marks every past report day final (as on a long-running cluster),
// so retention may delete the whole backlog at once.
func seed(ctx context.Context, dsn string, backlog int) (time.Duration, error) {
	started := time.Now()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	j := &store.Job{Name: "old-job", Group: "default", ScheduleType: "cron", Schedule: "0 0 * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`)}
	if err := st.CreateJob(ctx, j); err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	oldest := now.Add(-40 * 24 * time.Hour)
	step := (32 * 24 * time.Hour) / time.Duration(backlog)
	output := strings.Repeat("old output line\n", 12)
	const batch = 1000
	for lo := 0; lo < backlog; lo += batch {
		runs := make([]store.Run, 0, batch)
		for i := lo; i < min(lo+batch, backlog); i++ {
			at := oldest.Add(time.Duration(i) * step).Truncate(time.Millisecond)
			fin := at.Add(50 * time.Millisecond)
			runs = append(runs, store.Run{FireID: cluster.FireID(j.ID, at), JobID: j.ID, Trigger: cluster.TriggerSchedule,
				Status: cluster.StatusSuccess, Node: "old-node", ScheduledAt: at, DispatchedAt: &at, StartedAt: &at,
				FinishedAt: &fin, Output: output})
		}
		if _, err := st.InsertRuns(ctx, runs); err != nil {
			return 0, fmt.Errorf("seeding runs %d..: %w", lo, err)
		}
	}
	today, _ := json.Marshal(now.Format(store.DayLayout))
	if err := st.PutSetting(ctx, "report_cursor", string(today), "bench"); err != nil {
		return 0, err
	}
	return time.Since(started), nil
}

// oldRuns counts the runs scheduled before the retention cutoff.
func oldRuns(ctx context.Context, dsn string) (int, error) {
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	_, n, err := st.FindRuns(ctx, store.RunFilter{To: time.Now().Add(-7 * 24 * time.Hour)}, store.Page{Page: 1, PageSize: 1})
	return n, err
}

func measure(binary, handler string, jobs, seconds, backlog int, retention bool) (phase, error) {
	ctx := context.Background()
	res := phase{Name: "without retention", Retention: retention}
	if retention {
		res.Name = "with retention (" + runRetention + " runs, " + outputRetention + " output)"
	}
	dir, err := os.MkdirTemp("", "cronix-retention-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	dataDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return res, err
	}
	dsn := "sqlite://" + filepath.Join(dataDir, "cronix.db")
	if res.SeedTook, err = seed(ctx, dsn, backlog); err != nil {
		return res, err
	}
	fmt.Printf("%s: seeded %d old runs in %s\n", res.Name, backlog, res.SeedTook.Round(time.Millisecond))

	addrs := make([]string, 4)
	for i := range addrs {
		if addrs[i], err = harness.FreeAddr(); err != nil {
			return res, err
		}
	}
	args := []string{"standalone", "--data-dir", dataDir, "--http-addr", addrs[0], "--etcd-client-addr", addrs[1],
		"--etcd-peer-addr", addrs[2], "--raft-addr", addrs[3]}
	env := []string{"CRONIX_ADMIN_PASSWORD=bench-pw", "CRONIX_LOG_LEVEL=warn"}
	params, _ := json.Marshal(map[string]string{"script": "true"})
	if handler == "http" {
		rec, err := benchreport.StartReceiver(nil)
		if err != nil {
			return res, err
		}
		defer rec.Close()
		params, _ = json.Marshal(map[string]string{"url": rec.URL("/")})
		env = append(env, "CRONIX_HTTP_ALLOW_LOOPBACK=true")
	}
	if retention {
		// Retention starts with leadership; the jobs below are created
		// while it already deletes, and the backlog outlasts the window.
		env = append(env, "CRONIX_RUN_RETENTION="+runRetention, "CRONIX_OUTPUT_RETENTION="+outputRetention)
	}
	p, err := harness.Start(binary, env, args...)
	if err != nil {
		return res, err
	}
	defer func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
	}()
	if _, err := p.WaitOutput(regexp.MustCompile(`URL:\s+(\S+)`), 120*time.Second); err != nil {
		return res, err
	}
	api := harness.NewClient("http://" + addrs[0])
	if err := api.WaitHealthy(60 * time.Second); err != nil {
		return res, err
	}
	if err := api.Login("admin", "bench-pw"); err != nil {
		return res, err
	}
	jobIDs := make([]int64, 0, jobs)
	for i := 0; i < jobs; i++ {
		j, err := api.CreateJob(harness.Job{Name: fmt.Sprintf("bench-%04d", i), Schedule: "*/1 * * * * *",
			Handler: handler, Params: params})
		if err != nil {
			return res, fmt.Errorf("creating job %d: %w", i, err)
		}
		jobIDs = append(jobIDs, j.ID)
	}
	start := time.Now().Truncate(time.Second).Add(3 * time.Second)
	end := start.Add(time.Duration(seconds) * time.Second)
	res.BacklogStart, err = oldRuns(ctx, dsn)
	if err != nil {
		return res, err
	}
	// Wait out the window (plus 5 s for the last runs to be reported): a
	// fixed measuring period, not a wait for an event.
	<-time.After(time.Until(end.Add(5 * time.Second)))
	res.BacklogAt, err = oldRuns(ctx, dsn)
	if err != nil {
		return res, err
	}
	if err := p.Interrupt(60 * time.Second); err != nil {
		return res, err
	}
	if res.BacklogEnd, err = oldRuns(ctx, dsn); err != nil {
		return res, err
	}

	st, err := store.Open(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer st.Close()
	var lateness, dispatchLate []time.Duration
	for _, jobID := range jobIDs {
		runs, _, err := st.ListRuns(ctx, jobID, store.Page{Page: 1, PageSize: 10 * (seconds + 60)})
		if err != nil {
			return res, err
		}
		for _, r := range runs {
			if r.ScheduledAt.Before(start) || !r.ScheduledAt.Before(end) || r.Trigger != cluster.TriggerSchedule {
				continue
			}
			res.Recorded++
			if r.StartedAt != nil {
				lateness = append(lateness, r.StartedAt.Sub(r.ScheduledAt))
			}
			if r.DispatchedAt != nil {
				dispatchLate = append(dispatchLate, r.DispatchedAt.Sub(r.ScheduledAt))
			}
		}
	}
	res.Expected = jobs * seconds
	if res.Recorded == 0 {
		return res, errors.New("no runs recorded in the window")
	}
	res.P50, res.P99, res.Max = benchreport.Percentiles(lateness)
	res.DispP50, res.DispP99, _ = benchreport.Percentiles(dispatchLate)
	return res, nil
}

func render(handler string, jobs, seconds, backlog int, note string, ps []phase) string {
	var b strings.Builder
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	fmt.Fprintf(&b, "### Retention while jobs fire (standalone)\n\n")
	fmt.Fprintf(&b, "Measured %s on %s, commit `%s`.", time.Now().UTC().Format("2006-01-02 15:04 UTC"), benchreport.Machine(), benchreport.RunCommit())
	if note != "" {
		fmt.Fprintf(&b, " %s", note)
	}
	what := "handler `shell`, `true`: a fork per run"
	if handler == "http" {
		what = "handler `http`, a GET to a receiver in the bench process: no fork"
	}
	fmt.Fprintf(&b, "\n\n`make bench-retention RETENTION_JOBS=%d RETENTION_SECONDS=%d RETENTION_BACKLOG=%d RETENTION_ROUNDS=%d RETENTION_HANDLER=%s`: "+
		"fresh standalone processes (embedded etcd, SQLite, one node), each on a database seeded with %d finished "+
		"runs 8 to 40 days old (~200 B of output each) and %d jobs on `*/1 * * * * *` (%s), "+
		"measured over a %d s window after a 3 s warm-up: without retention, then with "+
		"`--run-retention %s --output-retention %s`, which deletes the backlog (%d runs per statement, "+
		"a pause of %s or nine times the statement's duration between statements) while the jobs fire; "+
		"%d round(s), alternating.\n\n",
		jobs, seconds, backlog, len(ps)/2, handler, backlog, jobs, what, seconds, runRetention, outputRetention,
		report.DefaultRetentionBatch, report.DefaultRetentionPause, len(ps)/2)
	b.WriteString("| figure |")
	for _, p := range ps {
		fmt.Fprintf(&b, " %s |", p.Name)
	}
	b.WriteString("\n|---|")
	for range ps {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	row := func(name string, f func(p phase) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, p := range ps {
			fmt.Fprintf(&b, " %s |", f(p))
		}
		b.WriteString("\n")
	}
	row("fires expected / recorded", func(p phase) string { return fmt.Sprintf("%d / %d", p.Expected, p.Recorded) })
	row("lateness p50 (scheduled → handler start)", func(p phase) string { return r(p.P50) })
	row("lateness p99", func(p phase) string { return r(p.P99) })
	row("lateness max", func(p phase) string { return r(p.Max) })
	row("leader side p50 / p99 (scheduled → dispatched)", func(p phase) string { return r(p.DispP50) + " / " + r(p.DispP99) })
	row("old runs at window start → end → after stop", func(p phase) string {
		return fmt.Sprintf("%d → %d → %d", p.BacklogStart, p.BacklogAt, p.BacklogEnd)
	})
	for i := 0; i+1 < len(ps); i += 2 {
		d := ps[i+1].P99 - ps[i].P99
		fmt.Fprintf(&b, "\nRound %d: p99 lateness difference (with − without retention) **%s**, leader side p99 %s "+
			"(acceptance: at most 10 ms).\n", i/2+1, r(d), r(ps[i+1].DispP99-ps[i].DispP99))
	}
	b.WriteString("\n")
	return b.String()
}
