package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/store"
)

// spreadWorkload runs rate http jobs every second on cfg.spreadNodes node
// agents of one group: the standalone's own node plus spreadNodes-1
// "cronix node" processes joining its embedded etcd (as README describes),
// jobs routed with cfg.spreadRoute. Besides the lateness it reports each
// node's share of the window's runs and the largest deviation from an
// even share, over the window and within one second.
func spreadWorkload(ctx context.Context, cfg config, rate int) (row, error) {
	rg, err := newRig(cfg, "spread")
	if err != nil {
		return row{}, err
	}
	defer rg.close(cfg)
	rec, dir, dataDir, a, s := rg.rec, rg.dir, rg.dataDir, rg.a, rg.s
	token, err := os.ReadFile(filepath.Join(dataDir, "node-token"))
	if err != nil {
		return row{}, fmt.Errorf("node token: %w", err)
	}
	etcdPW, err := os.ReadFile(filepath.Join(dataDir, "etcd-root-password"))
	if err != nil {
		return row{}, fmt.Errorf("etcd password: %w", err)
	}
	env := []string{"CRONIX_NODE_TOKEN=" + strings.TrimSpace(string(token)), "CRONIX_ETCD_USERNAME=root",
		"CRONIX_ETCD_PASSWORD=" + strings.TrimSpace(string(etcdPW)), "CRONIX_LOG_LEVEL=" + cfg.logLevel}
	var nodes []*harness.Proc
	defer func() {
		for i, n := range nodes {
			n.KillGroup()
			if cfg.keep { // beside standalone.log: a slow second is explained there, if anywhere
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", i+1)), []byte(n.Output()), 0o600)
			}
		}
	}()
	for i := 1; i < cfg.spreadNodes; i++ {
		p, err := harness.Start(cfg.binary, env, "node", "--etcd-endpoints", "http://"+a.etcdClient,
			"--group", "default", "--data-dir", filepath.Join(dir, fmt.Sprintf("node-%d", i)), "--http-allow-loopback")
		if err != nil {
			return row{}, fmt.Errorf("starting node %d: %w", i, err)
		}
		nodes = append(nodes, p)
	}
	online := func() bool {
		var out struct {
			Items []struct {
				Group string `json:"group"`
			} `json:"items"`
		}
		code, err := s.api.Do(http.MethodGet, "/api/v1/nodes", nil, &out)
		n := 0
		for _, it := range out.Items {
			if it.Group == "default" {
				n++
			}
		}
		return err == nil && code == http.StatusOK && n >= cfg.spreadNodes
	}
	if !waitUntil(ctx, time.Now().Add(time.Minute), 100*time.Millisecond, online) {
		return row{}, fmt.Errorf("%d nodes of group default not online within a minute", cfg.spreadNodes)
	}
	created := time.Now()
	ids, err := createJobsBatch(ctx, s.api, rate, cfg.batchWorkers, func(i int) map[string]any {
		b := everySecond(fmt.Sprintf("spread-%05d", i), "http", map[string]any{"url": rec.URL(fmt.Sprintf("/j/%d", i))})
		b["route_strategy"] = cfg.spreadRoute
		return b
	})
	if err != nil {
		return row{}, err
	}
	fmt.Printf("spread %d/s on %d nodes: created %d jobs in %s\n", rate, cfg.spreadNodes, rate, time.Since(created).Round(time.Millisecond))
	start, end := window(cfg, cfg.seconds)
	var samplers []*sampler
	for _, n := range nodes {
		samplers = append(samplers, startSampler(ctx, n.Cmd.Process.Pid, time.Second, nil))
	}
	r, err := measureHTTP(ctx, cfg, fmt.Sprintf("spread-%d", rate), s, rec, ids, cfg.seconds)
	if err != nil {
		return row{}, err
	}
	for i, smp := range samplers {
		res := windowResources(smp.stop(), start, end, cfg.clkTck)
		r.CPU += res.CPU
		r.PeakRSS += res.PeakRSS
		r.Notes = append(r.Notes, fmt.Sprintf("node process %d: CPU %.0f%%, peak RSS %s (added to the row's CPU and tree RSS)", i+1, res.CPU, mib(res.PeakRSS)))
	}
	shares, err := nodeShares(ctx, dataDir, ids, start, end)
	if err != nil {
		return row{}, err
	}
	r.Notes = append(r.Notes, shares)
	r.Workload = fmt.Sprintf("spread: %d nodes, one group, %s", cfg.spreadNodes, cfg.spreadRoute)
	r.Rate = fmt.Sprintf("%d/s", rate)
	return r, nil
}

// nodeShares counts the window's runs per node from the stopped
// standalone's SQLite file and describes the split.
func nodeShares(ctx context.Context, dataDir string, ids []int64, start, end time.Time) (string, error) {
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dataDir, "cronix.db"))
	if err != nil {
		return "", fmt.Errorf("opening the SQLite store: %w", err)
	}
	defer st.Close()
	perNode := map[string]int{}
	perSecond := map[int64]map[string]int{}
	total := 0
	for _, id := range ids {
		rs, _, err := st.ListRuns(ctx, id, store.Page{Page: 1, PageSize: 4 * (int(end.Sub(start)/time.Second) + 240)})
		if err != nil {
			return "", fmt.Errorf("runs of job %d: %w", id, err)
		}
		for _, r := range rs {
			if r.ScheduledAt.Before(start) || !r.ScheduledAt.Before(end) {
				continue
			}
			perNode[r.Node]++
			sec := r.ScheduledAt.Unix()
			if perSecond[sec] == nil {
				perSecond[sec] = map[string]int{}
			}
			perSecond[sec][r.Node]++
			total++
		}
	}
	return describeShares(perNode, total) + "; " + describeSecondShares(perSecond, perNode), nil
}

// describeSecondShares renders the largest deviation from an even share
// within one scheduled second (among the nodes of the whole window): an
// even split over the window can hide each second's fires all going to
// one node.
func describeSecondShares(perSecond map[int64]map[string]int, nodes map[string]int) string {
	if len(perSecond) == 0 || len(nodes) == 0 {
		return "per second: none recorded"
	}
	secs := make([]int64, 0, len(perSecond))
	for sec := range perSecond {
		secs = append(secs, sec)
	}
	slices.Sort(secs)
	names := slices.Sorted(maps.Keys(nodes))
	worst, worstAt := 0.0, secs[0]
	for _, sec := range secs {
		counts := perSecond[sec]
		total := 0
		for _, c := range counts {
			total += c
		}
		even := float64(total) / float64(len(nodes))
		for _, n := range names {
			dev := (float64(counts[n]) - even) / even * 100
			if math.Abs(dev) > math.Abs(worst) {
				worst, worstAt = dev, sec
			}
		}
	}
	return fmt.Sprintf("within one second the largest deviation from an even share %+.1f%% (at %s, of %d seconds)",
		worst, time.Unix(worstAt, 0).UTC().Format("15:04:05"), len(perSecond))
}

// describeShares renders runs per node and the largest deviation from an
// even split, in percent of the even share.
func describeShares(perNode map[string]int, total int) string {
	if total == 0 || len(perNode) == 0 {
		return "runs per node: none recorded"
	}
	names := make([]string, 0, len(perNode))
	for n := range perNode {
		names = append(names, n)
	}
	sort.Strings(names)
	even := float64(total) / float64(len(perNode))
	worst := 0.0
	parts := make([]string, 0, len(names))
	for _, n := range names {
		c := perNode[n]
		dev := (float64(c) - even) / even * 100
		if math.Abs(dev) > math.Abs(worst) {
			worst = dev
		}
		label := n
		if len(label) > 8 {
			label = label[:8]
		}
		if label == "" {
			label = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", label, c))
	}
	return fmt.Sprintf("runs per node: %s; largest deviation from an even share %+.1f%% (acceptance: within ±10%%)",
		strings.Join(parts, ", "), worst)
}
