package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClusterConfig describes an HA deployment started from the real binary:
// one "cronix etcd", Replicas "cronix server" processes sharing one
// database and one raft group, and the nodes added with StartNode.
type ClusterConfig struct {
	// Binary is the cronix binary.
	Binary string
	// Dir holds every process's data directory (and the SQLite file).
	Dir string
	// Replicas is the number of servers (default 3).
	Replicas int
	// DSN is the shared database; "" = a SQLite file in Dir.
	DSN string
	// AdminPassword is given to every replica (CRONIX_ADMIN_PASSWORD).
	AdminPassword string
	// NodeToken is shared by the servers and the nodes.
	NodeToken string
	// Env is added to every process's environment (e.g. CRONIX_LOG_LEVEL=warn).
	Env []string
	// EtcdPassword is the root password of the cluster's etcd, which runs
	// with auth on; servers and nodes log in as root. Default: generated.
	EtcdPassword string
}

// Replica is one server of a Cluster; Proc is nil while it is down.
type Replica struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	DataDir  string
	// API is logged in as admin after each start.
	API *Client

	mu      sync.Mutex
	proc    *Proc
	stopped bool   // SIGSTOPped
	logs    string // output of earlier incarnations
	args    []string
}

// Proc is the replica's current process (nil when down).
func (r *Replica) Proc() *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Up reports whether the replica's process runs and is not SIGSTOPped.
func (r *Replica) Up() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil || r.stopped {
		return false
	}
	select {
	case <-r.proc.Done():
		return false
	default:
		return true
	}
}

// Output is everything every incarnation of the replica printed.
func (r *Replica) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.logs
	if r.proc != nil {
		out += r.proc.Output() + exitNote(r.proc)
	}
	return out
}

// exitNote tells how p exited ("" while it runs).
func exitNote(p *Proc) string {
	select {
	case <-p.Done():
		return fmt.Sprintf("---- exited at %s: %v ----\n", p.exitedAt.Format(time.StampMilli), p.err)
	default:
		return ""
	}
}

// Cluster is a running HA deployment.
type Cluster struct {
	cfg      ClusterConfig
	Etcd     *Proc
	EtcdURL  string
	Replicas []*Replica

	mu    sync.Mutex
	nodes []*Proc
}

var (
	etcdRunning   = regexp.MustCompile(`etcd is running: (\S+)`)
	serverRunning = regexp.MustCompile(`Cronix server \S+ is running: (\S+)`)
	nodeRunningRe = regexp.MustCompile(`node (\S+) is running`)
)

// StartCluster starts etcd and every replica, and returns once each replica
// is healthy, logged in, and the cluster has a leader.
func StartCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.DSN == "" {
		cfg.DSN = "sqlite://" + filepath.Join(cfg.Dir, "cronix.db")
	}
	if cfg.EtcdPassword == "" {
		cfg.EtcdPassword = fmt.Sprintf("etcd-%d", time.Now().UnixNano())
	}
	c := &Cluster{cfg: cfg}
	client, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	c.Etcd, err = Start(cfg.Binary, append([]string{"CRONIX_ETCD_ROOT_PASSWORD=" + cfg.EtcdPassword}, cfg.Env...), "etcd", "--data-dir", filepath.Join(cfg.Dir, "etcd"),
		"--client-addr", client, "--peer-addr", peer)
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	if c.EtcdURL, err = c.Etcd.WaitOutput(etcdRunning, 60*time.Second); err != nil {
		c.Close()
		return nil, err
	}
	var peers []string
	for i := 0; i < cfg.Replicas; i++ {
		raft, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		httpAddr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		r := &Replica{ID: fmt.Sprintf("s%d", i+1), RaftAddr: raft, HTTPAddr: httpAddr,
			DataDir: filepath.Join(cfg.Dir, fmt.Sprintf("s%d", i+1))}
		r.API = NewClient("http://" + httpAddr)
		c.Replicas = append(c.Replicas, r)
		peers = append(peers, r.ID+"="+raft)
	}
	for _, r := range c.Replicas {
		r.args = []string{"server", "--id", r.ID, "--raft-addr", r.RaftAddr, "--raft-peers", strings.Join(peers, ","),
			"--etcd-endpoints", c.EtcdURL, "--db", cfg.DSN, "--http-addr", r.HTTPAddr, "--data-dir", r.DataDir,
			"--node-token", cfg.NodeToken}
	}
	// All at once: a replica may need a quorum before it reports running.
	for i := range c.Replicas {
		if err := c.Launch(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range c.Replicas {
		if err := c.WaitReplica(i, 90*time.Second); err != nil {
			c.Close()
			return nil, err
		}
	}
	if _, err := c.Leader(60*time.Second, -1); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Launch starts replica i's process without waiting for it.
func (c *Cluster) Launch(i int) error {
	r := c.Replicas[i]
	env := append([]string{"CRONIX_ADMIN_PASSWORD=" + c.cfg.AdminPassword}, c.EtcdEnv()...)
	env = append(env, c.cfg.Env...)
	p, err := Start(c.cfg.Binary, env, r.args...)
	if err != nil {
		return fmt.Errorf("starting replica %s: %w", r.ID, err)
	}
	r.mu.Lock()
	if r.proc != nil {
		r.logs += r.proc.Output() + exitNote(r.proc) +
			fmt.Sprintf("---- %s restarted at %s ----\n", r.ID, time.Now().Format(time.StampMilli))
	}
	r.proc, r.stopped = p, false
	r.mu.Unlock()
	return nil
}

// WaitReplica waits until replica i printed that it runs, answers healthz
// and accepts the admin login.
func (c *Cluster) WaitReplica(i int, timeout time.Duration) error {
	r := c.Replicas[i]
	p := r.Proc()
	if p == nil {
		return fmt.Errorf("replica %s is not started", r.ID)
	}
	if _, err := p.WaitOutput(serverRunning, timeout); err != nil {
		return fmt.Errorf("replica %s: %w", r.ID, err)
	}
	if err := r.API.WaitHealthy(timeout); err != nil {
		return fmt.Errorf("replica %s: %w", r.ID, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := r.API.Login("admin", c.cfg.AdminPassword)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s: %w", r.ID, err)
		}
		select {
		case <-p.Done():
			return fmt.Errorf("replica %s exited:\n%s", r.ID, p.Output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Restart launches replica i again and waits for it.
func (c *Cluster) Restart(i int, timeout time.Duration) error {
	if err := c.Launch(i); err != nil {
		return err
	}
	return c.WaitReplica(i, timeout)
}

// Kill9 kills replica i with SIGKILL (a crash) and waits for it to exit.
func (c *Cluster) Kill9(i int) {
	if p := c.Replicas[i].Proc(); p != nil {
		p.KillGroup()
	}
}

// Interrupt stops replica i with SIGINT (graceful) and waits.
func (c *Cluster) Interrupt(i int, timeout time.Duration) error {
	if p := c.Replicas[i].Proc(); p != nil {
		return p.Interrupt(timeout)
	}
	return nil
}

// Stop freezes replica i with SIGSTOP.
func (c *Cluster) Stop(i int) error {
	r := c.Replicas[i]
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return fmt.Errorf("replica %s is not running", r.ID)
	}
	r.stopped = true
	return syscall.Kill(r.proc.Cmd.Process.Pid, syscall.SIGSTOP)
}

// Cont wakes replica i with SIGCONT.
func (c *Cluster) Cont(i int) error {
	r := c.Replicas[i]
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return fmt.Errorf("replica %s is not running", r.ID)
	}
	r.stopped = false
	return syscall.Kill(r.proc.Cmd.Process.Pid, syscall.SIGCONT)
}

// ClusterInfo is the reply of GET /api/v1/cluster.
type ClusterInfo struct {
	This   json.RawMessage `json:"this"`
	Leader struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	} `json:"leader"`
	Term     uint64            `json:"term"`
	State    string            `json:"state"`
	Replicas []json.RawMessage `json:"replicas"`
}

// ThisID is the id of the replica that answered (This is an id or an
// object with an id).
func (ci ClusterInfo) ThisID() string {
	var s string
	if json.Unmarshal(ci.This, &s) == nil {
		return s
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(ci.This, &o)
	return o.ID
}

// Info asks replica i for its view of the cluster, with a short timeout.
func (c *Cluster) Info(i int) (ClusterInfo, error) {
	r := c.Replicas[i]
	cl := &Client{Base: r.API.Base, Token: r.API.Token, HTTP: &http.Client{Timeout: 2 * time.Second}}
	var ci ClusterInfo
	code, err := cl.Do(http.MethodGet, "/api/v1/cluster", nil, &ci)
	if err != nil {
		return ci, err
	}
	if code != http.StatusOK {
		return ci, fmt.Errorf("GET /api/v1/cluster on %s: status %d", r.ID, code)
	}
	return ci, nil
}

// Index is the index of the replica with id, or -1.
func (c *Cluster) Index(id string) int {
	for i, r := range c.Replicas {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// Leader waits until every up replica except exclude (-1 = none) names the
// same leader, that leader is up and not excluded, and it agrees; it
// returns the leader's index.
func (c *Cluster) Leader(timeout time.Duration, exclude int) (int, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		idx, err := c.leaderOnce(exclude)
		if err == nil {
			return idx, nil
		}
		last = err
		if time.Now().After(deadline) {
			var up []string
			for _, r := range c.Replicas {
				up = append(up, fmt.Sprintf("%s up=%t", r.ID, r.Up()))
			}
			return -1, fmt.Errorf("no agreed leader within %s (%s): %w", timeout, strings.Join(up, ", "), last)
		}
		time.Sleep(100 * time.Millisecond) // poll period
	}
}

func (c *Cluster) leaderOnce(exclude int) (int, error) {
	leader, asked := "", 0
	for i, r := range c.Replicas {
		if i == exclude || !r.Up() {
			continue
		}
		ci, err := c.Info(i)
		if err != nil {
			return -1, err
		}
		if ci.Leader.ID == "" {
			return -1, fmt.Errorf("%s knows no leader", r.ID)
		}
		if leader != "" && ci.Leader.ID != leader {
			return -1, fmt.Errorf("%s names leader %s, another replica %s", r.ID, ci.Leader.ID, leader)
		}
		leader = ci.Leader.ID
		asked++
	}
	if asked == 0 {
		return -1, errors.New("no replica is up")
	}
	idx := c.Index(leader)
	if idx < 0 || idx == exclude || !c.Replicas[idx].Up() {
		return -1, fmt.Errorf("leader %s is not an up replica", leader)
	}
	ci, err := c.Info(idx)
	if err != nil {
		return -1, err
	}
	if ci.ThisID() != leader || ci.State != "Leader" {
		return -1, fmt.Errorf("%s is named leader but is %s", leader, ci.State)
	}
	return idx, nil
}

// API returns the client of the first up replica (any replica serves the
// API: they share the database).
func (c *Cluster) API() *Client {
	for _, r := range c.Replicas {
		if r.Up() {
			return r.API
		}
	}
	return c.Replicas[0].API
}

// EtcdEnv is the environment that logs a server or node in to the
// cluster's etcd (as root).
func (c *Cluster) EtcdEnv() []string {
	return []string{"CRONIX_ETCD_USERNAME=root", "CRONIX_ETCD_PASSWORD=" + c.cfg.EtcdPassword}
}

// EtcdPassword is the root password of the cluster's etcd.
func (c *Cluster) EtcdPassword() string { return c.cfg.EtcdPassword }

// StartNode starts "cronix node" in group against the cluster's etcd and
// returns it with the uuid it printed.
func (c *Cluster) StartNode(dataDir, group string, extra ...string) (*Proc, string, error) {
	args := append([]string{"node", "--data-dir", dataDir, "--etcd-endpoints", c.EtcdURL, "--group", group}, extra...)
	env := append([]string{"CRONIX_NODE_TOKEN=" + c.cfg.NodeToken}, c.EtcdEnv()...)
	env = append(env, c.cfg.Env...)
	p, err := Start(c.cfg.Binary, env, args...)
	if err != nil {
		return nil, "", err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, p)
	c.mu.Unlock()
	uuid, err := p.WaitOutput(nodeRunningRe, 60*time.Second)
	if err != nil {
		p.KillGroup()
		return nil, "", err
	}
	return p, uuid, nil
}

// Close kills every process still running (nodes, replicas, etcd).
func (c *Cluster) Close() {
	kill := func(p *Proc) {
		if p == nil {
			return
		}
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGCONT)
		select {
		case <-p.Done():
		default:
			p.KillGroup()
		}
	}
	c.mu.Lock()
	nodes := c.nodes
	c.mu.Unlock()
	for _, p := range nodes {
		kill(p)
	}
	for _, r := range c.Replicas {
		kill(r.Proc())
	}
	kill(c.Etcd)
}

// TB is the part of testing.TB that CloseKeepingLogs uses.
type TB interface {
	Failed() bool
	Logf(format string, args ...any)
}

// CloseKeepingLogs closes the cluster at the end of test t. When t failed,
// the replicas still running are first quit with a goroutine dump (Quit),
// so their logs show what each was doing, and every process's output is
// written to <system temp dir>/<name> (outside the test's own dirs, which
// are removed), whose path t logs.
func (c *Cluster) CloseKeepingLogs(t TB, name string) {
	if !t.Failed() {
		c.Close()
		return
	}
	var wg sync.WaitGroup
	for _, r := range c.Replicas {
		if p := r.Proc(); p != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Quit()
			}()
		}
	}
	wg.Wait()
	c.Close()
	logs := filepath.Join(os.TempDir(), name)
	if err := c.Dump(logs); err != nil {
		t.Logf("writing the process logs to %s: %v", logs, err)
		return
	}
	t.Logf("process logs (replicas end with a goroutine dump) in %s", logs)
}

// Dump writes every process's output into dir (for a failed test or run).
func (c *Cluster) Dump(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range c.Replicas {
		if err := os.WriteFile(filepath.Join(dir, r.ID+".log"), []byte(r.Output()), 0o644); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.nodes {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)), []byte(p.Output()), 0o644); err != nil {
			return err
		}
	}
	if c.Etcd != nil {
		return os.WriteFile(filepath.Join(dir, "etcd.log"), []byte(c.Etcd.Output()), 0o644)
	}
	return nil
}
