// Command failover measures how long firing stops when the raft leader of
// an HA Cronix cluster crashes: "cronix etcd", three "cronix server"
// replicas sharing one database and one node run jobs firing every second;
// each trial kills the leader with SIGKILL at a random sub-second offset and
// measures the gap between the last fire dispatched before the kill (old
// leader) and the first dispatched after it (new leader), from the runs'
// dispatched_at. It writes the figures into docs/benchmarks.md between the
// failover markers.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cronix/cronix/bench/benchreport"
	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

func main() {
	benchreport.RunCommit() // the commit measured: read as the run starts
	binary := flag.String("binary", "bin/cronix", "cronix binary to run")
	trials := flag.Int("trials", 20, "leader kills to measure")
	jobs := flag.Int("jobs", 10, "jobs firing every second")
	db := flag.String("db", "", "shared database DSN ('' = a SQLite file in a temporary directory)")
	seed := flag.Int64("seed", time.Now().UnixNano(), "seed of the kill offsets")
	out := flag.String("out", "docs/benchmarks.md", "Markdown file to update ('' = print only)")
	keep := flag.Bool("keep", false, "keep the temporary directory (process logs) after the run")
	idle := flag.Int("idle-jobs", 0, "also create this many enabled jobs on hourly and daily schedules (the scale case: "+
		"the new leader loads them all before its first fire); the report goes to its own section")
	flag.Parse()
	if err := run(*binary, *trials, *jobs, *idle, *db, *seed, *out, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

type trial struct {
	leader  string
	killAt  time.Time
	elected time.Duration // kill → the other replicas agree on a new leader
	gap     time.Duration // last dispatch before the kill → first after it
	after   time.Duration // the kill → first dispatch after it (by the new leader)
}

type result struct {
	Jobs, Trials, IdleJobs         int
	DB                             string
	GapP50, GapP99, GapMax         time.Duration
	AfterP50, AfterP99, AfterMax   time.Duration
	ElectP50, ElectP99, ElectMax   time.Duration
	Baseline                       time.Duration // median gap between dispatch batches without faults
	Expected, Recorded, Missing    int
	DuplicatedExecutions, Executed int
}

func run(binary string, trials, jobs, idle int, db string, seed int64, out string, keep bool) error {
	dir, err := os.MkdirTemp("", "cronix-failover-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("data and logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xfa11))
	fmt.Printf("seed %d\n", seed)

	c, err := harness.StartCluster(harness.ClusterConfig{Binary: binary, Dir: dir, DSN: db, AdminPassword: "bench-pw",
		NodeToken: "bench-node-token", Env: []string{"CRONIX_LOG_LEVEL=warn"}})
	if err != nil {
		return err
	}
	defer func() {
		c.Close()
		if keep {
			_ = c.Dump(filepath.Join(dir, "logs"))
		}
	}()
	if _, _, err := c.StartNode(filepath.Join(dir, "node"), "default", "--lease-ttl", "3s"); err != nil {
		return err
	}

	execLog := filepath.Join(dir, "exec.log")
	params, _ := json.Marshal(map[string]string{"script": `echo "$CRONIX_FIRE_ID" >> ` + execLog})
	ids := make([]int64, 0, jobs)
	for i := 0; i < jobs; i++ {
		j, err := c.API().CreateJobBody(map[string]any{"name": fmt.Sprintf("failover-%02d", i), "schedule": "*/1 * * * * *",
			"handler": "shell", "params": json.RawMessage(params), "misfire_policy": cluster.MisfireCatchUp})
		if err != nil {
			return err
		}
		ids = append(ids, j.ID)
	}
	if err := createIdleJobs(c, idle); err != nil {
		return err
	}
	start := time.Now().Truncate(time.Second).Add(3 * time.Second)
	time.Sleep(time.Until(start.Add(2 * time.Second))) // warm-up: a few fault-free fires

	var ts []trial
	for k := 0; k < trials; k++ {
		l, err := c.Leader(60*time.Second, -1)
		if err != nil {
			return fmt.Errorf("trial %d: %w", k+1, err)
		}
		offset := time.Duration(rng.Int64N(int64(time.Second)))
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + offset))) // the random kill instant
		tr := trial{leader: c.Replicas[l].ID, killAt: time.Now()}
		c.Kill9(l)
		nl, err := c.Leader(60*time.Second, l)
		if err != nil {
			return fmt.Errorf("trial %d: after killing %s: %w", k+1, tr.leader, err)
		}
		tr.elected = time.Since(tr.killAt)
		// The new leader fires before the old one comes back.
		if err := waitDispatchAfter(c, ids[0], tr.killAt, 60*time.Second); err != nil {
			return fmt.Errorf("trial %d: new leader %s: %w", k+1, c.Replicas[nl].ID, err)
		}
		if err := c.Restart(l, 90*time.Second); err != nil {
			return fmt.Errorf("trial %d: %w", k+1, err)
		}
		if _, err := c.Leader(60*time.Second, -1); err != nil {
			return fmt.Errorf("trial %d: %w", k+1, err)
		}
		fmt.Printf("trial %2d: killed %s at +%03dms, new leader %s after %s\n", k+1, tr.leader,
			tr.killAt.Sub(tr.killAt.Truncate(time.Second)).Milliseconds(), c.Replicas[nl].ID, tr.elected.Round(time.Millisecond))
		ts = append(ts, tr)
		time.Sleep(2 * time.Second) // steady firing under the restored cluster before the next kill
	}
	end := time.Now().Truncate(time.Second).Add(-3 * time.Second)
	// Let the last fires finish before reading.
	time.Sleep(3 * time.Second) // results of the last second's runs arrive

	var dispatched []time.Time
	res := result{Jobs: jobs, Trials: trials, IdleJobs: idle, DB: "SQLite"}
	if db != "" {
		res.DB = strings.SplitN(db, ":", 2)[0]
	}
	for _, id := range ids {
		runs, err := allRuns(c, id)
		if err != nil {
			return err
		}
		seen := map[int64]bool{}
		for _, r := range runs {
			if r.DispatchedAt != nil {
				dispatched = append(dispatched, *r.DispatchedAt)
			}
			if r.Trigger == cluster.TriggerSchedule && !r.ScheduledAt.Before(start) && !r.ScheduledAt.After(end) {
				res.Recorded++
				seen[r.ScheduledAt.Unix()] = true
			}
		}
		for s := start; !s.After(end); s = s.Add(time.Second) {
			res.Expected++
			if !seen[s.Unix()] {
				res.Missing++
			}
		}
	}
	sort.Slice(dispatched, func(i, j int) bool { return dispatched[i].Before(dispatched[j]) })
	var gaps, afters, elects, steady []time.Duration
	for i := range ts {
		k := sort.Search(len(dispatched), func(j int) bool { return dispatched[j].After(ts[i].killAt) })
		if k == 0 || k == len(dispatched) {
			return fmt.Errorf("trial %d: no dispatch on both sides of the kill at %s", i+1, ts[i].killAt)
		}
		ts[i].gap = dispatched[k].Sub(dispatched[k-1])
		ts[i].after = dispatched[k].Sub(ts[i].killAt)
		gaps = append(gaps, ts[i].gap)
		afters = append(afters, ts[i].after)
		elects = append(elects, ts[i].elected)
	}
	for i := 1; i < len(dispatched); i++ {
		if d := dispatched[i].Sub(dispatched[i-1]); d > 100*time.Millisecond {
			steady = append(steady, d)
		}
	}
	res.GapP50, res.GapP99, res.GapMax = benchreport.Percentiles(gaps)
	res.AfterP50, res.AfterP99, res.AfterMax = benchreport.Percentiles(afters)
	res.ElectP50, res.ElectP99, res.ElectMax = benchreport.Percentiles(elects)
	res.Baseline, _, _ = benchreport.Percentiles(steady)
	execs, err := benchreport.CountExecutions(execLog, nil)
	if err != nil {
		return err
	}
	for _, n := range execs {
		res.Executed += n
		if n > 1 {
			res.DuplicatedExecutions += n - 1
		}
	}
	report := render(res)
	fmt.Print(report)
	if out != "" {
		section := "failover"
		if idle > 0 {
			section = "failover-scale"
		}
		return benchreport.UpdateSection(out, section, report)
	}
	return nil
}

// createIdleJobs creates n enabled jobs that fire hourly or daily (every
// other one), through POST /api/v1/jobs/batch, 1,000 per request.
func createIdleJobs(c *harness.Cluster, n int) error {
	if n <= 0 {
		return nil
	}
	began := time.Now()
	params := json.RawMessage(`{"script":"true"}`)
	for from := 0; from < n; from += 1000 {
		jobs := make([]map[string]any, 0, 1000)
		for i := from; i < min(from+1000, n); i++ {
			sched := fmt.Sprintf("0 %d * * * *", i%60) // hourly
			if i%2 == 1 {
				sched = fmt.Sprintf("0 %d %d * * *", i%60, i%24) // daily
			}
			jobs = append(jobs, map[string]any{"name": fmt.Sprintf("idle-%06d", i), "schedule": sched,
				"handler": "shell", "params": params})
		}
		var out map[string]any
		code, err := c.API().Do("POST", "/api/v1/jobs/batch", map[string]any{"jobs": jobs}, &out)
		if err != nil {
			return fmt.Errorf("create idle jobs %d..: %w", from, err)
		}
		if code != 200 && code != 201 {
			return fmt.Errorf("create idle jobs %d..: status %d: %v", from, code, out)
		}
	}
	fmt.Printf("created %d idle jobs in %s\n", n, time.Since(began).Round(time.Millisecond))
	return nil
}

// waitDispatchAfter polls job id's runs until one was dispatched after t.
func waitDispatchAfter(c *harness.Cluster, id int64, t time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		runs, _, err := c.API().Runs(id, 20)
		if err == nil {
			for _, r := range runs {
				if r.DispatchedAt != nil && r.DispatchedAt.After(t) {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond) // poll period
	}
	return fmt.Errorf("no run of job %d dispatched within %s of the kill", id, timeout)
}

// allRuns returns every run of a job, through the API's pages.
func allRuns(c *harness.Cluster, id int64) ([]harness.Run, error) {
	var all []harness.Run
	for page := 1; ; page++ {
		var out struct {
			Items []harness.Run `json:"items"`
			Total int           `json:"total"`
		}
		code, err := c.API().Do("GET", fmt.Sprintf("/api/v1/jobs/%d/runs?page=%d&page_size=500", id, page), nil, &out)
		if err != nil {
			return nil, err
		}
		if code != 200 {
			return nil, fmt.Errorf("runs of job %d: status %d", id, code)
		}
		all = append(all, out.Items...)
		if len(out.Items) == 0 || len(all) >= out.Total {
			return all, nil
		}
	}
}

func render(r result) string {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	var b strings.Builder
	if r.IdleJobs > 0 {
		fmt.Fprintf(&b, "### Leader failover gap with %d more jobs (HA: 3 servers, %s)\n\n", r.IdleJobs, r.DB)
	} else {
		fmt.Fprintf(&b, "### Leader failover gap (HA: 3 servers)\n\n")
	}
	fmt.Fprintf(&b, "Measured %s on %s, commit `%s`.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), benchreport.Machine(), benchreport.RunCommit())
	cmd := fmt.Sprintf("make bench-failover` (`go run ./bench/failover --trials %d --jobs %d", r.Trials, r.Jobs)
	if r.IdleJobs > 0 {
		cmd = fmt.Sprintf("make bench-failover-scale` (`go run ./bench/failover --trials %d --jobs %d --idle-jobs %d --db <%s DSN>",
			r.Trials, r.Jobs, r.IdleJobs, r.DB)
	}
	fmt.Fprintf(&b, "`%s`): `cronix etcd`, three `cronix server` "+
		"replicas sharing one %s database, one node; %d jobs on `*/1 * * * * *` (`CATCH_UP`, handler `shell`). "+
		"Each trial kills the raft leader with SIGKILL at a random sub-second offset, waits for the new leader to fire, "+
		"restarts the killed replica and waits for three replicas agreeing on a leader. The gap is the time between the "+
		"last fire dispatched before the kill and the first dispatched after it (runs' `dispatched_at`); without faults "+
		"it is the tick period.\n\n", cmd, r.DB, r.Jobs)
	if r.IdleJobs > 0 {
		fmt.Fprintf(&b, "Here with `--idle-jobs %d`: that many more enabled jobs on hourly and daily schedules (created "+
			"through `POST /api/v1/jobs/batch` before the first kill), which every new leader loads before it fires "+
			"(issue 12's scale case).\n\n", r.IdleJobs)
	}
	b.WriteString("| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| trials (leader kills) | %d |\n", r.Trials)
	fmt.Fprintf(&b, "| kill -9 → first fire dispatched by the new leader, p50 / p99 / max | %s / %s / %s |\n", ms(r.AfterP50), ms(r.AfterP99), ms(r.AfterMax))
	fmt.Fprintf(&b, "| dispatch gap (last dispatch before the kill → first after) p50 / p99 / max | %s / %s / %s |\n", ms(r.GapP50), ms(r.GapP99), ms(r.GapMax))
	fmt.Fprintf(&b, "| dispatch gap without faults (median) | %s |\n", ms(r.Baseline))
	fmt.Fprintf(&b, "| kill → replicas agree on a new leader p50 / p99 / max | %s / %s / %s |\n", ms(r.ElectP50), ms(r.ElectP99), ms(r.ElectMax))
	fmt.Fprintf(&b, "| fires expected / recorded / missing | %d / %d / %d |\n", r.Expected, r.Recorded, r.Missing)
	fmt.Fprintf(&b, "| handler executions / duplicated | %d / %d |\n\n", r.Executed, r.DuplicatedExecutions)
	return b.String()
}
