// Package node composes a Cronix node: the plugin host that runs handler
// plugins, the agent that registers in etcd, takes dispatched fires and
// reports results, and a small health endpoint.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/health"
	"github.com/cronix/cronix/internal/procgroup"
	"github.com/cronix/cronix/internal/tlsfiles"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/node/agent"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/node/sysinfo"
)

// Config configures a node.
type Config struct {
	// DataDir keeps the node's uuid (stable across restarts) and spool.
	DataDir string
	// Group is the group (appname) this node serves.
	Group string
	// Keys is the etcd key layout.
	Keys cluster.Keys
	// NodeToken is presented to servers when reporting results, and
	// required from servers calling the node's endpoints (live output,
	// params validation).
	NodeToken string
	// PreviousNodeToken is accepted besides NodeToken during a rotation:
	// records signed with the key derived from it verify, and servers
	// presenting it are let in.
	PreviousNodeToken string
	// ServerURLs are server API base URLs; empty = discover in etcd.
	ServerURLs []string
	// ListenAddr is the health endpoint's address ("127.0.0.1:0" picks a port).
	ListenAddr string
	// TLSCertFile and TLSKeyFile, when set, serve the endpoint over https.
	TLSCertFile, TLSKeyFile string
	// HTTPClient reports results to the servers; nil = a plain client with
	// a 30 s timeout. Give it the CA that signed https servers' certificates.
	HTTPClient *http.Client
	// AdvertiseIP is registered as the node's IP; default the listener's IP.
	AdvertiseIP string
	// OutputCap is the most output kept per run.
	OutputCap int
	// ResultMemory bounds the undelivered results held in memory (see
	// agent.Config.ResultMemory); 0 = agent.DefaultResultMemory.
	ResultMemory int
	// MaxConcurrent bounds the fires running at once on this node (see
	// agent.Config.MaxConcurrent); 0 = agent.DefaultMaxConcurrent.
	MaxConcurrent int
	// LeaseTTL is the registration lease TTL.
	LeaseTTL time.Duration
	// Plugins are the handler plugins to start (the built-ins).
	Plugins []pluginhost.Spec
	// PluginDir, when set, is scanned for third-party plugin binaries named
	// cronix-plugin-*; each is loaded only if its SHA-256 is in
	// PluginChecksums (see pluginhost.DirSpecs).
	PluginDir string
	// PluginChecksums are "name=sha256hex" entries for PluginDir's binaries.
	PluginChecksums []string
	// Version is registered with the node.
	Version string
	// Logger receives the node's logs.
	Logger *slog.Logger
	// Metrics records the node's runs and plugins; nil = a registry of the
	// node's own. On the node's ListenAddr GET /metrics needs the node token.
	Metrics *metrics.Metrics
	// MetricsAddr, when set, serves GET /metrics (plus /healthz and
	// /readyz) there without authentication, for a Prometheus scraper.
	MetricsAddr string
}

// Node is a running node agent.
type Node struct {
	cfg   Config
	etcd  *clientv3.Client
	log   *slog.Logger
	uuid  string
	host  *pluginhost.Host
	pub   *pluginhost.Publisher
	agent *agent.Agent
	sys   *sysinfo.Responder
	http  *http.Server
	mhttp *http.Server // the MetricsAddr listener; nil without one
	maddr string       // its bound address
	ready *health.Checker
	// sockDir is where the plugins create their sockets ("": go-plugin's
	// default); removed by Stop once the plugins left it empty.
	sockDir string
	wg      sync.WaitGroup
	once    sync.Once
}

// New prepares a node; its uuid is read from (or created in) DataDir.
func New(cfg Config, etcd *clientv3.Client) (*Node, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("node: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Group == "" {
		cfg.Group = "default"
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	id, err := loadUUID(filepath.Join(cfg.DataDir, "node-uuid"))
	if err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	n := &Node{cfg: cfg, etcd: etcd, uuid: id, log: cfg.Logger.With("component", "node", "node", id)}
	n.ready = &health.Checker{}
	n.ready.Add("etcd", n.checkEtcd)
	n.AddReadyChecks(n.ready)
	return n, nil
}

// UUID is the node's stable id.
func (n *Node) UUID() string { return n.uuid }

// Start launches the plugins, the health endpoint and the agent.
func (n *Node) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	specs, err := n.pluginSpecs()
	if err != nil {
		return err
	}
	// Process groups a previous run of this node started and that outlived
	// it (its plugins' guards killed too, as by an OOM kill of the whole
	// process group) are killed before any plugin starts; the plugins list
	// their groups in the same journal.
	procDir, err := filepath.Abs(filepath.Join(n.cfg.DataDir, "procs"))
	if err != nil {
		return fmt.Errorf("node: process-group journal: %w", err)
	}
	if _, err := procgroup.Sweep(procDir, n.log); err != nil { // logs every group it kills
		return fmt.Errorf("node: %w", err)
	}
	procgroup.SetJournalDir(procDir) // the plugins' own process groups
	// The built-ins (specs starts with them) journal their jobs' groups;
	// third-party plugins are not told where.
	for i := range n.cfg.Plugins {
		specs[i].Env = append(slices.Clip(specs[i].Env), procgroup.EnvDir+"="+procDir)
	}
	// Every plugin's go-plugin sockets go to a directory of this node,
	// emptied here: a plugin killed with its node leaves its socket behind.
	if n.sockDir, err = pluginSocketDir(n.cfg.DataDir); err != nil {
		return err
	}
	if n.sockDir != "" {
		if err := clearPluginSockets(n.sockDir); err != nil {
			return err
		}
	}
	n.host = pluginhost.New(n.cfg.Logger, specs, pluginhost.Options{Metrics: n.cfg.Metrics, SocketDir: n.sockDir})
	if err := n.host.Start(ctx); err != nil {
		return fmt.Errorf("node: plugins: %w", err)
	}
	l, err := net.Listen("tcp", n.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("node: listen on %s: %w", n.cfg.ListenAddr, err)
	}
	scheme := "http"
	if n.cfg.TLSCertFile != "" {
		tl, err := tlsfiles.Listen(l, n.cfg.TLSCertFile, n.cfg.TLSKeyFile)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("node: %w", err)
		}
		l, scheme = tl, "https"
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", n.ready.ReadyHandler())
	mux.Handle("GET /metrics", requireToken(n.cfg.NodeToken, n.cfg.Metrics.Handler()))
	// Params validation by the handler plugin, for the servers' job saves.
	mux.Handle("POST "+ValidatePath, ValidateHandler(n.host, n.cfg.NodeToken, n.cfg.PreviousNodeToken))
	n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.http.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("health endpoint stopped", "err", err)
		}
	}()
	if n.cfg.MetricsAddr != "" {
		if err := n.serveMetrics(); err != nil {
			return err
		}
	}
	addr := l.Addr().(*net.TCPAddr)
	ip := n.cfg.AdvertiseIP
	if ip == "" {
		ip = addr.IP.String()
	}
	n.agent, err = agent.New(agent.Config{
		UUID: n.uuid, Group: n.cfg.Group, IP: ip, Port: addr.Port, Scheme: scheme, Version: n.cfg.Version, Keys: n.cfg.Keys,
		HTTPClient: n.cfg.HTTPClient,
		LeaseTTL:   n.cfg.LeaseTTL, OutputCap: n.cfg.OutputCap, ResultMemory: n.cfg.ResultMemory, MaxConcurrent: n.cfg.MaxConcurrent, ServerURLs: n.cfg.ServerURLs,
		NodeToken: n.cfg.NodeToken, PreviousNodeToken: n.cfg.PreviousNodeToken, SpoolDir: filepath.Join(n.cfg.DataDir, "spool"), Logger: n.cfg.Logger,
		Metrics: n.cfg.Metrics,
	}, n.etcd, n.host)
	if err != nil {
		return fmt.Errorf("node: agent: %w", err)
	}
	if err := n.agent.Start(ctx); err != nil {
		return fmt.Errorf("node: agent: %w", err)
	}
	n.pub = pluginhost.NewPublisher(n.etcd, n.cfg.Keys, n.uuid, n.cfg.LeaseTTL, n.host.Infos, n.cfg.Logger)
	if err := n.pub.Start(ctx); err != nil {
		return fmt.Errorf("node: handlers: %w", err)
	}
	// Live output of running fires, for the servers' /api/v1/runs/{id}/output.
	mux.Handle("GET "+agent.OutputPath, n.agent.OutputHandler(n.cfg.NodeToken, n.cfg.PreviousNodeToken))
	n.sys, err = sysinfo.NewResponder(sysinfo.Config{
		NodeUUID: n.uuid, Keys: n.cfg.Keys, Disks: []string{n.cfg.DataDir}, Logger: n.cfg.Logger,
		Guard: n.agent.Guard(),
	}, n.etcd)
	if err != nil {
		return fmt.Errorf("node: sysinfo: %w", err)
	}
	if err := n.sys.Start(ctx); err != nil {
		return fmt.Errorf("node: sysinfo: %w", err)
	}
	n.log.Info("node started", "group", n.cfg.Group, "handlers", n.host.Handlers())
	return nil
}

// Stop deregisters the node, lets running fires finish or cancels them,
// flushes results and stops the plugins. Idempotent.
func (n *Node) Stop() {
	n.once.Do(func() {
		if n.pub != nil {
			n.pub.Stop() // withdraws the handler descriptions (revokes their lease)
		}
		if n.sys != nil {
			n.sys.Stop()
		}
		if n.agent != nil {
			n.agent.Stop()
		}
		for _, srv := range []*http.Server{n.http, n.mhttp} {
			if srv != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = srv.Shutdown(ctx)
				cancel()
			}
		}
		if n.host != nil {
			n.host.Stop()
		}
		if n.sockDir != "" {
			// Empty unless a plugin had to be killed (the next start clears it).
			_ = os.Remove(n.sockDir)
		}
		n.wg.Wait()
	})
}

// pluginSpecs are the built-in plugins plus the checksum-pinned ones of
// the plugin dir.
func (n *Node) pluginSpecs() ([]pluginhost.Spec, error) {
	specs := append([]pluginhost.Spec(nil), n.cfg.Plugins...)
	if n.cfg.PluginDir == "" {
		return specs, nil
	}
	sums, err := pluginhost.ParseChecksums(n.cfg.PluginChecksums)
	if err != nil {
		return nil, fmt.Errorf("node: --plugin-checksums: %w", err)
	}
	dir, err := pluginhost.DirSpecs(n.cfg.Logger, n.cfg.PluginDir, sums)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return append(specs, dir...), nil
}

func loadUUID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("node: reading %s: %w", path, err)
	}
	id := uuid.NewString()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("node: writing %s: %w", path, err)
	}
	return id, nil
}
