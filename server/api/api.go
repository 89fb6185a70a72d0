// Package api is Cronix's REST API (/api/v1) and HTTP front door: login
// sessions, API tokens, users, the audit log, authorization of every route
// (authorize.go, against server/authz's route table), job CRUD with validation against the live
// cluster, manual triggers, run history, the node list, and the internal
// result intake nodes report to. Every replica serves it; writes go to SQL
// first and are then signalled to the trigger leader through etcd.
//
// Errors are JSON {"error": "...", "fields": {...}}; the HTTP status is chosen
// from the error's type in one place (writeError). Invalid input writes
// nothing to SQL or etcd. See docs/api.md for the contract.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/health"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/catalog"
	"github.com/cronix/cronix/server/store"
)

// Store is the part of the SQL record the API uses.
type Store interface {
	auth.Store
	userStore

	CreateJob(ctx context.Context, j *store.Job) error
	GetJob(ctx context.Context, id int64) (*store.Job, error)
	ChildJobIDs(ctx context.Context, jobIDs []int64) (map[int64][]int64, error)
	UpdateJob(ctx context.Context, j *store.Job) error
	DeleteJob(ctx context.Context, id int64) error
	FindJobs(ctx context.Context, f store.JobFilter, p store.Page) ([]store.Job, int, error)

	CreateGroup(ctx context.Context, g *store.Group) error
	GetGroup(ctx context.Context, id int64) (*store.Group, error)
	GroupByName(ctx context.Context, appName string) (*store.Group, error)
	UpdateGroup(ctx context.Context, g *store.Group) error
	DeleteGroup(ctx context.Context, id int64) error
	FindGroups(ctx context.Context, f store.GroupFilter, p store.Page) ([]store.Group, int, error)

	ApplyResults(ctx context.Context, results []cluster.RunResult) error
	ApplyResultsFinished(ctx context.Context, results []cluster.RunResult) ([]store.Finished, error)
	GetRun(ctx context.Context, id int64) (*store.Run, error)
	RunByFireID(ctx context.Context, fireID string) (*store.Run, error)
	ListRuns(ctx context.Context, jobID int64, p store.Page) ([]store.Run, int, error)
	FindRuns(ctx context.Context, f store.RunFilter, p store.Page) ([]store.Run, int, error)
	JobLabels(ctx context.Context, ids []int64) (map[int64]store.JobLabel, error)
	FindDailyReports(ctx context.Context, f store.DailyReportFilter, p store.Page) ([]store.DailyReport, int, error)

	// The dashboard's figures and the job list's last runs (summary.go).
	CountJobs(ctx context.Context, sc *store.Scope) (store.JobCounts, error)
	CountRunsByStatus(ctx context.Context, f store.RunFilter) (map[string]int, error)
	LastRuns(ctx context.Context, jobIDs []int64) (map[int64]store.LastRun, error)

	versionStore
	batchStore
	catalog.Store
	securityStore
}

var _ Store = (*store.Store)(nil)

// Body limits.
const (
	// MaxBodyBytes limits every request body except result batches.
	MaxBodyBytes = 1 << 20
	// MaxResultBodyBytes limits POST /api/v1/internal/results, which carries run output.
	MaxResultBodyBytes = 64 << 20
)

// Config configures the API handler.
type Config struct {
	// Store is the SQL record. Required.
	Store Store
	// Etcd is the client to the live cluster state. Required.
	Etcd *clientv3.Client
	// Keys builds etcd keys; the zero value uses cluster.DefaultRoot.
	Keys cluster.Keys
	// Location is the time zone of schedules that name none; nil means time.Local.
	Location *time.Location
	// NodeToken is the shared secret nodes present as a bearer token to
	// POST /api/v1/internal/results. Empty rejects every result batch.
	NodeToken string
	// SessionIdleTimeout ends a login session unused that long; 0 = auth.DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// SessionMaxLifetime ends a login session that long after login; 0 = auth.DefaultSessionMaxLifetime.
	SessionMaxLifetime time.Duration
	// Throttle slows down password guessing; nil = a Throttle with the defaults.
	Throttle *auth.Throttle
	// PreviousNodeToken, during a rotation, is also accepted from nodes, and
	// the node-trust records this API writes (kill requests, system-info
	// requests) are signed with the key derived from NodeToken
	// (cluster.KeyringFromTokens).
	PreviousNodeToken string
	// Logger receives request logs (debug) and internal errors; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// UI serves "/" and every path outside /api, /healthz, /readyz and /metrics; nil serves a
	// short HTML page at "/".
	UI http.Handler
	// Compat serves the xxl-job-compatible admin API (/jobinfo/*, /jobgroup/*); nil = not served.
	Compat http.Handler
	// Cluster is this replica's raft (GET /api/v1/cluster, membership); nil answers 503.
	Cluster ClusterInfo
	// Alerts serves /api/v1/alerts and /api/v1/settings/alerting; nil answers 503.
	Alerts Alerts
	// Security raises a `security` alert for every security event (a
	// record a node refused, a foreign result); nil raises none.
	Security alert.Raiser
	// NodeTLS verifies nodes whose endpoint serves https (live output,
	// params validation); nil = the system roots.
	NodeTLS *tls.Config
	// Catalog is the handler catalog jobs are validated against; nil
	// builds one over Store and Etcd without built-in handlers.
	Catalog *catalog.Catalog
	// Ready serves GET /readyz (see health.Checker.ReadyHandler); nil
	// answers ready with no checks.
	Ready http.Handler
	// Metrics serves GET /metrics to an authenticated user (the
	// Prometheus exposition); nil answers 404.
	Metrics http.Handler
	// TriggerRunWait is how long POST /api/v1/jobs/{id}/trigger waits for
	// the leader to record the run, so the reply can carry its run_id; 0
	// answers at once with the fire id only.
	TriggerRunWait time.Duration
}

// catalog is Catalog, or one over Store and Etcd.
func (c Config) catalog() *catalog.Catalog {
	if c.Catalog != nil {
		return c.Catalog
	}
	return catalog.New(catalog.Config{Store: c.Store, KV: c.Etcd, Keys: c.Keys, Logger: c.Logger})
}

// Validate reports a missing required field.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("api: Config.Store is required"))
	}
	if c.Etcd == nil {
		errs = append(errs, errors.New("api: Config.Etcd is required"))
	}
	if c.TriggerRunWait < 0 {
		errs = append(errs, errors.New("api: Config.TriggerRunWait must not be negative"))
	}
	if c.SessionIdleTimeout < 0 || c.SessionMaxLifetime < 0 {
		errs = append(errs, errors.New("api: Config.SessionIdleTimeout and SessionMaxLifetime must not be negative"))
	}
	return errors.Join(errs...)
}

// server holds the handlers' dependencies.
type server struct {
	store     Store
	etcd      *clientv3.Client
	keys      cluster.Keys
	loc       *time.Location
	nodeToken string
	sessions  *auth.Sessions
	throttle  *auth.Throttle
	prevToken string
	ring      *cluster.Keyring // signs the records nodes act on; nil without a node token
	log       *slog.Logger
	now       func() time.Time
	cluster   ClusterInfo
	alerts    Alerts
	security  alert.Raiser
	nodeTLS   *tls.Config
	// validateClient calls nodes' validate endpoints: direct (no proxy),
	// each call bounded by pluginValidateTimeout through its context.
	validateClient *http.Client
	compat         http.Handler
	catalog        *catalog.Catalog
	ready          http.Handler
	metrics        http.Handler
	triggerWait    time.Duration // see Config.TriggerRunWait
}

// New returns the HTTP handler serving /healthz, /readyz, /metrics, /api/v1 and the UI. It
// panics if cfg.Validate fails: that is a wiring mistake, caught at startup.
func New(cfg Config) http.Handler {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &server{
		store:       cfg.Store,
		etcd:        cfg.Etcd,
		keys:        cfg.Keys,
		loc:         cfg.Location,
		nodeToken:   cfg.NodeToken,
		sessions:    &auth.Sessions{Store: cfg.Store, IdleTimeout: cfg.SessionIdleTimeout, MaxLifetime: cfg.SessionMaxLifetime, Logger: cfg.Logger},
		throttle:    cfg.Throttle,
		prevToken:   cfg.PreviousNodeToken,
		log:         cfg.Logger,
		now:         cfg.Now,
		cluster:     cfg.Cluster,
		alerts:      cfg.Alerts,
		security:    cfg.Security,
		nodeTLS:     cfg.NodeTLS,
		compat:      cfg.Compat,
		triggerWait: cfg.TriggerRunWait,
		catalog:     cfg.catalog(),
		ready:       cfg.Ready,
		metrics:     cfg.Metrics,
	}
	if s.ready == nil {
		s.ready = (&health.Checker{}).ReadyHandler()
	}
	if s.throttle == nil {
		s.throttle = &auth.Throttle{}
	}
	s.validateClient = newValidateClient(s.nodeTLS)
	if s.loc == nil {
		s.loc = time.Local
	}
	if cfg.NodeToken != "" {
		s.ring, _ = cluster.KeyringFromTokens(cfg.NodeToken, cfg.PreviousNodeToken) // only fails on an empty token
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	ui := cfg.UI
	if ui == nil {
		ui = http.HandlerFunc(defaultUI)
	}
	router := s.routes()
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/healthz" || p == "/readyz" || p == "/metrics" || p == "/api" || strings.HasPrefix(p, "/api/") ||
			(cfg.Compat != nil && isCompatPath(p)) {
			router.ServeHTTP(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	})
	return s.logRequests(front)
}

// routes builds the router of /healthz, /readyz, /metrics, /api and the
// compat API. Every route passes through authorize, which checks it against
// authz.Routes: a new route needs its line there (see server/authz).
func (s *server) routes() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = s.handle(func(http.ResponseWriter, *http.Request) error { return errRouteNotFound })
	r.MethodNotAllowedHandler = s.handle(func(http.ResponseWriter, *http.Request) error { return errMethodNotAllowed })
	r.Use(s.refuseNUL) // before authentication: a NUL reaches no handler, not even login (nulguard.go)
	r.Use(s.authorize)

	r.Handle("/healthz", health.LiveHandler()).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/readyz", s.readyHandler()).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/metrics", s.user(MaxBodyBytes, s.serveMetrics)).Methods(http.MethodGet)

	const v1 = "/api/v1"
	r.Handle(v1+"/auth/login", s.body(MaxBodyBytes, s.handle(s.login))).Methods(http.MethodPost)
	r.Handle(v1+"/auth/logout", s.user(MaxBodyBytes, s.logout)).Methods(http.MethodPost)
	r.Handle(v1+"/auth/me", s.user(MaxBodyBytes, s.me)).Methods(http.MethodGet)
	r.Handle(v1+"/auth/password", s.user(MaxBodyBytes, s.changePassword)).Methods(http.MethodPost)

	r.Handle(v1+"/jobs", s.user(MaxBodyBytes, s.listJobs)).Methods(http.MethodGet)
	r.Handle(v1+"/jobs", s.user(MaxBodyBytes, s.createJob)).Methods(http.MethodPost)
	r.Handle(v1+"/jobs/batch", s.user(MaxBatchBodyBytes, s.createJobBatch)).Methods(http.MethodPost)
	r.Handle(v1+"/jobs/{id:[0-9]+}", s.user(MaxBodyBytes, s.getJob)).Methods(http.MethodGet)
	r.Handle(v1+"/jobs/{id:[0-9]+}", s.user(MaxBodyBytes, s.updateJob)).Methods(http.MethodPut)
	r.Handle(v1+"/jobs/{id:[0-9]+}", s.user(MaxBodyBytes, s.deleteJob)).Methods(http.MethodDelete)
	r.Handle(v1+"/jobs/{id:[0-9]+}/trigger", s.user(MaxBodyBytes, s.triggerJob)).Methods(http.MethodPost)
	r.Handle(v1+"/jobs/{id:[0-9]+}/runs", s.user(MaxBodyBytes, s.listRuns)).Methods(http.MethodGet)
	r.Handle(v1+"/runs/{id:[0-9]+}", s.user(MaxBodyBytes, s.getRun)).Methods(http.MethodGet)
	r.Handle(v1+"/runs", s.user(MaxBodyBytes, s.listAllRuns)).Methods(http.MethodGet)
	r.Handle(v1+"/nodes", s.user(MaxBodyBytes, s.listNodes)).Methods(http.MethodGet)
	r.Handle(v1+"/nodes/{uuid}", s.user(MaxBodyBytes, s.getNode)).Methods(http.MethodGet)

	// Route groups kept in their own files.
	s.scheduleRoutes(r, v1)   // schedules.go: schedule preview
	s.handlerRoutes(r, v1)    // handlers.go: handler list with params schemas
	s.runControlRoutes(r, v1) // runcontrol.go: kill, live output, node system info
	s.securityRoutes(r, v1)   // security.go: security events (node report, admin list)
	s.groupRoutes(r, v1)      // groups.go: groups CRUD
	s.versionRoutes(r, v1)    // versions.go: saved versions of a job (glue history)
	s.openAPIRoutes(r, v1)    // openapi.go: the OpenAPI 3 document
	s.clusterRoutes(r, v1)    // cluster.go: replicas, leader, term, raft health
	s.alertRoutes(r, v1)      // alerts.go: alert events, test send, alerting settings
	s.reportRoutes(r, v1)     // reports.go: daily report
	s.summaryRoutes(r, v1)    // summary.go: the dashboard's figures
	s.userRoutes(r, v1)       // users.go: users and their group grants
	s.tokenRoutes(r, v1)      // tokens.go: API tokens
	s.auditRoutes(r, v1)      // audit.go: the audit log

	r.Handle(v1+"/internal/results", s.body(MaxResultBodyBytes, s.node(s.postResults))).Methods(http.MethodPost)

	s.compatRoutes(r)
	return r
}

// compatRoutes sends the xxl-job-compatible API's paths (those of
// authz.Routes) to Config.Compat, through the same authorization; other
// paths under its prefixes reach it to be answered 404/405 there.
func (s *server) compatRoutes(r *mux.Router) {
	if s.compat == nil {
		return
	}
	for key := range authz.Routes {
		method, path, _ := strings.Cut(key, " ")
		if method == "*" || !isCompatPath(path) {
			continue
		}
		r.Handle(path, s.compat).Methods(method)
	}
	r.PathPrefix("/jobinfo/").Handler(s.compat)
	r.PathPrefix("/jobgroup/").Handler(s.compat)
}

// handlerFunc is an API handler: it writes a success response itself or
// returns an error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc, sending its error through writeError.
func (s *server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// body limits the request body to limit bytes.
func (s *server) body(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// user wraps the handler of a user route with a body limit. Who may call
// it is authz.Routes' business, enforced by authorize.
func (s *server) user(limit int64, h handlerFunc) http.Handler {
	return s.body(limit, s.handle(h))
}

// node wraps the handler of a node route (authz.Node: node token only,
// enforced by authorize).
func (s *server) node(h handlerFunc) http.Handler {
	return s.handle(h)
}

// readyHandler is the configured readiness handler (set in New; the route
// tests build a server without one).
func (s *server) readyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ready == nil {
			health.LiveHandler().ServeHTTP(w, r)
			return
		}
		s.ready.ServeHTTP(w, r)
	})
}

// serveMetrics handles GET /metrics on the API port, for a logged-in user.
// An unauthenticated scrape uses the separate --metrics-addr listener.
func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	if s.metrics == nil {
		return errRouteNotFound
	}
	s.metrics.ServeHTTP(w, r)
	return nil
}

const defaultUIPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Cronix</title></head>
<body>
<h1>Cronix</h1>
<p>The web UI is not built into this binary. The REST API is served under <code>/api/v1</code>;
it is documented in <code>docs/api.md</code> of the source tree.</p>
<p>Health: <a href="/healthz">/healthz</a>, readiness: <a href="/readyz">/readyz</a></p>
</body></html>
`

// defaultUI is the UI when none is configured.
func defaultUI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(defaultUIPage))
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// logRequests logs every request at debug level: method, path, status and
// duration. It never logs headers, query strings or bodies (tokens, passwords).
func (s *server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)))
	})
}

// Routes lists every route the API router serves, as authz.Routes keys
// ("METHOD /path/{var}"; "* /prefix/" for a catch-all), walking the same
// router New builds (with the compat API mounted). Tests use it to check
// that every route has an authorization rule.
func Routes() ([]string, error) {
	s := &server{log: slog.New(slog.DiscardHandler), compat: http.NotFoundHandler(), throttle: &auth.Throttle{}}
	var out []string
	err := s.routes().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tmpl, err := route.GetPathTemplate()
		if err != nil {
			return nil //nolint:nilerr // a route without a path template matches nothing by path
		}
		methods, err := route.GetMethods()
		if err != nil {
			methods = []string{"*"} // no method matcher: every method
		}
		for _, m := range methods {
			out = append(out, authz.Key(m, tmpl))
		}
		return nil
	})
	return out, err
}

// newValidateClient is the client that calls nodes' validate endpoints:
// direct (no proxy), bounded dial, the nodes' TLS settings.
func newValidateClient(nodeTLS *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: pluginValidateTimeout}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     nodeTLS,
	}}
}
