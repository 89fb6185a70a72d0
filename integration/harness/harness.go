// Package harness starts real cronix processes and talks to their REST API,
// for the integration tests and the benchmarks.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
)

// Build compiles the cronix binary into dir and returns its path.
func Build(ctx context.Context, dir string) (string, error) {
	return BuildPackage(ctx, filepath.Join(dir, "cronix"), ".")
}

// BuildPackage compiles the main package pkg (relative to the module root,
// e.g. "./plugins/shell/cmd/cronix-plugin-shell") into out and returns out.
// Tests use it to get real plugin and server binaries.
func BuildPackage(ctx context.Context, out, pkg string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// PluginSocketsIn makes the plugins this process starts without a node
// (tests that drive a plugin host directly) create their go-plugin sockets
// in dir/plugin-sockets, so that a socket a killed plugin leaves goes with
// dir, not into the system's temp dir. A node passes its own
// (pluginhost.Options.SocketDir), which wins.
func PluginSocketsIn(dir string) error {
	sock := filepath.Join(dir, "plugin-sockets")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		return fmt.Errorf("plugin socket dir: %w", err)
	}
	return os.Setenv(goplugin.EnvUnixSocketDir, sock)
}

func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the cronix module")
	}
	return filepath.Dir(mod), nil
}

// FreeAddr returns a 127.0.0.1 address with a port nobody listens on now,
// for a process to bind later. The port is picked at random below the
// kernel's ephemeral range (32768-60999 on Linux), so a connection or a
// ":0" listener of another test cannot take it between this call and the
// bind, and never twice in this process, so two addresses handed out here
// never collide.
func FreeAddr() (string, error) {
	freePorts.Lock()
	defer freePorts.Unlock()
	if freePorts.given == nil {
		freePorts.given = map[int]bool{}
	}
	for range 1000 {
		p := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if freePorts.given[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		freePorts.given[p] = true
		return addr, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// The ports FreeAddr picks from, and those it has handed out.
const freePortLow, freePortHigh = 20000, 32000

var freePorts struct {
	sync.Mutex
	given map[int]bool
}

// Proc is a running cronix process.
type Proc struct {
	Cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
	// exitedAt is when Wait returned (set before done is closed).
	exitedAt time.Time
}

// ProcessTempDir, when set, is the TMPDIR of the processes Start runs (env
// can still name another): a node killed with -9 leaves temp files there
// (its plugins' sockets when its data dir is too deep for a socket path,
// the shell plugin's script dir), which a suite removes with it. The test
// process's own temp dir is left alone, so logs a failed test keeps there
// outlive the suite.
var ProcessTempDir string

// Start runs binary with args and extra environment; its output is kept.
func Start(binary string, env []string, args ...string) (*Proc, error) {
	p := &Proc{done: make(chan struct{})}
	p.Cmd = exec.Command(binary, args...)
	p.Cmd.Env = os.Environ()
	if ProcessTempDir != "" {
		p.Cmd.Env = append(p.Cmd.Env, "TMPDIR="+ProcessTempDir)
	}
	p.Cmd.Env = append(p.Cmd.Env, env...)
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	p.Cmd.Stdout = pw
	p.Cmd.Stderr = pw
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s := bufio.NewScanner(pr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			p.mu.Lock()
			p.out.Write(s.Bytes())
			p.out.WriteByte('\n')
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = p.Cmd.Wait()
		p.exitedAt = time.Now()
		_ = pw.Close()
		close(p.done)
	}()
	return p, nil
}

// Output is everything the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitOutput waits until the output matches re and returns the first submatch.
func (p *Proc) WaitOutput(re *regexp.Regexp, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.Output()); m != nil {
			if len(m) > 1 {
				return m[1], nil
			}
			return m[0], nil
		}
		select {
		case <-p.done:
			return "", fmt.Errorf("process exited (%w) before printing %s:\n%s", p.err, re, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no %s within %s:\n%s", re, timeout, p.Output())
}

// Interrupt sends SIGINT (Ctrl-C) and waits for exit. A process still
// there after timeout gets SIGQUIT first, so that its output ends with the
// Go runtime's dump of every goroutine (what its stop was waiting for),
// then its group is killed.
func (p *Proc) Interrupt(timeout time.Duration) error {
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.Quit()
		return fmt.Errorf("process did not exit within %s after SIGINT (its output ends with a goroutine dump, SIGQUIT)", timeout)
	}
}

// Quit ends a running process so that its output ends with the Go
// runtime's dump of every goroutine: SIGQUIT (and SIGCONT, in case it is
// frozen), up to 5 s for it to exit, then its group is killed. A process
// that has exited already is left as it is.
func (p *Proc) Quit() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGQUIT)
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Kill sends SIGKILL to the process only (its plugin children see their
// parent die, as in a crash) and waits for it.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// KillGroup kills the process and everything in its process group.
func (p *Proc) KillGroup() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Client calls a Cronix REST API.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8080).
func NewClient(base string) *Client {
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// WaitHealthy polls /healthz until it answers 200.
func (c *Client) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.HTTP.Get(c.Base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("healthz: %s", resp.Status)
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not healthy within %s: %w", timeout, last)
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Status  string            `json:"status"`
	Checks  map[string]string `json:"checks"`
	Failing []string          `json:"failing"`
}

// Ready fetches /readyz: its status code and body.
func (c *Client) Ready() (int, Readiness, error) {
	var r Readiness
	resp, err := c.HTTP.Get(c.Base + "/readyz")
	if err != nil {
		return 0, r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return resp.StatusCode, r, fmt.Errorf("decoding /readyz: %w", err)
	}
	return resp.StatusCode, r, nil
}

// WaitReady polls /readyz until it answers 200 (every readiness check passes).
func (c *Client) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		code, r, err := c.Ready()
		switch {
		case err != nil:
			last = err
		case code == http.StatusOK:
			return nil
		default:
			last = fmt.Errorf("readyz %d: failing %v: %v", code, r.Failing, r.Checks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %w", timeout, last)
}

// Do sends a JSON request and decodes a JSON reply into out (if non-nil).
// It returns the status code; an error only for transport/decoding faults.
func (c *Client) Do(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding %s %s reply %q: %w", method, path, b, err)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// Login stores a token for username/password.
func (c *Client) Login(username, password string) error {
	var out struct {
		Token string `json:"token"`
	}
	code, err := c.Do(http.MethodPost, "/api/v1/auth/login", map[string]string{"username": username, "password": password}, &out)
	if err != nil {
		return err
	}
	if code != http.StatusOK || out.Token == "" {
		return fmt.Errorf("login: status %d", code)
	}
	c.Token = out.Token
	return nil
}

// Job is the API's job shape (the fields the tests use).
type Job struct {
	ID             int64           `json:"id,omitempty"`
	Name           string          `json:"name"`
	Group          string          `json:"group,omitempty"`
	Schedule       string          `json:"schedule"`
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	Enabled        *bool           `json:"enabled,omitempty"`
}

// Run is the API's run shape.
type Run struct {
	ID              int64      `json:"id"`
	FireID          string     `json:"fire_id"`
	JobID           int64      `json:"job_id"`
	Status          string     `json:"status"`
	ScheduledAt     time.Time  `json:"scheduled_at"`
	DispatchedAt    *time.Time `json:"dispatched_at"`
	StartedAt       *time.Time `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	ExitCode        *int       `json:"exit_code"`
	Node            string     `json:"node"`
	Output          string     `json:"output"`
	OutputTruncated bool       `json:"output_truncated"`
	Message         string     `json:"message"`
	Trigger         string     `json:"trigger"`
	ShardIndex      int        `json:"shard_index"`
	ShardTotal      int        `json:"shard_total"`
	Attempt         int        `json:"attempt"`
}

// CreateJob creates a job and returns it with its id.
func (c *Client) CreateJob(j Job) (Job, error) {
	var out Job
	var e map[string]any
	code, err := c.Do(http.MethodPost, "/api/v1/jobs", j, &out)
	if err != nil {
		return out, err
	}
	if code != http.StatusCreated {
		_, _ = c.Do(http.MethodPost, "/api/v1/jobs", j, &e)
		return out, fmt.Errorf("create job: status %d %v", code, e)
	}
	return out, nil
}

// Runs returns up to pageSize newest runs of a job, and the total.
func (c *Client) Runs(jobID int64, pageSize int) ([]Run, int, error) {
	var out struct {
		Items []Run `json:"items"`
		Total int   `json:"total"`
	}
	code, err := c.Do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs?page=1&page_size=%d", jobID, pageSize), nil, &out)
	if err != nil {
		return nil, 0, err
	}
	if code != http.StatusOK {
		return nil, 0, fmt.Errorf("runs: status %d", code)
	}
	return out.Items, out.Total, nil
}

// CreateJobBody creates a job from an arbitrary JSON body (for the fields
// Job does not carry, such as route_strategy or schedule_type).
func (c *Client) CreateJobBody(body map[string]any) (Job, error) {
	var out Job
	var raw json.RawMessage
	code, err := c.Do(http.MethodPost, "/api/v1/jobs", body, &raw)
	if err != nil {
		return out, err
	}
	if code != http.StatusCreated {
		return out, fmt.Errorf("create job %v: status %d %s", body["name"], code, raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("decoding created job: %w", err)
	}
	return out, nil
}
