// Package metrics owns Cronix's Prometheus metric families: one Metrics
// per process (a server, a node, or both in standalone) holding its own
// registry, so tests can run many processes' worth side by side.
//
// Every recording method is nil-safe (a nil *Metrics records nothing) and
// touches only in-memory counters and histograms: nothing is read or
// written elsewhere per fire. The few families whose value lives elsewhere
// (raft state, nodes by status) are read when /metrics is scraped.
//
// The families and their labels are listed in docs/operations.md.
package metrics

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/cronix/cronix/cluster"
)

// Lateness stages: from the scheduled time to the fire's dispatch (leader)
// and to its start on a node.
const (
	StageDispatched = "dispatched"
	StageStarted    = "started"
)

// Fire outcomes counted by Fired.
const (
	// FireDispatched is a fire sent to a node.
	FireDispatched = "dispatched"
	// FireNoTarget is a fire recorded failed because no node could take it.
	FireNoTarget = "no_target"
	// FireReplayed is a fire already recorded by an earlier term.
	FireReplayed = "replayed"
)

// Alert channels and outcomes counted by AlertSent.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
	OutcomeSent    = "sent"
	OutcomeFailed  = "failed"
)

// namespace prefixes every Cronix family.
const namespace = "cronix"

// latencyBuckets (seconds) suit SQL and etcd calls.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// latenessBuckets (seconds) suit schedule lateness, from a timer's jitter
// to a fire held up by a failover.
var latenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Metrics is one process's metric families on its own registry.
type Metrics struct {
	reg *prometheus.Registry

	lateness        *prometheus.HistogramVec
	fires           *prometheus.CounterVec
	misfires        *prometheus.CounterVec
	dispatchBatch   prometheus.Histogram
	dispatchSeconds prometheus.Histogram
	runs            *prometheus.CounterVec
	inFlight        *prometheus.GaugeVec
	runSlots        prometheus.Gauge
	etcdSeconds     *prometheus.HistogramVec
	sqlSeconds      *prometheus.HistogramVec
	pluginStarts    *prometheus.CounterVec
	pluginCrashes   *prometheus.CounterVec
	alertSends      *prometheus.CounterVec
}

// New returns Metrics on a fresh registry that also carries the Go runtime
// and process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "schedule_lateness_seconds",
			Help:    "Time from a fire's scheduled time to its dispatch (stage=dispatched, leader) or its start on a node (stage=started).",
			Buckets: latenessBuckets,
		}, []string{"stage"}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "fires_total",
			Help: "Fires committed by the trigger leader, by outcome: dispatched, no_target (recorded failed), replayed (recorded by an earlier term).",
		}, []string{"outcome"}),
		misfires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "misfires_total",
			Help: "Jobs whose missed fires their misfire policy collapsed, caught up or skipped (the trigger leader stalled more than the misfire threshold, or no leader ran), by policy: FIRE_ONCE_NOW fired once at the latest of several missed times (the earlier ones are neither fired nor recorded), CATCH_UP fired several, DO_NOTHING recorded skipped runs.",
		}, []string{"policy"}),
		dispatchBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "dispatch_batch_size",
			Help:    "Fires per dispatch batch (one fenced etcd transaction set per tick).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		dispatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "dispatch_duration_seconds",
			Help:    "Time to dispatch one batch of fires to etcd.",
			Buckets: latencyBuckets,
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "runs_total",
			Help: "Runs a node finished, by final status and handler.",
		}, []string{"status", "handler"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "runs_in_flight",
			Help: "Runs executing on a node now, by handler.",
		}, []string{"handler"}),
		runSlots: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "run_slots",
			Help: "Fires a node runs at once at most (--max-concurrent); runs_in_flight over it is the node's saturation.",
		}),
		etcdSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "etcd_request_duration_seconds",
			Help:    "Duration of unary etcd requests, by gRPC method (e.g. KV/Txn).",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		sqlSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "sql_query_duration_seconds",
			Help:    "Duration of SQL statements, by operation (SELECT, INSERT, UPDATE, DELETE, ...).",
			Buckets: latencyBuckets,
		}, []string{"operation"}),
		pluginStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "plugin_starts_total",
			Help: "Handler plugin processes started (first start and restarts), by plugin.",
		}, []string{"plugin"}),
		pluginCrashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "plugin_crashes_total",
			Help: "Handler plugin processes found dead while serving, by plugin.",
		}, []string{"plugin"}),
		alertSends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "alert_sends_total",
			Help: "Alert deliveries attempted, by channel (email, webhook) and outcome (sent, failed).",
		}, []string{"channel", "outcome"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.lateness, m.fires, m.misfires, m.dispatchBatch, m.dispatchSeconds, m.runs, m.inFlight, m.runSlots,
		m.etcdSeconds, m.sqlSeconds, m.pluginStarts, m.pluginCrashes, m.alertSends,
	)
	// Known label values start at zero so the series exist before the first event.
	for _, s := range []string{StageDispatched, StageStarted} {
		m.lateness.WithLabelValues(s)
	}
	for _, o := range []string{FireDispatched, FireNoTarget, FireReplayed} {
		m.fires.WithLabelValues(o)
	}
	for _, p := range []string{cluster.MisfireFireOnceNow, cluster.MisfireCatchUp, cluster.MisfireDoNothing} {
		m.misfires.WithLabelValues(p)
	}
	for _, c := range []string{ChannelEmail, ChannelWebhook} {
		for _, o := range []string{OutcomeSent, OutcomeFailed} {
			m.alertSends.WithLabelValues(c, o)
		}
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Register adds a collector (e.g. one reading raft or etcd at scrape time).
func (m *Metrics) Register(c prometheus.Collector) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(c)
}

// ObserveLateness records how late a fire reached stage.
func (m *Metrics) ObserveLateness(stage string, d time.Duration) {
	if m == nil {
		return
	}
	m.lateness.WithLabelValues(stage).Observe(max(d, 0).Seconds())
}

// Fired counts n fires with outcome.
func (m *Metrics) Fired(outcome string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.fires.WithLabelValues(outcome).Add(float64(n))
}

// Misfired counts n jobs whose missed fire times misfire policy (one of
// cluster's Misfire* names) collapsed, caught up or skipped.
func (m *Metrics) Misfired(policy string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.misfires.WithLabelValues(policy).Add(float64(n))
}

// ObserveDispatch records one dispatch batch of size fires taking d.
func (m *Metrics) ObserveDispatch(size int, d time.Duration) {
	if m == nil {
		return
	}
	m.dispatchBatch.Observe(float64(size))
	m.dispatchSeconds.Observe(d.Seconds())
}

// RunStarted marks a run of handler as executing.
func (m *Metrics) RunStarted(handler string) {
	if m == nil {
		return
	}
	m.inFlight.WithLabelValues(handler).Inc()
}

// SetRunSlots records a node's run slots (agent.Config.MaxConcurrent).
func (m *Metrics) SetRunSlots(n int) {
	if m == nil {
		return
	}
	m.runSlots.Set(float64(n))
}

// RunFinished marks a run of handler as done with its final status.
func (m *Metrics) RunFinished(handler, status string) {
	if m == nil {
		return
	}
	m.inFlight.WithLabelValues(handler).Dec()
	m.runs.WithLabelValues(status, handler).Inc()
}

// ObserveSQL records one SQL statement of operation taking d.
func (m *Metrics) ObserveSQL(operation string, d time.Duration) {
	if m == nil {
		return
	}
	m.sqlSeconds.WithLabelValues(operation).Observe(d.Seconds())
}

// PluginStarted counts a plugin process start.
func (m *Metrics) PluginStarted(plugin string) {
	if m == nil {
		return
	}
	m.pluginStarts.WithLabelValues(plugin).Inc()
	m.pluginCrashes.WithLabelValues(plugin) // the plugin's crash series starts at 0
}

// PluginCrashed counts a plugin process found dead.
func (m *Metrics) PluginCrashed(plugin string) {
	if m == nil {
		return
	}
	m.pluginCrashes.WithLabelValues(plugin).Inc()
}

// AlertSent counts one alert delivery attempt on channel with outcome.
func (m *Metrics) AlertSent(channel, outcome string) {
	if m == nil {
		return
	}
	m.alertSends.WithLabelValues(channel, outcome).Inc()
}

// EtcdDialOptions instrument an etcd client (clientv3.Config.DialOptions):
// every unary request's duration is recorded by method. Streams (watches,
// lease keepalives) are not timed. Nil Metrics gives no options.
func (m *Metrics) EtcdDialOptions() []grpc.DialOption {
	if m == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(m.etcdInterceptor)}
}

func (m *Metrics) etcdInterceptor(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.etcdSeconds.WithLabelValues(etcdMethod(method)).Observe(time.Since(start).Seconds())
	return err
}

// etcdMethod shortens "/etcdserverpb.KV/Txn" to "KV/Txn".
func etcdMethod(full string) string {
	full = strings.TrimPrefix(full, "/")
	if i := strings.IndexByte(full, '.'); i >= 0 {
		return full[i+1:]
	}
	return full
}
