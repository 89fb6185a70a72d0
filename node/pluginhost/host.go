// Package pluginhost is the node's plugin manager: it starts the handler
// plugins (go-plugin processes speaking pluginapi's gRPC protocol), learns
// their handlers' names, versions and params schemas, and runs jobs
// through them.
//
// A plugin that fails to start, fails its SHA-256 check or fails to answer
// Info is logged with its name and skipped; the node runs with the others.
// One plugin process serves any number of concurrent runs. When a plugin
// process dies (crash, kill -9), the runs in flight on it fail with an error
// naming it, and the next run of its handler starts a fresh process, so a
// handler cannot take the node down. Stop kills every plugin.
package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/hclogslog"
	"github.com/cronix/cronix/pluginapi"
)

const (
	// startTimeout bounds a plugin's start (process up and handshake done).
	startTimeout = 30 * time.Second
	// infoTimeout bounds the Info call that completes a plugin's start.
	infoTimeout = 10 * time.Second
	// Restart backoff: after a failed restart, runs of the plugin fail at
	// once for this long, doubling up to the max, so a plugin that cannot
	// start does not stall every run.
	minRestartBackoff = time.Second
	maxRestartBackoff = 30 * time.Second
)

// Spec configures one plugin.
type Spec struct {
	// Name names the plugin in logs and errors; normally the name of the
	// handler it serves.
	Name string
	// Cmd is the argv that starts the plugin, e.g.
	// {"/usr/lib/cronix/plugins/cronix-plugin-http"} or, for a built-in,
	// {"/usr/bin/cronix", "plugin", "shell"}.
	Cmd []string
	// SHA256 is the optional hex SHA-256 of the Cmd[0] executable; when set,
	// a plugin whose executable does not match is not started.
	SHA256 string
	// Env holds extra "KEY=value" environment variables for the plugin
	// process, on top of the node's environment (they win over same-named
	// ones), e.g. the http handler's CRONIX_HTTP_ALLOW_LOOPBACK=1.
	Env []string
}

// ErrUnknownHandler is returned by Run and Validate for a handler no loaded
// plugin serves.
var ErrUnknownHandler = errors.New("unknown handler")

// ErrStopped is returned by Run and Validate after Stop.
var ErrStopped = errors.New("plugin host stopped")

// Host runs a node's plugins. Create it with New, then Start it.
type Host struct {
	logger *slog.Logger
	specs  []Spec

	mu       sync.RWMutex
	byName   map[string]*managed // loaded plugins by handler name
	failures []error
	started  bool
	stopped  bool
	spawner  *spawner
}

// New returns a Host for the plugins of specs; nothing starts before Start.
func New(logger *slog.Logger, specs []Spec) *Host {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Host{
		logger: logger.With("component", "pluginhost"),
		specs:  slices.Clone(specs),
		byName: map[string]*managed{},
	}
}

// Start launches every plugin and asks each for its handler's Info. A
// plugin that cannot be loaded is logged (naming it), recorded in Failures
// and skipped. Start fails only when ctx ends or the Host was already
// started or stopped.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.started || h.stopped {
		h.mu.Unlock()
		return errors.New("pluginhost: Start called twice or after Stop")
	}
	h.started = true
	h.spawner = newSpawner()
	h.mu.Unlock()

	for _, spec := range h.specs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pluginhost: starting plugins: %w", err)
		}
		if err := h.load(ctx, spec); err != nil {
			h.logger.Error("plugin not loaded", "plugin", spec.Name, "cmd", spec.Cmd, "err", err)
			h.mu.Lock()
			h.failures = append(h.failures, err)
			h.mu.Unlock()
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pluginhost: starting plugins: %w", err)
	}
	return nil
}

func (h *Host) load(ctx context.Context, spec Spec) error {
	m, err := newManaged(h.logger, h.spawner, spec)
	if err != nil {
		return fmt.Errorf("plugin %q: %w", spec.Name, err)
	}
	info, err := m.start(ctx)
	if err != nil {
		return fmt.Errorf("plugin %q: %w", spec.Name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		m.stop()
		return fmt.Errorf("plugin %q: %w", spec.Name, ErrStopped)
	}
	if other, dup := h.byName[info.Name]; dup {
		m.stop()
		return fmt.Errorf("plugin %q: handler %q is already served by plugin %q", spec.Name, info.Name, other.spec.Name)
	}
	h.byName[info.Name] = m
	if info.Name != spec.Name {
		h.logger.Warn("plugin serves a handler of another name", "plugin", spec.Name, "handler", info.Name)
	}
	h.logger.Info("plugin loaded", "plugin", spec.Name, "handler", info.Name, "version", info.Version)
	return nil
}

// Stop kills every plugin process and waits for them. Runs in flight fail.
// It is idempotent.
func (h *Host) Stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	plugins := make([]*managed, 0, len(h.byName))
	for _, m := range h.byName {
		plugins = append(plugins, m)
	}
	sp := h.spawner
	h.mu.Unlock()

	var wg sync.WaitGroup
	for _, m := range plugins {
		wg.Go(m.stop)
	}
	wg.Wait()
	if sp != nil {
		sp.close()
	}
}

// Failures are the errors of the plugins Start could not load, each naming
// its plugin.
func (h *Host) Failures() []error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return slices.Clone(h.failures)
}

// Handlers are the name and version of every loaded handler, sorted by
// name, for the node's registration record.
func (h *Host) Handlers() []cluster.PluginInfo {
	infos := h.Infos()
	out := make([]cluster.PluginInfo, len(infos))
	for i, info := range infos {
		out[i] = cluster.PluginInfo{Name: info.Name, Version: info.Version}
	}
	return out
}

// Infos are the Info (with params schema) of every loaded handler, sorted
// by name.
func (h *Host) Infos() []pluginapi.Info {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]pluginapi.Info, 0, len(h.byName))
	for _, m := range h.byName {
		out = append(out, m.currentInfo())
	}
	slices.SortFunc(out, func(a, b pluginapi.Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (h *Host) lookup(handler string) (*managed, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.stopped {
		return nil, ErrStopped
	}
	m, ok := h.byName[handler]
	if !ok {
		return nil, fmt.Errorf("pluginhost: %w %q", ErrUnknownHandler, handler)
	}
	return m, nil
}

// Run runs req through the named handler, streaming its output into out.
// ctx's deadline is the job timeout and cancelling ctx kills the run. When
// the call fails, Run returns a failed Result along with the error: for a
// timeout or kill the error wraps ctx's error (Result.Message "timeout" or
// "killed"); when the plugin process died the error names the plugin and
// wraps pluginapi.ErrPluginExited, and the next Run restarts the plugin.
// A handler's own error keeps its pluginapi kind.
func (h *Host) Run(ctx context.Context, handler string, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	m, err := h.lookup(handler)
	if err != nil {
		return failed(err), err
	}
	hd, client, err := m.get(ctx)
	if err != nil {
		return failed(err), err
	}
	res, err := hd.Run(ctx, req, out)
	if err != nil {
		if err := m.exited(client, err); err != nil {
			return failed(err), err
		}
	}
	return res, err
}

// Validate checks params with the named handler.
func (h *Host) Validate(ctx context.Context, handler string, params json.RawMessage) error {
	m, err := h.lookup(handler)
	if err != nil {
		return err
	}
	hd, client, err := m.get(ctx)
	if err != nil {
		return err
	}
	err = hd.Validate(ctx, params)
	if err != nil {
		if err := m.exited(client, err); err != nil {
			return err
		}
	}
	return err
}

func failed(err error) pluginapi.Result {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "timeout"
	case errors.Is(err, context.Canceled):
		msg = "killed"
	}
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: msg}
}

// managed is one configured plugin and its current process.
type managed struct {
	spec     Spec
	logger   *slog.Logger
	spawner  *spawner
	checksum []byte

	mu      sync.Mutex
	client  *goplugin.Client // nil when no process runs
	handler pluginapi.Handler
	info    pluginapi.Info
	stopped bool
	// After a failed restart: the error, and no new attempt before retryAt.
	restartErr error
	retryAt    time.Time
	backoff    time.Duration
}

func newManaged(logger *slog.Logger, sp *spawner, spec Spec) (*managed, error) {
	if spec.Name == "" {
		return nil, errors.New("spec has no name")
	}
	if len(spec.Cmd) == 0 || spec.Cmd[0] == "" {
		return nil, errors.New("spec has no command")
	}
	m := &managed{spec: spec, logger: logger.With("plugin", spec.Name), spawner: sp}
	if spec.SHA256 != "" {
		sum, err := hex.DecodeString(spec.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("SHA256 %q is not a hex SHA-256", spec.SHA256)
		}
		m.checksum = sum
	}
	return m, nil
}

func (m *managed) currentInfo() pluginapi.Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info
}

// start launches the first process.
func (m *managed) start(ctx context.Context) (pluginapi.Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.launchLocked(ctx); err != nil {
		return pluginapi.Info{}, err
	}
	return m.info, nil
}

// launchLocked starts a process, connects, and asks for Info.
func (m *managed) launchLocked(ctx context.Context) error {
	cmd := exec.Command(m.spec.Cmd[0], m.spec.Cmd[1:]...)
	setParentDeathSignal(cmd)
	cfg := pluginapi.ClientConfig(cmd)
	if len(m.spec.Env) > 0 {
		// go-plugin would append the node's environment after ours, so
		// ours could not override it; give it the merged list instead.
		cmd.Env = append(os.Environ(), m.spec.Env...)
		cfg.SkipHostEnv = true
	}
	cfg.Logger = hclogslog.New(m.logger, "")
	cfg.StartTimeout = startTimeout
	if m.checksum != nil {
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: m.checksum, Hash: sha256.New()}
	}
	client := goplugin.NewClient(cfg)
	var (
		hd  pluginapi.Handler
		err error
	)
	m.spawner.do(func() { hd, err = pluginapi.Dispense(client) }) // forks the process
	if err != nil {
		client.Kill()
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return fmt.Errorf("checksum of %s does not match the configured SHA-256: %w", m.spec.Cmd[0], err)
		}
		return fmt.Errorf("starting %s: %w", m.spec.Cmd[0], err)
	}
	infoCtx, cancel := context.WithTimeout(ctx, infoTimeout)
	info, err := hd.Info(infoCtx)
	cancel()
	if err != nil {
		client.Kill()
		return fmt.Errorf("asking for its handler's info: %w", err)
	}
	if info.Name == "" {
		client.Kill()
		return errors.New("its handler has no name")
	}
	if m.info.Name != "" && info.Name != m.info.Name {
		client.Kill()
		return fmt.Errorf("restarted plugin serves handler %q instead of %q", info.Name, m.info.Name)
	}
	m.client, m.handler, m.info = client, hd, info
	return nil
}

// get returns the handler of a running process, restarting the plugin when
// its process has exited.
func (m *managed) get(ctx context.Context) (pluginapi.Handler, *goplugin.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil, nil, ErrStopped
	}
	if m.client != nil && !m.client.Exited() {
		return m.handler, m.client, nil
	}
	if m.client != nil {
		m.client.Kill() // reap what is left
		m.client = nil
	}
	if m.restartErr != nil && time.Now().Before(m.retryAt) {
		return nil, nil, fmt.Errorf("plugin %q is down and could not be restarted: %w", m.spec.Name, m.restartErr)
	}
	m.logger.Warn("plugin process is not running; restarting it")
	if err := m.launchLocked(ctx); err != nil {
		m.backoff = min(max(2*m.backoff, minRestartBackoff), maxRestartBackoff)
		m.restartErr, m.retryAt = err, time.Now().Add(m.backoff)
		m.logger.Error("plugin restart failed", "err", err, "retry_in", m.backoff)
		return nil, nil, fmt.Errorf("plugin %q is down and could not be restarted: %w", m.spec.Name, err)
	}
	m.restartErr, m.backoff = nil, 0
	m.logger.Info("plugin restarted", "pid", pid(m.client))
	return m.handler, m.client, nil
}

// exited checks whether a call's error means the plugin process of client
// is gone. If so it retires that process (the next call starts a new one)
// and returns the error to report, naming the plugin; else nil.
func (m *managed) exited(client *goplugin.Client, err error) error {
	var pe *pluginapi.PluginExitedError
	if !errors.As(err, &pe) {
		return nil
	}
	if !client.Exited() {
		// The connection broke; make sure the process is really gone
		// before replacing it, so runs on a live process are not killed
		// over a transient error.
		if rpc, cerr := client.Client(); cerr == nil && rpc.Ping() == nil {
			return fmt.Errorf("plugin %q: %w", m.spec.Name, err)
		}
	}
	m.mu.Lock()
	if m.client == client {
		m.client = nil
		m.logger.Error("plugin process exited", "err", pe.Cause)
	}
	m.mu.Unlock()
	client.Kill() // idempotent; reaps the process and go-plugin's goroutines
	return &exitedError{plugin: m.spec.Name, err: pe}
}

// stop kills the current process; later calls fail with ErrStopped.
func (m *managed) stop() {
	m.mu.Lock()
	client := m.client
	m.client = nil
	m.stopped = true
	m.mu.Unlock()
	if client != nil {
		client.Kill()
	}
}

// exitedError reports a run that failed because its plugin process died.
type exitedError struct {
	plugin string
	err    *pluginapi.PluginExitedError
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("plugin %q exited: %v", e.plugin, e.err.Cause)
}

func (e *exitedError) Unwrap() error { return e.err }

// pid is the plugin process's pid, 0 if unknown.
func pid(c *goplugin.Client) int {
	if rc := c.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}
