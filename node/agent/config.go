package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/metrics"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultGroup          = "default"
	DefaultLeaseTTL       = 10 * time.Second
	DefaultOutputCap      = 1 << 20
	DefaultMaxConcurrent  = 8192
	DefaultReportInterval = 200 * time.Millisecond
	DefaultReportBatch    = 2000
	DefaultReportMaxBytes = 8 << 20
	DefaultResultMemory   = 64 << 20
	DefaultRunningAfter   = time.Second
	DefaultShutdownGrace  = 10 * time.Second
	DefaultFlushTimeout   = 5 * time.Second
	DefaultMaxTxnOps      = 8192
	DefaultProcThreshold  = time.Second
	// DefaultRetryBackoffBase is the first pause of the growing retry
	// backoff (used when a job sets no retry interval): base, 2×base, 4×base…
	DefaultRetryBackoffBase = time.Second
	// DefaultRetryBackoffMax caps the growing retry backoff.
	DefaultRetryBackoffMax = 60 * time.Second
)

// Node statuses written in NodeInfo.Status.
const (
	// NodeOnline: the node takes new fires.
	NodeOnline = "online"
	// NodeDraining: the node is stopping; it finishes what it runs and
	// reports it, and placement should send it nothing new.
	NodeDraining = "draining"
)

// Config configures an Agent.
type Config struct {
	// UUID identifies the node; it names the node's keys in etcd. Required.
	UUID string
	// Group is the node's group (xxl-job "executor" appname); default "default".
	Group string
	// IP is the address the node advertises.
	IP string
	// Port is the port the node advertises.
	Port int
	// Scheme is "https" when the node's endpoint serves TLS ("" = http).
	Scheme string
	// Version is the node software version advertised in NodeInfo.
	Version string
	// Keys builds the etcd keys; the zero value uses cluster.DefaultRoot.
	Keys cluster.Keys
	// LeaseTTL is the TTL of the registration lease; default 10s.
	LeaseTTL time.Duration
	// OutputCap is how many bytes of a run's output are kept; default 1 MiB.
	OutputCap int
	// ServerURLs is a static list of server base URLs (e.g.
	// "http://10.0.0.1:8080"). When empty, the agent discovers the servers
	// from the seed-004 registry (cluster.RegistryRoot) and keeps the list
	// current with a watch.
	ServerURLs []string
	// NodeToken is sent as "Authorization: Bearer <NodeToken>" with results,
	// and the cluster key that signs the records the node acts on is derived
	// from it (cluster.DeriveClusterKey). Required.
	NodeToken string
	// PreviousNodeToken, during a rotation, is the node token before the
	// current one: records signed with the key derived from it are still
	// accepted. Empty: only the current key.
	PreviousNodeToken string
	// MaxConcurrent bounds the fires running at once; default 8192, so a
	// tick's batch of a few thousand short fires starts at once instead
	// of waiting, past the first few hundred, for earlier fires to end. A
	// fire handed to its plugin ahead of its StartAt (hold.go) holds its
	// slot from then: with 4,096 slots, 5,000 http jobs a second left the
	// last ~900 of each second waiting for the first ones to end, 100-170
	// ms after their time.
	MaxConcurrent int
	// ReportInterval is how long results are collected before a batch is
	// sent; default 200ms.
	ReportInterval time.Duration
	// ReportBatch is the most results in one POST; a full batch is sent
	// without waiting for ReportInterval. Default 2000: the reporter sends
	// one batch at a time (POST, then the run keys' deletion), and a POST
	// under load costs tens of milliseconds whatever its size (the server's
	// SQL write gate, the HTTP round trip), so batches of 500 delivered
	// about 4,000 results a second on a 2-core machine, below what it
	// fires; batches of 2,000 deliver about twice that. Below a few
	// thousand fires a second, ReportInterval ends a batch first. The acked
	// run keys of a batch are deleted in txns of at most MaxTxnOps.
	ReportBatch int
	// ReportMaxBytes bounds a batch's approximate size in bytes (outputs can
	// be large); default 8 MiB. A single result larger than this is sent alone.
	ReportMaxBytes int
	// MaxTxnOps is the etcd server's per-transaction operation limit; run-key
	// deletions and proc keys are split into txns of at most this many. Default 8192 (the
	// embedded etcd's); if etcd refuses a txn as too large, the agent falls
	// back to etcd's stock limit of 128.
	MaxTxnOps int
	// RunningAfter is how long a run goes on before a "running" report is
	// sent for it; default 1s. Shorter runs only report their end.
	RunningAfter time.Duration
	// ProcThreshold is how long a run goes on before it registers its proc
	// key (/Cronix/proc/<node>/<job>/<run number>) so it can be listed and
	// killed through etcd; default 1s. Shorter runs cost no etcd write.
	ProcThreshold time.Duration
	// RetryBackoffBase is the first pause between attempts of a job whose
	// RetryIntervalSeconds is 0; each later pause doubles, up to
	// RetryBackoffMax. Default 1s.
	RetryBackoffBase time.Duration
	// RetryBackoffMax caps the growing retry pause; default 60s.
	RetryBackoffMax time.Duration
	// ShutdownGrace is how long Stop lets running fires finish before it
	// cancels them (they are then reported "killed"); default 10s.
	ShutdownGrace time.Duration
	// FlushTimeout bounds Stop's last attempt to deliver queued results;
	// default 5s. What is not delivered stays in the spool, if any.
	FlushTimeout time.Duration
	// SpoolDir, when set, is a directory where undelivered results are kept
	// so that a restart of the node loses none. Empty: memory only.
	SpoolDir string
	// ResultMemory bounds the approximate bytes of undelivered results held
	// in memory when SpoolDir is set (default 64 MiB): past it, further
	// results wait in the spool file only, and are read back in order as
	// the others are delivered, so a long outage of the servers does not
	// grow the node's memory. Without a spool every result stays in memory.
	ResultMemory int
	// Logger receives the agent's logs; default discards.
	Logger *slog.Logger
	// Metrics records runs in flight, finished runs and start lateness;
	// nil records nothing.
	Metrics *metrics.Metrics
	// HTTPClient posts results; default a client with a 30s timeout.
	HTTPClient *http.Client
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.OutputCap == 0 {
		c.OutputCap = DefaultOutputCap
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = DefaultReportInterval
	}
	if c.ReportBatch == 0 {
		c.ReportBatch = DefaultReportBatch
	}
	if c.ReportMaxBytes == 0 {
		c.ReportMaxBytes = DefaultReportMaxBytes
	}
	if c.ResultMemory == 0 {
		c.ResultMemory = DefaultResultMemory
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.RunningAfter == 0 {
		c.RunningAfter = DefaultRunningAfter
	}
	if c.ProcThreshold == 0 {
		c.ProcThreshold = DefaultProcThreshold
	}
	if c.RetryBackoffBase == 0 {
		c.RetryBackoffBase = DefaultRetryBackoffBase
	}
	if c.RetryBackoffMax == 0 {
		c.RetryBackoffMax = DefaultRetryBackoffMax
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	return c
}

// Validate reports what is wrong with c (after defaults).
func (c Config) Validate() error {
	var errs []error
	if c.UUID == "" {
		errs = append(errs, errors.New("UUID is required"))
	}
	if c.NodeToken == "" {
		errs = append(errs, errors.New("NodeToken is required (the cluster key is derived from it)"))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("LeaseTTL %s is below 1s", c.LeaseTTL))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"OutputCap", c.OutputCap}, {"MaxConcurrent", c.MaxConcurrent}, {"ReportBatch", c.ReportBatch},
		{"ReportMaxBytes", c.ReportMaxBytes}, {"MaxTxnOps", c.MaxTxnOps}, {"ResultMemory", c.ResultMemory},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %d must be positive", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"ReportInterval", c.ReportInterval}, {"RunningAfter", c.RunningAfter},
		{"ShutdownGrace", c.ShutdownGrace}, {"FlushTimeout", c.FlushTimeout},
		{"ProcThreshold", c.ProcThreshold}, {"RetryBackoffBase", c.RetryBackoffBase},
		{"RetryBackoffMax", c.RetryBackoffMax},
	} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %s must be positive", f.name, f.v))
		}
	}
	for _, s := range c.ServerURLs {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("server URL %q is not an http(s) URL", s))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent: invalid config: %w", err)
	}
	return nil
}
