package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Raft is what the raft families read at scrape time.
type Raft interface {
	// State is raft's state: Follower, Candidate, Leader or Shutdown.
	State() string
	// Term is the current term.
	Term() uint64
	// LeaderChanges counts the leader changes this replica observed.
	LeaderChanges() uint64
}

// raftStates are the values of cronix_raft_state's state label.
var raftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}

type raftCollector struct {
	r       Raft
	state   *prometheus.Desc
	term    *prometheus.Desc
	changes *prometheus.Desc
}

// RegisterRaft adds cronix_raft_state{state} (1 for the current state),
// cronix_raft_term and cronix_raft_leader_changes_total, read from r.
func (m *Metrics) RegisterRaft(r Raft) error {
	return m.Register(&raftCollector{
		r: r,
		state: prometheus.NewDesc(namespace+"_raft_state", "Raft state of this replica: 1 for the current one.",
			[]string{"state"}, nil),
		term: prometheus.NewDesc(namespace+"_raft_term", "Current raft term.", nil, nil),
		changes: prometheus.NewDesc(namespace+"_raft_leader_changes_total",
			"Leader changes this replica observed (a new leader, or none).", nil, nil),
	})
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.term
	ch <- c.changes
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.r.State()
	for _, s := range raftStates {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s)
	}
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(c.r.Term()))
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(c.r.LeaderChanges()))
}

// NodeCounter counts the registered nodes by status (read from etcd).
type NodeCounter func(ctx context.Context) (map[string]int, error)

// nodeStatuses always appear in cronix_nodes, at zero when no node has them.
var nodeStatuses = []string{"online", "draining"}

type nodesCollector struct {
	count   NodeCounter
	timeout time.Duration
	nodes   *prometheus.Desc
	errors  prometheus.Counter
}

// RegisterNodes adds cronix_nodes{status}, counted by count at each scrape
// (bounded by a 2 s timeout; a failed count is skipped and counted in
// cronix_nodes_count_errors_total).
func (m *Metrics) RegisterNodes(count NodeCounter) error {
	c := &nodesCollector{
		count:   count,
		timeout: 2 * time.Second,
		nodes:   prometheus.NewDesc(namespace+"_nodes", "Registered nodes by status.", []string{"status"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "nodes_count_errors_total",
			Help: "Scrapes at which the nodes could not be counted."}),
	}
	return m.Register(c)
}

func (c *nodesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.nodes
	c.errors.Describe(ch)
}

func (c *nodesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		c.errors.Inc()
	} else {
		for _, s := range nodeStatuses {
			if _, ok := counts[s]; !ok {
				counts[s] = 0
			}
		}
		for s, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(n), s)
		}
	}
	c.errors.Collect(ch)
}
