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
// handler cannot take the node down. (A process found alive is not checked
// again for the runs of the next 2 ms — a tick's batch does not queue on
// the check — so one dying unnoticed in that window fails those runs too.)
// Stop kills every plugin.
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
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/hclogslog"
	"github.com/cronix/cronix/internal/procgroup"
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/pluginapi"
)

const (
	// startTimeout bounds a plugin's start (process up and handshake done).
	startTimeout = 30 * time.Second
	// Defaults of the Options.
	defaultDescribeTimeout = 10 * time.Second
	defaultValidateTimeout = 10 * time.Second
	defaultCrashWindow     = 10 * time.Second
	defaultMinBackoff      = time.Second
	defaultMaxBackoff      = 30 * time.Second
	// timeoutSlack: a call that failed this close to its deadline timed out.
	timeoutSlack = 250 * time.Millisecond
)

// Options tune a Host; the zero value means the defaults.
type Options struct {
	// StartTimeout bounds a plugin's start: process up and go-plugin
	// handshake done. Default 30 s.
	StartTimeout time.Duration
	// DescribeTimeout bounds the Info (Describe) call that completes a
	// plugin's start; a plugin that hangs there is refused. Default 10 s.
	DescribeTimeout time.Duration
	// ValidateTimeout bounds one Validate call on top of the caller's ctx.
	// Default 10 s.
	ValidateTimeout time.Duration
	// CrashWindow: a process that dies sooner than this after it started
	// counts as a quick crash. From the second quick crash in a row the
	// plugin backs off before its next start. Default 10 s.
	CrashWindow time.Duration
	// MinBackoff and MaxBackoff bound the restart backoff, which doubles
	// per failed restart or quick crash. Defaults 1 s and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// Metrics counts plugin process starts and crashes; nil counts nothing.
	Metrics *metrics.Metrics
	// SocketDir, when set, is the directory the plugins create their
	// go-plugin Unix sockets in (go-plugin's PLUGIN_UNIX_SOCKET_DIR)
	// instead of the system's temp dir, where a killed plugin's socket
	// stays. The caller owns it (the node empties it at each start).
	SocketDir string
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.StartTimeout, startTimeout)
	def(&o.DescribeTimeout, defaultDescribeTimeout)
	def(&o.ValidateTimeout, defaultValidateTimeout)
	def(&o.CrashWindow, defaultCrashWindow)
	def(&o.MinBackoff, defaultMinBackoff)
	def(&o.MaxBackoff, defaultMaxBackoff)
	return o
}

// Spec configures one plugin.
type Spec struct {
	// Name names the plugin in logs, errors and its status; normally the
	// name of the handler it serves.
	Name string
	// Cmd is the argv that starts the plugin, e.g.
	// {"/usr/lib/cronix/plugins/cronix-plugin-http"} or, for a built-in,
	// {"/usr/bin/cronix", "plugin", "shell"}.
	Cmd []string
	// SHA256 is the optional hex SHA-256 of the Cmd[0] executable; when set,
	// a plugin whose executable does not match is not started.
	SHA256 string
	// Handler, when set, is the only handler the plugin may serve: the name
	// its pinned checksum entry gives. A plugin serving another handler is
	// refused (PluginReasonHandlerNotPinned), so a pinned binary copied
	// under another name cannot take over a handler.
	Handler string
	// Refused, when set, records a plugin that must not be started (e.g. a
	// plugin-dir binary without a checksum): the Host lists it in Status
	// with this reason and never runs it.
	Refused *Refusal
	// Env holds extra "KEY=value" environment variables for the plugin
	// process, on top of the node's environment (they win over same-named
	// ones), e.g. the http handler's CRONIX_HTTP_ALLOW_LOOPBACK=1.
	Env []string
}

// Refusal is why a plugin is not used: a cluster.PluginReason* and a
// message for people. It is an error.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message + " (" + r.Reason + ")" }

// refuse wraps err with a refusal reason, keeping err in the chain.
func refuse(reason string, err error) error { return &refusedError{reason: reason, err: err} }

type refusedError struct {
	reason string
	err    error
}

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// reasonOf is the refusal reason carried by err, or fallback.
func reasonOf(err error, fallback string) string {
	var re *refusedError
	if errors.As(err, &re) {
		return re.reason
	}
	var r *Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return fallback
}

// ErrUnknownHandler is returned by Run and Validate for a handler no loaded
// plugin serves.
var ErrUnknownHandler = errors.New("unknown handler")

// ErrStopped is returned by Run and Validate after Stop.
var ErrStopped = errors.New("plugin host stopped")

// Host runs a node's plugins. Create it with New, then Start it.
type Host struct {
	logger  *slog.Logger
	specs   []Spec
	opts    Options
	changed chan struct{} // buffered 1: Status changed since last read

	mu       sync.RWMutex
	byName   map[string]*managed // loaded plugins by handler name
	all      []*managed          // every plugin Start saw, in spec order
	failures []error
	started  bool
	stopped  bool
	spawner  *spawner
}

// New returns a Host for the plugins of specs; nothing starts before
// Start. opts is optional (at most one is used).
func New(logger *slog.Logger, specs []Spec, opts ...Options) *Host {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return &Host{
		logger:  logger.With("component", "pluginhost"),
		specs:   slices.Clone(specs),
		opts:    o.withDefaults(),
		changed: make(chan struct{}, 1),
		byName:  map[string]*managed{},
	}
}

// Start launches every plugin and asks each for its handler's Info. A
// plugin that cannot be loaded is logged (naming it), recorded in Failures
// and in Status with the reason, and skipped. Start fails only when ctx
// ends or the Host was already started or stopped.
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
			h.logger.Error("plugin not loaded", "plugin", spec.Name, "cmd", spec.Cmd,
				"reason", reasonOf(err, cluster.PluginReasonHandshakeFailed), "err", err)
			h.mu.Lock()
			h.failures = append(h.failures, err)
			h.mu.Unlock()
		}
	}
	h.notify()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pluginhost: starting plugins: %w", err)
	}
	return nil
}

func (h *Host) load(ctx context.Context, spec Spec) error {
	m := newManaged(h.logger, h.spawner, spec, h.opts, h.notify)
	h.mu.Lock()
	h.all = append(h.all, m)
	h.mu.Unlock()
	if m.refusal != nil {
		return fmt.Errorf("plugin %q: %w", spec.Name, m.refusal)
	}
	info, err := m.start(ctx)
	if err != nil {
		m.refuse(reasonOf(err, cluster.PluginReasonHandshakeFailed), err.Error())
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
		err := refuse(cluster.PluginReasonConflict, fmt.Errorf("handler %q is already served by plugin %q", info.Name, other.spec.Name))
		m.refuse(cluster.PluginReasonConflict, err.Error())
		return fmt.Errorf("plugin %q: %w", spec.Name, err)
	}
	h.byName[info.Name] = m
	if info.Name != spec.Name {
		h.logger.Warn("plugin serves a handler of another name", "plugin", spec.Name, "handler", info.Name)
	}
	h.logger.Info("plugin loaded", "plugin", spec.Name, "handler", info.Name, "version", info.Version,
		"protocol", m.currentStatus().Protocol)
	return nil
}

// notify signals StatusChanged without blocking.
func (h *Host) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// StatusChanged receives a value after Status changed (a plugin loaded,
// was refused, crashed, backed off or recovered). It is buffered 1 and
// never closed: read Status after each receive.
func (h *Host) StatusChanged() <-chan struct{} { return h.changed }

// Status is the state of every plugin Start saw, refused ones included
// with the reason, sorted by name.
func (h *Host) Status() []cluster.PluginStatus {
	h.mu.RLock()
	all := slices.Clone(h.all)
	h.mu.RUnlock()
	out := make([]cluster.PluginStatus, 0, len(all))
	for _, m := range all {
		out = append(out, m.currentStatus())
	}
	slices.SortStableFunc(out, func(a, b cluster.PluginStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
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
// "killed"); when the plugin process died the error says the plugin
// crashed and wraps pluginapi.ErrPluginExited (the output received before
// the crash is already in out), and the next Run restarts the plugin.
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
	if !req.StartAt.IsZero() && !m.holds.Load() {
		// This plugin would start at once: wait here instead.
		if !waitctx.Until(ctx, req.StartAt) {
			err := context.Cause(ctx)
			return failed(err), err
		}
		req.StartAt = time.Time{}
	}
	res, err := hd.Run(ctx, req, out)
	if err != nil {
		if err := m.exited(client, err); err != nil {
			return failed(err), err
		}
	}
	return res, err
}

// HoldsStartAt reports whether the plugin serving handler waits for
// Request.StartAt itself (its Describe said so): a run can then be handed
// to it before its start time. For any other plugin Run waits in the host.
func (h *Host) HoldsStartAt(handler string) bool {
	m, err := h.lookup(handler)
	return err == nil && m.holds.Load()
}

// Validate checks params with the named handler, bounded by the
// ValidateTimeout option on top of ctx.
func (h *Host) Validate(ctx context.Context, handler string, params json.RawMessage) error {
	m, err := h.lookup(handler)
	if err != nil {
		return err
	}
	hd, client, err := m.get(ctx)
	if err != nil {
		return err
	}
	timeout := fmt.Errorf("plugin %q did not answer Validate within %s", m.spec.Name, h.opts.ValidateTimeout)
	vctx, cancel := context.WithTimeoutCause(ctx, h.opts.ValidateTimeout, timeout)
	defer cancel()
	err = hd.Validate(vctx, params)
	if err != nil {
		if err := m.exited(client, err); err != nil {
			return err
		}
		// The plugin's copy of the deadline fires a moment before ours.
		if dl, _ := vctx.Deadline(); ctx.Err() == nil && (vctx.Err() != nil || time.Until(dl) <= timeoutSlack) {
			return fmt.Errorf("pluginhost: validating params: %w", timeout)
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
	opts     Options
	notify   func()
	checksum []byte
	refusal  *Refusal // set: never started

	mu        sync.Mutex
	client    *goplugin.Client // nil when no process runs
	handler   pluginapi.Handler
	info      pluginapi.Info
	holds     atomic.Bool // the running process's Describe said HoldsStartAt
	stderr    *tailWriter // the current process's last stderr lines
	startedAt time.Time   // when the current process started
	stopped   bool
	status    cluster.PluginStatus
	// After a failed restart or a crash loop: the error, and no new
	// attempt before retryAt.
	restartErr   error
	retryAt      time.Time
	backoff      time.Duration
	quickCrashes int // crashes in a row, each within CrashWindow of its start

	// live is the running process as get last found it alive, for the
	// runs that follow within aliveRecheck: a tick's batch of runs takes
	// it without queueing, one by one, for mu and go-plugin's own lock.
	// Cleared whenever client is.
	live atomic.Pointer[liveProc]
}

// liveProc is a plugin process get found alive at checked (unix ns).
type liveProc struct {
	handler pluginapi.Handler
	client  *goplugin.Client
	checked int64
}

// aliveRecheck is how long after get found the process alive further runs
// skip the check. A process that dies unnoticed within it (between runs)
// fails the runs that take it, as one that dies during a run does, and the
// next check restarts it.
const aliveRecheck = 2 * time.Millisecond

func newManaged(logger *slog.Logger, sp *spawner, spec Spec, opts Options, notify func()) *managed {
	m := &managed{spec: spec, logger: logger.With("plugin", spec.Name), spawner: sp, opts: opts, notify: notify}
	m.status = cluster.PluginStatus{Name: spec.Name, Handler: spec.Handler}
	if len(spec.Cmd) > 0 {
		m.status.Path = spec.Cmd[0]
	}
	switch {
	case spec.Refused != nil:
		m.refusal = spec.Refused
	case spec.Name == "":
		m.refusal = &Refusal{Reason: cluster.PluginReasonHandshakeFailed, Message: "spec has no name"}
	case len(spec.Cmd) == 0 || spec.Cmd[0] == "":
		m.refusal = &Refusal{Reason: cluster.PluginReasonHandshakeFailed, Message: "spec has no command"}
	case spec.SHA256 != "":
		sum, err := hex.DecodeString(spec.SHA256)
		if err != nil || len(sum) != sha256.Size {
			m.refusal = &Refusal{Reason: cluster.PluginReasonChecksumMismatch,
				Message: fmt.Sprintf("SHA256 %q is not a hex SHA-256", spec.SHA256)}
		}
		m.checksum = sum
	}
	if m.refusal != nil {
		m.status.State, m.status.Reason, m.status.Message = cluster.PluginRefused, m.refusal.Reason, m.refusal.Message
	}
	return m
}

func (m *managed) currentInfo() pluginapi.Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.info
}

func (m *managed) currentStatus() cluster.PluginStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	if st.RetryAt != nil {
		t := *st.RetryAt
		st.RetryAt = &t
	}
	return st
}

// refuse records that the plugin is not used, and why.
func (m *managed) refuse(reason, msg string) {
	m.mu.Lock()
	m.status.State, m.status.Reason, m.status.Message, m.status.RetryAt = cluster.PluginRefused, reason, msg, nil
	m.mu.Unlock()
	m.notify()
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
	env := m.spec.Env
	if m.opts.SocketDir != "" {
		env = append(slices.Clip(env), goplugin.EnvUnixSocketDir+"="+m.opts.SocketDir)
	}
	if len(env) > 0 {
		// go-plugin would append the node's environment after ours, so
		// ours could not override it; give it the merged list instead.
		cmd.Env = append(os.Environ(), env...)
		cfg.SkipHostEnv = true
	}
	cfg.Logger = hclogslog.New(m.logger, "")
	cfg.StartTimeout = m.opts.StartTimeout
	stderr := &tailWriter{}
	cfg.Stderr = stderr
	if m.checksum != nil {
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: m.checksum, Hash: sha256.New()}
	}
	client := goplugin.NewClient(cfg)
	var (
		hd  pluginapi.Handler
		err error
	)
	m.spawner.do(func() { hd, err = pluginapi.Dispense(client) }) // forks the process
	if err == nil {
		procgroup.Track(pid(client)) // its process group dies with it, and with the node
	}
	if err != nil {
		killClient(client)
		if errors.Is(err, goplugin.ErrChecksumsDoNotMatch) {
			return refuse(cluster.PluginReasonChecksumMismatch,
				fmt.Errorf("checksum of %s does not match the configured SHA-256: %w", m.spec.Cmd[0], err))
		}
		return refuse(cluster.PluginReasonHandshakeFailed, fmt.Errorf("starting %s: %w", m.spec.Cmd[0], handshakeError(err)))
	}
	infoCtx, cancel := context.WithTimeoutCause(ctx, m.opts.DescribeTimeout,
		fmt.Errorf("no answer to Info within %s", m.opts.DescribeTimeout))
	info, err := hd.Info(infoCtx)
	if infoTimedOut(ctx, infoCtx, err) {
		err = fmt.Errorf("no answer to Info within %s", m.opts.DescribeTimeout)
	}
	cancel()
	if err != nil {
		killClient(client)
		return refuse(cluster.PluginReasonDescribeFailed, fmt.Errorf("asking for its handler's info: %w", err))
	}
	if info.Name == "" {
		killClient(client)
		return refuse(cluster.PluginReasonDescribeFailed, errors.New("its handler has no name"))
	}
	if m.spec.Handler != "" && info.Name != m.spec.Handler {
		killClient(client)
		return refuse(cluster.PluginReasonHandlerNotPinned, fmt.Errorf(
			"it serves handler %q but its checksum entry pins it to handler %q only", info.Name, m.spec.Handler))
	}
	if m.info.Name != "" && info.Name != m.info.Name {
		killClient(client)
		return refuse(cluster.PluginReasonHandlerNotPinned,
			fmt.Errorf("restarted plugin serves handler %q instead of %q", info.Name, m.info.Name))
	}
	m.client, m.handler, m.info, m.stderr, m.startedAt = client, hd, info, stderr, time.Now()
	m.holds.Store(info.HoldsStartAt)
	m.opts.Metrics.PluginStarted(m.spec.Name)
	m.status.State, m.status.Reason, m.status.Message, m.status.RetryAt = cluster.PluginLoaded, "", "", nil
	m.status.Handler, m.status.Version, m.status.Protocol = info.Name, info.Version, client.NegotiatedVersion()
	return nil
}

// infoTimedOut reports whether an Info call on infoCtx (derived from ctx)
// that failed with err failed because infoCtx's deadline passed while ctx
// is alive. The deadline is read on the clock too, not only through
// infoCtx.Err(): the plugin's copy of it fires in the plugin's process, and
// its answer (the handler's own "context deadline exceeded", which is not
// context.DeadlineExceeded once it has crossed the wire) can be read here
// before infoCtx's timer has run, while infoCtx.Err() is still nil (seen
// under load: 1 run in 45). timeoutSlack is the same margin Validate uses.
func infoTimedOut(ctx, infoCtx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	dl, ok := infoCtx.Deadline()
	return infoCtx.Err() != nil || (ok && time.Until(dl) <= timeoutSlack) ||
		errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// get returns the handler of a running process, restarting the plugin when
// its process has exited (unless it is backing off).
func (m *managed) get(ctx context.Context) (pluginapi.Handler, *goplugin.Client, error) {
	if lp := m.live.Load(); lp != nil && time.Now().UnixNano()-lp.checked < int64(aliveRecheck) {
		return lp.handler, lp.client, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil, nil, ErrStopped
	}
	if m.client != nil && !m.client.Exited() {
		m.live.Store(&liveProc{handler: m.handler, client: m.client, checked: time.Now().UnixNano()})
		return m.handler, m.client, nil
	}
	m.live.Store(nil)
	if m.client != nil {
		// Died between runs: a crash like any other.
		m.retireLocked(m.client, errors.New("plugin process exited while idle"))
	}
	if m.restartErr != nil && time.Now().Before(m.retryAt) {
		return nil, nil, fmt.Errorf("plugin %q is down and could not be restarted (next attempt in %s): %w",
			m.spec.Name, time.Until(m.retryAt).Round(time.Millisecond), m.restartErr)
	}
	m.logger.Warn("plugin process is not running; restarting it")
	if err := m.launchLocked(ctx); err != nil {
		m.backOffLocked(reasonOf(err, cluster.PluginReasonHandshakeFailed), err)
		m.logger.Error("plugin restart failed", "err", err, "retry_in", m.backoff)
		return nil, nil, fmt.Errorf("plugin %q is down and could not be restarted: %w", m.spec.Name, err)
	}
	if m.quickCrashes < 2 {
		m.restartErr, m.backoff = nil, 0
	} else {
		m.restartErr = nil // keep the backoff: the next quick crash doubles it
	}
	m.status.Restarts++
	m.logger.Info("plugin restarted", "pid", pid(m.client))
	m.notifyLocked()
	return m.handler, m.client, nil
}

// backOffLocked doubles the restart backoff and records why.
func (m *managed) backOffLocked(reason string, err error) {
	m.backoff = min(max(2*m.backoff, m.opts.MinBackoff), m.opts.MaxBackoff)
	m.restartErr, m.retryAt = err, time.Now().Add(m.backoff)
	at := m.retryAt.UTC()
	m.status.State, m.status.Reason, m.status.Message, m.status.RetryAt = cluster.PluginBackoff, reason, err.Error(), &at
	m.notifyLocked()
}

// notifyLocked tells the host the status changed; it does not block.
func (m *managed) notifyLocked() { m.notify() }

// retireLocked forgets the process of client, which is gone, and counts
// the crash: from the second quick crash in a row the plugin backs off.
func (m *managed) retireLocked(client *goplugin.Client, cause error) {
	if m.client != client {
		return
	}
	m.client = nil
	m.live.Store(nil)
	killClient(client) // idempotent; reaps the process and go-plugin's goroutines
	m.opts.Metrics.PluginCrashed(m.spec.Name)
	if time.Since(m.startedAt) < m.opts.CrashWindow {
		m.quickCrashes++
	} else {
		m.quickCrashes = 1
		m.backoff = 0
	}
	msg := crashMessage(cause, m.stderr)
	m.logger.Error("plugin process exited", "err", msg, "quick_crashes", m.quickCrashes)
	if m.quickCrashes >= 2 {
		m.backOffLocked(cluster.PluginReasonCrashLoop, fmt.Errorf("crash loop (%d quick crashes in a row): %s", m.quickCrashes, msg))
		return
	}
	m.status.Message = "last crash: " + msg
	m.notifyLocked()
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
	killClient(client) // make sure its stderr is drained before reading the tail
	m.mu.Lock()
	tail := m.stderr
	if m.client == client {
		m.retireLocked(client, pe.Cause)
	}
	m.mu.Unlock()
	return &exitedError{plugin: m.spec.Name, err: pe, detail: crashMessage(pe.Cause, tail)}
}

// stop kills the current process; later calls fail with ErrStopped.
func (m *managed) stop() {
	m.mu.Lock()
	client := m.client
	m.client = nil
	m.live.Store(nil)
	m.stopped = true
	if m.status.State == cluster.PluginLoaded || m.status.State == cluster.PluginBackoff {
		m.status.State, m.status.RetryAt = cluster.PluginStopped, nil
	}
	m.mu.Unlock()
	if client != nil {
		killClient(client)
	}
}

// exitedError reports a run that failed because its plugin process died.
type exitedError struct {
	plugin string
	err    *pluginapi.PluginExitedError
	detail string
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("plugin %q crashed (its process exited; output received before the crash is kept): %s", e.plugin, e.detail)
}

func (e *exitedError) Unwrap() error { return e.err }

// crashMessage describes a crash: the plugin's panic line when its stderr
// has one, else cause.
func crashMessage(cause error, stderr *tailWriter) string {
	if stderr != nil {
		if p := stderr.panicLine(); p != "" {
			return p
		}
	}
	if cause == nil {
		return "process exited"
	}
	return cause.Error()
}

// tailWriter keeps the last bytes a plugin wrote to stderr.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 8 << 10

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > tailSize {
		w.buf = append([]byte(nil), w.buf[len(w.buf)-tailSize:]...)
	}
	return len(p), nil
}

// panicLine is the last "panic: ..." line (a Go runtime crash) or "fatal
// error: ..." line in the tail, trimmed; "" when there is none.
func (w *tailWriter) panicLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(string(w.buf), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			const maxLen = 300
			if len(l) > maxLen {
				l = l[:maxLen] + "..."
			}
			return l
		}
	}
	return ""
}

// handshakeError shortens go-plugin's multi-line start errors to their
// first line and says what a missing handshake line means.
func handshakeError(err error) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if strings.Contains(msg, "Unrecognized remote plugin message") {
		return errors.New("not a Cronix plugin: it printed no go-plugin handshake line on its stdout")
	}
	if msg != err.Error() {
		return errors.New(strings.TrimSpace(msg))
	}
	return err
}

// killGrace bounds go-plugin's graceful Kill: it asks the plugin to shut
// down over its connection and waits for the answer without a deadline, so
// a frozen plugin (stopped, or its connection wedged) would hold it for
// good. After killGrace the process is killed outright, which ends that
// call.
const killGrace = 5 * time.Second

// killClient kills a plugin's process and then whatever it left in its
// process group. Idempotent; returns within about killGrace even when the
// plugin does not answer.
func killClient(c *goplugin.Client) {
	pgid := pid(c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Kill()
	}()
	select {
	case <-done:
	case <-time.After(killGrace):
		if pgid > 0 {
			if p, err := os.FindProcess(pgid); err == nil {
				_ = p.Kill() // go-plugin's Kill then sees the process gone
			}
		}
		<-done
	}
	if pgid > 0 {
		procgroup.Release(pgid)
	}
}

// pid is the plugin process's pid, 0 if unknown.
func pid(c *goplugin.Client) int {
	if rc := c.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}
