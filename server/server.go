// Package server composes a Cronix server replica: the SQL store, the REST
// API and UI, the raft node and — while this replica leads — the trigger
// loop. It owns their start and stop order.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/health"
	"github.com/cronix/cronix/internal/tlsfiles"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/catalog"
	"github.com/cronix/cronix/server/compat"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/handlers"
	"github.com/cronix/cronix/server/monitor"
	"github.com/cronix/cronix/server/raftha"
	"github.com/cronix/cronix/server/report"
	"github.com/cronix/cronix/server/scheduler"
	"github.com/cronix/cronix/server/store"
	"github.com/cronix/cronix/ui"
)

// triggerRunWait is how long POST /api/v1/jobs/{id}/trigger waits for the
// leader to record the run, so its reply carries the run id.
const triggerRunWait = time.Second

// Config configures one server replica.
type Config struct {
	// ID uniquely names this replica in raft and in the leader fence.
	ID string
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string
	// HTTPAddr is the listen address of the API and UI.
	HTTPAddr string
	// AdvertiseURL is how nodes reach this replica's API; default
	// http(s)://<listen address>.
	AdvertiseURL string
	// TLSCertFile and TLSKeyFile, when set, serve the API and UI over https
	// (the files are read again when they change: rotation needs no restart).
	TLSCertFile, TLSKeyFile string
	// NodeTLS verifies nodes whose endpoint serves https; nil = system roots.
	NodeTLS *tls.Config
	// DSN is the database (see store.Open).
	DSN string
	// Keys is the etcd key layout.
	Keys cluster.Keys
	// RaftAddr is the raft transport address.
	RaftAddr string
	// RaftBootstrap bootstraps a single-voter cluster on first start.
	RaftBootstrap bool
	// RaftPeers lists every voter of a new HA cluster as "id=host:port",
	// this replica included; a replica without raft state bootstraps it.
	RaftPeers []string
	// Location is the default time zone of schedules.
	Location *time.Location
	// BuiltinHandlers are the handlers built into the release, known to the
	// handler catalog before any node publishes them.
	BuiltinHandlers []handlers.Handler
	// NodeToken is the shared secret nodes present when reporting results;
	// the cluster key that signs the records nodes act on is derived from it.
	NodeToken string
	// PreviousNodeToken, during a rotation, is also accepted from nodes.
	PreviousNodeToken string
	// AdminPassword is the password of the admin user created on first start ("" = random).
	AdminPassword string
	// SessionIdleTimeout and SessionMaxLifetime bound login sessions (0 = the auth defaults).
	SessionIdleTimeout time.Duration
	SessionMaxLifetime time.Duration
	// DispatchMaxOps caps operations per etcd transaction.
	DispatchMaxOps int
	// PlaceJobs: the leader writes job placements (scheduler.Config.PlaceJobs).
	PlaceJobs bool
	// DispatchAhead is scheduler.Config.DispatchAhead (0: fires are
	// dispatched at their time); half of it is DispatchAheadMin.
	DispatchAhead time.Duration
	// Version is reported in the server registration.
	Version string
	// Logger receives the replica's logs.
	Logger *slog.Logger
	// Alert configures alerting; Store, Logger and BaseURL are filled in
	// by the server (BaseURL defaults to the advertised URL).
	Alert alert.Config
	// RunRetention and OutputRetention: the leader deletes finished runs
	// (empties their output) scheduled longer ago; 0 keeps them.
	RunRetention, OutputRetention time.Duration
	// Report tunes the daily report and retention (Store, Logger and the
	// retentions are filled in by the server); zero fields take defaults.
	Report report.Config
	// Metrics receives the replica's metrics; nil = a registry of its own.
	// On the API port GET /metrics needs a user token.
	Metrics *metrics.Metrics
	// MetricsAddr, when set, serves GET /metrics (plus /healthz and
	// /readyz) there without authentication, for a Prometheus scraper.
	MetricsAddr string
}

// Server is one replica. Start it once; Stop is idempotent.
type Server struct {
	cfg  Config
	etcd *clientv3.Client
	log  *slog.Logger

	store    *store.Store
	alerts   *alert.Service
	raft     *raftha.Node
	sched    atomic.Pointer[scheduler.Scheduler] // set in Start (the readiness check may run before)
	http     *http.Server
	listener net.Listener
	url      string
	ready    *health.Checker
	mhttp    *http.Server // the MetricsAddr listener; nil without one
	maddr    string
	leaseMu  sync.Mutex // guards lease: re-registration replaces it
	lease    clientv3.LeaseID

	adminCreated  bool
	adminPassword string

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New checks cfg and returns a Server that is not started yet.
func New(cfg Config, etcd *clientv3.Client) (*Server, error) {
	switch {
	case cfg.ID == "":
		return nil, errors.New("server: ID is required")
	case cfg.DSN == "":
		return nil, errors.New("server: DSN is required")
	case cfg.NodeToken == "":
		return nil, errors.New("server: NodeToken is required")
	case etcd == nil:
		return nil, errors.New("server: etcd client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.DispatchMaxOps <= 0 {
		cfg.DispatchMaxOps = 128
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	s := &Server{cfg: cfg, etcd: etcd, log: cfg.Logger.With("component", "server"), ready: &health.Checker{}}
	s.ready.Add("sql", s.checkSQL)
	s.ready.Add("etcd", s.checkEtcd)
	s.ready.Add("leader", s.checkLeader)
	s.ready.Add("trigger", s.checkTrigger)
	return s, nil
}

// Start opens the store, raft and the HTTP listener, and registers the
// replica in etcd. On error everything started so far is stopped.
func (s *Server) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel

	if s.store, err = store.Open(ctx, s.cfg.DSN, store.WithQueryObserver(s.cfg.Metrics.ObserveSQL)); err != nil {
		return fmt.Errorf("server: opening database: %w", err)
	}
	if s.adminCreated, s.adminPassword, err = auth.EnsureAdmin(ctx, s.store, s.cfg.AdminPassword); err != nil {
		return fmt.Errorf("server: creating admin user: %w", err)
	}

	s.raft, err = raftha.Open(raftha.Config{
		ID: s.cfg.ID, Dir: s.cfg.DataDir, BindAddr: s.cfg.RaftAddr, Bootstrap: s.cfg.RaftBootstrap,
		Peers: s.cfg.RaftPeers, Logger: s.cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("server: raft: %w", err)
	}
	if err := s.registerCollectors(); err != nil {
		return err
	}

	s.listener, err = net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	scheme := "http"
	if s.cfg.TLSCertFile != "" || s.cfg.TLSKeyFile != "" {
		if s.listener, err = tlsfiles.Listen(s.listener, s.cfg.TLSCertFile, s.cfg.TLSKeyFile); err != nil {
			return fmt.Errorf("server: https: %w", err)
		}
		scheme = "https"
	}
	s.url = s.cfg.AdvertiseURL
	if s.url == "" {
		s.url = scheme + "://" + s.listener.Addr().String()
	}
	acfg := s.cfg.Alert
	acfg.Store, acfg.Logger, acfg.Metrics = s.store, s.cfg.Logger, s.cfg.Metrics
	if acfg.BaseURL == "" {
		acfg.BaseURL = s.url
	}
	if s.alerts, err = alert.New(acfg); err != nil {
		return fmt.Errorf("server: alerting: %w", err)
	}
	cat := catalog.New(catalog.Config{Store: s.store, KV: s.etcd, Watcher: s.etcd, Keys: s.cfg.Keys,
		Builtins: s.cfg.BuiltinHandlers, Logger: s.cfg.Logger})
	handler := api.New(api.Config{
		Store: s.store, Etcd: s.etcd, Keys: s.cfg.Keys, Location: s.cfg.Location,
		NodeToken: s.cfg.NodeToken, PreviousNodeToken: s.cfg.PreviousNodeToken, Logger: s.cfg.Logger, UI: ui.Handler(),
		Compat: compat.New(compat.Config{Store: s.store, Etcd: s.etcd, Keys: s.cfg.Keys, NodeToken: s.cfg.NodeToken,
			Location: s.cfg.Location, Logger: s.cfg.Logger, Catalog: cat}),
		Cluster: s.raft, Alerts: s.alerts, Security: s.alerts, NodeTLS: s.cfg.NodeTLS, Catalog: cat,
		SessionIdleTimeout: s.cfg.SessionIdleTimeout, SessionMaxLifetime: s.cfg.SessionMaxLifetime,
		Ready: s.ready.ReadyHandler(), Metrics: s.cfg.Metrics.Handler(), TriggerRunWait: triggerRunWait,
	})
	s.http = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()

	ring, err := cluster.KeyringFromTokens(s.cfg.NodeToken, s.cfg.PreviousNodeToken)
	if err != nil {
		return fmt.Errorf("server: cluster key: %w", err)
	}
	disp := dispatch.New(s.etcd, s.cfg.Keys, s.cfg.ID, ring, dispatch.WithMaxOps(s.cfg.DispatchMaxOps))
	sched := scheduler.New(scheduler.Config{
		Jobs: s.store, Runs: s.store, Cursors: s.raft, Dispatcher: disp, Etcd: s.etcd, Keys: s.cfg.Keys,
		Location: s.cfg.Location, Logger: s.cfg.Logger, Metrics: s.cfg.Metrics, PlaceJobs: s.cfg.PlaceJobs,
		DispatchAhead: s.cfg.DispatchAhead, DispatchAheadMin: s.cfg.DispatchAhead / 2,
		HTTPClient: &http.Client{Transport: nodeTransport(s.cfg.NodeTLS)},
	})
	s.sched.Store(sched)
	s.raft.OnLeadership(func(ctx context.Context, term uint64) {
		s.lead(ctx, term, sched)
	})
	// The leader keeps the handler catalog and the nodes' groups in SQL.
	s.raft.OnLeadership(func(ctx context.Context, term uint64) {
		if err := cat.Run(ctx); err != nil {
			s.log.Error("handler catalog sync stopped", "term", term, "err", err)
		}
	})
	mon := monitor.New(monitor.Config{Store: s.store, Etcd: s.etcd, Keys: s.cfg.Keys, Logger: s.cfg.Logger, Alerts: s.alerts})
	s.raft.OnLeadership(func(ctx context.Context, term uint64) {
		if err := mon.Run(ctx); err != nil {
			s.log.Error("lost-run monitor stopped", "term", term, "err", err)
		}
	})

	// Alerts: the leader raises run events; every replica delivers due
	// deliveries (each claimed by one) and watches for a missing leader.
	s.raft.OnLeadership(func(ctx context.Context, _ uint64) { s.alerts.RunScanner(ctx) })
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.alerts.RunSender(runCtx)
	}()
	go func() {
		defer s.wg.Done()
		s.alerts.WatchLeader(runCtx, s.raft, time.Second, s.cfg.ID)
	}()

	// The leader keeps the daily report and applies retention.
	rcfg := s.cfg.Report
	rcfg.Store, rcfg.Logger = s.store, s.cfg.Logger
	rcfg.RunRetention, rcfg.OutputRetention = s.cfg.RunRetention, s.cfg.OutputRetention
	reports, err := report.New(rcfg)
	if err != nil {
		return fmt.Errorf("server: reports: %w", err)
	}
	s.raft.OnLeadership(func(ctx context.Context, _ uint64) { reports.Run(ctx) })

	s.raft.OnLeadership(func(ctx context.Context, _ uint64) {
		s.raft.RunPromoter(ctx, raftha.PromoterConfig{Source: registryProgress{etcd: s.etcd}, Interval: statusInterval})
	})

	if s.cfg.MetricsAddr != "" {
		if err := s.serveMetrics(); err != nil {
			return err
		}
	}
	if err := s.register(ctx, runCtx); err != nil {
		return err
	}
	s.wg.Add(1)
	go s.reportProgress(runCtx)
	s.log.Info("server started", "id", s.cfg.ID, "url", s.url)
	return nil
}

// nodeTransport is the default transport verifying https nodes with tc.
func nodeTransport(tc *tls.Config) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return tr
}

// lead runs the trigger loop for one term, retrying after transient errors
// until leadership (ctx) ends.
func (s *Server) lead(ctx context.Context, term uint64, sched *scheduler.Scheduler) {
	log := s.log.With("term", term)
	log.Info("gained trigger leadership")
	defer log.Info("trigger leadership ended")
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := sched.Run(ctx, term)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, dispatch.ErrFenced) {
			// A newer term holds the fence: this term can never dispatch
			// again. Stay idle until raft takes this leadership away.
			log.Warn("trigger loop fenced by a newer term; idle until this term ends (if this replica stays "+
				"leader, the fence is from a lost raft lineage: see 'cronix raft recover' in docs/deployment.md)", "err", err)
			<-ctx.Done()
			return
		}
		log.Error("trigger loop stopped; restarting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// register publishes this replica under the seed-004 registry layout so
// nodes can find an API to report to, and keeps it there: when the lease is
// lost (an etcd outage longer than its TTL) it registers again.
func (s *Server) register(ctx, runCtx context.Context) error {
	ka, err := s.putRegistration(ctx, runCtx)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go s.keepRegistered(runCtx, ka)
	return nil
}

// putRegistration grants a lease, puts the registration under it and starts
// its keepalive (bound to runCtx).
func (s *Server) putRegistration(ctx, runCtx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	lease, err := s.etcd.Grant(ctx, 10)
	if err != nil {
		return nil, fmt.Errorf("server: etcd lease: %w", err)
	}
	s.leaseMu.Lock()
	s.lease = lease.ID
	s.leaseMu.Unlock()
	host := s.listener.Addr().String()
	val, _ := json.Marshal(cluster.ServerInfo{ID: s.cfg.ID, URL: s.url, Version: s.cfg.Version, Started: time.Now().UTC()})
	if _, err := s.etcd.Put(ctx, cluster.ServerRegistration(host), string(val), clientv3.WithLease(lease.ID)); err != nil {
		return nil, fmt.Errorf("server: registering in etcd: %w", err)
	}
	ka, err := s.etcd.KeepAlive(runCtx, lease.ID)
	if err != nil {
		return nil, fmt.Errorf("server: etcd keepalive: %w", err)
	}
	return ka, nil
}

// keepRegistered drains the keepalive and registers again whenever the
// lease is lost, until runCtx ends.
func (s *Server) keepRegistered(runCtx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer s.wg.Done()
	backoff := 200 * time.Millisecond
	for {
		for range ka { //nolint:revive // drain keepalive responses
		}
		if runCtx.Err() != nil {
			return
		}
		s.log.Warn("server registration lease lost; registering again")
		for {
			var err error
			if ka, err = s.putRegistration(runCtx, runCtx); err == nil {
				backoff = 200 * time.Millisecond
				break
			}
			s.log.Warn("registering in etcd failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-runCtx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// Alerts raises alert events (e.g. a node security event); nil before Start.
func (s *Server) Alerts() alert.Raiser {
	if s.alerts == nil {
		return nil
	}
	return s.alerts
}

// URL is the advertised base URL of the API.
func (s *Server) URL() string { return s.url }

// AdminCreated reports whether Start created the admin user, and its password.
func (s *Server) AdminCreated() (bool, string) { return s.adminCreated, s.adminPassword }

// Stop shuts the replica down: raft first (leadership ends, the trigger
// loop stops), then HTTP, the registration and the store.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.raft != nil {
			s.raft.Close()
		}
		for _, srv := range []*http.Server{s.http, s.mhttp} {
			if srv != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = srv.Shutdown(ctx)
				cancel()
			}
		}
		if s.cancel != nil {
			s.cancel() // ends the registration keepalive (no re-registering from here on)
		}
		s.wg.Wait()
		if s.lease != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = s.etcd.Revoke(ctx, s.lease)
			cancel()
		}
		if s.store != nil {
			_ = s.store.Close()
		}
	})
}
