package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/buildinfo"
	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/config"
	"github.com/cronix/cronix/internal/pprofserver"
	"github.com/cronix/cronix/internal/tlsfiles"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/node"
	"github.com/cronix/cronix/node/agent"
	"github.com/cronix/cronix/node/pluginhost"
	"github.com/cronix/cronix/pluginapi"
	cmdplugin "github.com/cronix/cronix/plugins/cmd"
	httpplugin "github.com/cronix/cronix/plugins/http"
	"github.com/cronix/cronix/plugins/shell"
	"github.com/cronix/cronix/server"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/embedetcd"
	"github.com/cronix/cronix/server/handlers"
	"github.com/cronix/cronix/server/report"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/scheduler"
)

// readyTimeout bounds how long standalone waits to be ready before it
// prints its URL (or gives up).
const readyTimeout = 2 * time.Minute

// Bounds of each step of a command's stop after SIGINT/SIGTERM. Each
// component stops gracefully within its own limits (the node: its running
// fires get the agent's ShutdownGrace, queued results FlushTimeout, then
// they stay in the spool); these only keep a component that does not
// return (e.g. a stuck storage call) from holding the process: the stop
// logs it and goes on, so the process always exits, and what the
// abandoned component had not finished is what a crash would leave (the
// start journal and the spool cover it on the next start). A second
// SIGINT ends the process at once (main).
const (
	nodeStopTimeout   = 45 * time.Second // agent: 10 s grace + 5 s cancel + 5 s flush + deregistration, plugins
	serverStopTimeout = 30 * time.Second // raft, HTTP (5 s), registration, SQL
	etcdStopTimeout   = 15 * time.Second
)

// stopWithin runs stop and waits at most d for it; past d it logs what did
// not stop and returns (stop goes on in the background).
func stopWithin(log *slog.Logger, what string, d time.Duration, stop func()) {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		stop()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		log.Info("stopped", "component", what, "took", time.Since(start).Round(time.Millisecond))
	case <-t.C:
		log.Error("stop did not finish in time; exiting without waiting for it", "component", what, "waited", d)
	}
}

// commonConfig is shared by every long-running command.
type commonConfig struct {
	// LogLevel is the minimum level logged.
	LogLevel string `flag:"log-level" env:"CRONIX_LOG_LEVEL" yaml:"log_level" help:"log level: debug, info, warn or error"`
	// LogFormat is text or json.
	LogFormat string `flag:"log-format" env:"CRONIX_LOG_FORMAT" yaml:"log_format" help:"log format: text or json"`
	// EtcdRoot is the root directory of every Cronix key in etcd.
	EtcdRoot string `flag:"etcd-root" env:"CRONIX_ETCD_ROOT" yaml:"etcd_root" help:"etcd root directory of Cronix keys"`
}

// pprofConfig turns on Go's profiling endpoints (in "cronix standalone",
// "cronix server" and "cronix node").
type pprofConfig struct {
	// PprofAddr serves net/http/pprof on a listener of its own when set.
	PprofAddr string `flag:"pprof-addr" env:"CRONIX_PPROF_ADDR" yaml:"pprof_addr" help:"address of a separate listener serving Go's /debug/pprof/ profiles (CPU, heap, block, mutex, trace) without authentication; keep it on loopback (empty: off)"`
}

// start serves the profiles when an address is set; the returned stop
// function closes the listener (a no-op when off).
func (c pprofConfig) start(ctx context.Context, log *slog.Logger, stdout io.Writer) (func(), error) {
	if c.PprofAddr == "" {
		return func() {}, nil
	}
	s, err := pprofserver.Start(ctx, c.PprofAddr, log)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	fmt.Fprintf(stdout, "pprof: http://%s/debug/pprof/\n", s.Addr())
	return s.Close, nil
}

// etcdClientConfig is how "cronix server" and "cronix node" reach etcd.
type etcdClientConfig struct {
	// EtcdEndpoints are the etcd client URLs (https:// for TLS).
	EtcdEndpoints []string `flag:"etcd-endpoints" env:"CRONIX_ETCD_ENDPOINTS" yaml:"etcd_endpoints" help:"comma-separated etcd client URLs (https://... for TLS)"`
	// EtcdUsername and EtcdPassword authenticate to etcd (auth enabled).
	EtcdUsername string `flag:"etcd-username" env:"CRONIX_ETCD_USERNAME" yaml:"etcd_username" help:"etcd user (with --etcd-password; standalone's embedded etcd: root)"`
	EtcdPassword string `flag:"etcd-password" env:"CRONIX_ETCD_PASSWORD" yaml:"etcd_password" help:"etcd password (standalone's embedded etcd: the content of <data-dir>/etcd-root-password); prefer the environment variable to the flag"`
	// EtcdCA verifies the etcd servers' certificates.
	EtcdCA string `flag:"etcd-ca" env:"CRONIX_ETCD_CA" yaml:"etcd_ca" help:"CA bundle (PEM) verifying the etcd servers' certificates (default: the system roots)"`
	// EtcdCert and EtcdKey are this process's etcd client certificate.
	EtcdCert string `flag:"etcd-cert" env:"CRONIX_ETCD_CERT" yaml:"etcd_cert" help:"client certificate (PEM) presented to etcd; with etcd auth on and no password its common name is the etcd user"`
	EtcdKey  string `flag:"etcd-key" env:"CRONIX_ETCD_KEY" yaml:"etcd_key" help:"private key (PEM) of --etcd-cert"`
}

// httpTLSConfig is the TLS of a long-running command's own HTTP endpoint
// and of the HTTPS endpoints it calls.
type httpTLSConfig struct {
	// TLSCert and TLSKey serve this process's HTTP endpoint over https.
	TLSCert string `flag:"tls-cert" env:"CRONIX_TLS_CERT" yaml:"tls_cert" help:"certificate (PEM) to serve this process's HTTP endpoint over https (replaced files are picked up without a restart)"`
	TLSKey  string `flag:"tls-key" env:"CRONIX_TLS_KEY" yaml:"tls_key" help:"private key (PEM) of --tls-cert"`
	// TLSCA verifies the certificates of the HTTPS endpoints this process calls.
	TLSCA string `flag:"tls-ca" env:"CRONIX_TLS_CA" yaml:"tls_ca" help:"CA bundle (PEM) verifying the https endpoints this process calls: servers' API for a node, nodes' endpoints for a server (default: the system roots)"`
}

func (c httpTLSConfig) checkTLS() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	return nil
}

func defaultEtcdClient() etcdClientConfig {
	return etcdClientConfig{EtcdEndpoints: []string{"http://127.0.0.1:2379"}}
}

func defaultCommon() commonConfig {
	return commonConfig{LogLevel: "info", LogFormat: "text", EtcdRoot: cluster.DefaultRoot}
}

// sessionConfig configures login sessions (in "cronix server" and "cronix standalone").
type sessionConfig struct {
	// SessionIdleTimeout ends a login session unused for that long.
	SessionIdleTimeout time.Duration `flag:"session-idle-timeout" env:"CRONIX_SESSION_IDLE_TIMEOUT" yaml:"session_idle_timeout" help:"a login session unused for this long ends (e.g. 30m, 2h)"`
	// SessionMaxLifetime ends a login session that long after login.
	SessionMaxLifetime time.Duration `flag:"session-max-lifetime" env:"CRONIX_SESSION_MAX_LIFETIME" yaml:"session_max_lifetime" help:"a login session ends this long after login, used or not (e.g. 24h)"`
}

func defaultSession() sessionConfig {
	return sessionConfig{SessionIdleTimeout: auth.DefaultSessionIdleTimeout, SessionMaxLifetime: auth.DefaultSessionMaxLifetime}
}

// validate checks the session limits.
func (c sessionConfig) validate() error {
	if c.SessionIdleTimeout <= 0 || c.SessionMaxLifetime <= 0 {
		return errors.New("--session-idle-timeout and --session-max-lifetime must be positive")
	}
	return nil
}

// retentionConfig configures run retention (in "cronix server" and "cronix
// standalone"); the trigger leader applies it.
type retentionConfig struct {
	// RunRetention: terminal runs scheduled longer ago are deleted.
	RunRetention time.Duration `flag:"run-retention" env:"CRONIX_RUN_RETENTION" yaml:"run_retention" help:"delete finished runs scheduled longer ago than this, e.g. 30d (0 = keep forever; at least 1h); daily reports are kept"`
	// OutputRetention: the output of terminal runs scheduled longer ago is emptied.
	OutputRetention time.Duration `flag:"output-retention" env:"CRONIX_OUTPUT_RETENTION" yaml:"output_retention" help:"empty the output of finished runs scheduled longer ago than this, e.g. 7d (0 = keep it as long as the run; at least 1h)"`
	// ReportInterval is how often the leader recomputes the open days of the daily report.
	ReportInterval time.Duration `flag:"report-interval" env:"CRONIX_REPORT_INTERVAL" yaml:"report_interval" help:"how often the trigger leader updates today's daily report and applies retention (0 = 1m; longer when a pass takes over a ninth of it)"`
}

// checkRetention validates the retentions.
func (c retentionConfig) checkRetention() error {
	for name, d := range map[string]time.Duration{"--run-retention": c.RunRetention, "--output-retention": c.OutputRetention} {
		if d != 0 && d < report.MinRetention {
			return fmt.Errorf("%s %s: want 0 (keep) or at least %s", name, d, report.MinRetention)
		}
	}
	if c.ReportInterval < 0 {
		return fmt.Errorf("--report-interval %s: want 0 (default) or a positive duration", c.ReportInterval)
	}
	return nil
}

// placementConfig configures the trigger leader's placements and
// dispatch (in "cronix server" and "cronix standalone").
type placementConfig struct {
	// PlaceJobs writes every enabled job's config to its node in etcd.
	PlaceJobs bool `flag:"place-jobs" env:"CRONIX_PLACE_JOBS" yaml:"place_jobs" help:"leader writes every enabled job's signed config under /Cronix/job/<node>/<id> (no node reads it yet; costs etcd space and leader memory per job); off: the leader removes existing placements"`
	// DispatchAhead is scheduler.Config.DispatchAhead.
	DispatchAhead time.Duration `flag:"dispatch-ahead" env:"CRONIX_DISPATCH_AHEAD" yaml:"dispatch_ahead" help:"record and dispatch each fire up to this long before its time: a third of a millisecond per fire of the previous batch, at least half of it, up to twice it while the leader's writes are slow; the node holds the fire and starts it at its time (0 = dispatch at the time; at most 5s; used while every live node supports it)"`
}

func defaultPlacement() placementConfig {
	return placementConfig{DispatchAhead: scheduler.DefaultDispatchAhead}
}

// checkDispatch validates the dispatch settings.
func (c placementConfig) checkDispatch() error {
	if c.DispatchAhead < 0 || c.DispatchAhead > scheduler.MaxDispatchAhead {
		return fmt.Errorf("--dispatch-ahead %s: want 0 to %s", c.DispatchAhead, scheduler.MaxDispatchAhead)
	}
	return nil
}

// standaloneConfig configures "cronix standalone".
type standaloneConfig struct {
	commonConfig
	placementConfig
	pprofConfig
	pluginConfig
	alertConfig
	sessionConfig
	retentionConfig
	// DataDir holds etcd, SQLite, raft and node state.
	DataDir string `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"directory for etcd, SQLite, raft and node data"`
	// HTTPAddr is where the API and UI listen.
	HTTPAddr string `flag:"http-addr" env:"CRONIX_HTTP_ADDR" yaml:"http_addr" help:"address of the REST API and web admin"`
	// EtcdClientAddr is where the embedded etcd serves clients (other nodes may join through it).
	EtcdClientAddr string `flag:"etcd-client-addr" env:"CRONIX_ETCD_CLIENT_ADDR" yaml:"etcd_client_addr" help:"embedded etcd client address (a separately started 'cronix node' can use it)"`
	// EtcdPeerAddr is the embedded etcd peer address.
	EtcdPeerAddr string `flag:"etcd-peer-addr" env:"CRONIX_ETCD_PEER_ADDR" yaml:"etcd_peer_addr" help:"embedded etcd peer address"`
	// RaftAddr is the raft transport address of the single voter.
	RaftAddr string `flag:"raft-addr" env:"CRONIX_RAFT_ADDR" yaml:"raft_addr" help:"raft transport address"`
	// Timezone is the default time zone of job schedules.
	Timezone string `flag:"timezone" env:"CRONIX_TIMEZONE" yaml:"timezone" help:"default time zone of schedules (IANA name; empty = the machine's)"`
	// NodeGroup is the group of the built-in node.
	NodeGroup string `flag:"node-group" env:"CRONIX_NODE_GROUP" yaml:"node_group" help:"group (appname) of the built-in node"`
	// NodeToken authenticates nodes to servers; generated into the data dir when empty.
	NodeToken string `flag:"node-token" env:"CRONIX_NODE_TOKEN" yaml:"node_token" help:"shared secret between nodes and servers (default: generated into <data-dir>/node-token)"`
	// OutputCap is the most output kept per run.
	OutputCap int `flag:"output-cap" env:"CRONIX_OUTPUT_CAP" yaml:"output_cap" help:"bytes of output kept per run (more is truncated and flagged)"`
	// ResultMemory bounds the built-in node's undelivered results in memory.
	ResultMemory int `flag:"result-memory" env:"CRONIX_RESULT_MEMORY" yaml:"result_memory" help:"bytes of undelivered results the node holds in memory while no server takes them (more wait in its spool file only, read back in order)"`
	// MaxConcurrent bounds the built-in node's fires running at once.
	MaxConcurrent int `flag:"max-concurrent" env:"CRONIX_MAX_CONCURRENT" yaml:"max_concurrent" help:"fires the node runs at once; more wait for a slot (a fire dispatched ahead of its time takes its slot when handed to its plugin, so keep it above the fires due in one second)"`
	// MetricsAddr serves /metrics without authentication when set.
	MetricsAddr string `flag:"metrics-addr" env:"CRONIX_METRICS_ADDR" yaml:"metrics_addr" help:"address of a separate listener serving /metrics, /healthz and /readyz without authentication (empty: none; /metrics on the API port needs a token)"`
}

// serverConfig configures "cronix server".
type serverConfig struct {
	commonConfig
	placementConfig
	pprofConfig
	alertConfig
	sessionConfig
	retentionConfig
	ID      string `flag:"id" env:"CRONIX_SERVER_ID" yaml:"id" help:"unique id of this replica (default: host:raft-port)"`
	DataDir string `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"directory for raft state"`
	etcdClientConfig
	httpTLSConfig
	HTTPAddr          string   `flag:"http-addr" env:"CRONIX_HTTP_ADDR" yaml:"http_addr" help:"address of the REST API and web admin"`
	AdvertiseURL      string   `flag:"advertise-url" env:"CRONIX_ADVERTISE_URL" yaml:"advertise_url" help:"URL nodes use to reach this replica's API (default: http(s)://<http-addr>)"`
	DB                string   `flag:"db" env:"CRONIX_DB" yaml:"db" help:"database DSN: sqlite:///path.db, postgres://..., mysql://user:pass@tcp(host:3306)/db?parseTime=true (empty: sqlite://<data-dir>/cronix.db, for a single replica; HA replicas share one PostgreSQL or MySQL database)"`
	RaftAddr          string   `flag:"raft-addr" env:"CRONIX_RAFT_ADDR" yaml:"raft_addr" help:"raft transport address"`
	RaftBootstrap     bool     `flag:"raft-bootstrap" env:"CRONIX_RAFT_BOOTSTRAP" yaml:"raft_bootstrap" help:"bootstrap a new single-voter raft cluster on first start"`
	RaftPeers         []string `flag:"raft-peers" env:"CRONIX_RAFT_PEERS" yaml:"raft_peers" help:"comma-separated id=host:port of every voter of a new HA cluster, this replica included; a replica with no raft state bootstraps it (same list on every replica)"`
	Timezone          string   `flag:"timezone" env:"CRONIX_TIMEZONE" yaml:"timezone" help:"default time zone of schedules (IANA name; empty = the machine's)"`
	NodeToken         string   `flag:"node-token" env:"CRONIX_NODE_TOKEN" yaml:"node_token" help:"shared secret nodes present when reporting results (required)"`
	PreviousNodeToken string   `flag:"previous-node-token" env:"CRONIX_PREVIOUS_NODE_TOKEN" yaml:"previous_node_token" help:"during a node token rotation: the other token still accepted from nodes (see docs/security.md)"`
	DispatchMaxOps    int      `flag:"dispatch-max-ops" env:"CRONIX_DISPATCH_MAX_OPS" yaml:"dispatch_max_ops" help:"most operations per etcd transaction (etcd's --max-txn-ops)"`
	MetricsAddr       string   `flag:"metrics-addr" env:"CRONIX_METRICS_ADDR" yaml:"metrics_addr" help:"address of a separate listener serving /metrics, /healthz and /readyz without authentication (empty: none; /metrics on the API port needs a token)"`
}

// etcdConfig configures "cronix etcd".
type etcdConfig struct {
	// DataDir is the etcd data directory.
	DataDir string `flag:"data-dir" env:"CRONIX_ETCD_DATA_DIR" yaml:"data_dir" help:"etcd data directory"`
	// ClientAddr is host:port etcd serves clients on.
	ClientAddr string `flag:"client-addr" env:"CRONIX_ETCD_CLIENT_ADDR" yaml:"client_addr" help:"etcd client address (host:port)"`
	// PeerAddr is host:port of etcd's peer listener.
	PeerAddr string `flag:"peer-addr" env:"CRONIX_ETCD_PEER_ADDR" yaml:"peer_addr" help:"etcd peer address (host:port)"`
	// RootPassword turns etcd auth on with this password for the root user.
	RootPassword string `flag:"root-password" env:"CRONIX_ETCD_ROOT_PASSWORD" yaml:"root_password" help:"turn etcd authentication on: the user root gets this password and every client must log in (prefer the environment variable to the flag)"`
	// TLSCert and TLSKey serve clients over https.
	TLSCert string `flag:"tls-cert" env:"CRONIX_ETCD_TLS_CERT" yaml:"tls_cert" help:"serving certificate (PEM): clients then connect with https://"`
	TLSKey  string `flag:"tls-key" env:"CRONIX_ETCD_TLS_KEY" yaml:"tls_key" help:"private key (PEM) of --tls-cert"`
	// TLSClientCA requires client certificates signed by this CA.
	TLSClientCA string `flag:"tls-client-ca" env:"CRONIX_ETCD_TLS_CLIENT_CA" yaml:"tls_client_ca" help:"CA (PEM) that must have signed every client's certificate (needs --tls-cert); with auth on, a certificate's common name is the etcd user"`
}

func defaultEtcd() etcdConfig {
	return etcdConfig{DataDir: "./etcd-data", ClientAddr: "127.0.0.1:2379", PeerAddr: "127.0.0.1:2380"}
}

// pluginConfig configures a node's plugins (in "cronix node" and "cronix standalone").
type pluginConfig struct {
	// PluginDir holds third-party plugin binaries named cronix-plugin-*.
	PluginDir string `flag:"plugin-dir" env:"CRONIX_PLUGIN_DIR" yaml:"plugin_dir" help:"directory of third-party plugin binaries (cronix-plugin-*); each needs its checksum in --plugin-checksums"`
	// PluginChecksums pin the plugin dir's binaries: name=sha256hex entries.
	PluginChecksums []string `flag:"plugin-checksums" env:"CRONIX_PLUGIN_CHECKSUMS" yaml:"plugin_checksums" help:"comma-separated name=sha256 of the plugin dir's binaries (e.g. notify=9f86d0...); a binary without a matching checksum is not loaded"`
	// HTTPAllowLoopback lets the http handler reach loopback addresses.
	HTTPAllowLoopback bool `flag:"http-allow-loopback" env:"CRONIX_HTTP_ALLOW_LOOPBACK" yaml:"http_allow_loopback" help:"let the http handler connect to loopback addresses (127.0.0.0/8, ::1)"`
	// HTTPAllowPrivate lets the http handler reach private addresses.
	HTTPAllowPrivate bool `flag:"http-allow-private" env:"CRONIX_HTTP_ALLOW_PRIVATE" yaml:"http_allow_private" help:"let the http handler connect to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)"`
}

// alertConfig configures alerting (in "cronix server" and "cronix
// standalone"). Settings set here override those stored through
// PUT /api/v1/settings/alerting (config as code).
type alertConfig struct {
	// AlertSMTPHost is the mail server; empty leaves SMTP to the stored settings.
	AlertSMTPHost string `flag:"alert-smtp-host" env:"CRONIX_ALERT_SMTP_HOST" yaml:"alert_smtp_host" help:"SMTP server of alert e-mails (overrides the stored settings' smtp)"`
	// AlertSMTPPort is its port (0 = by security: 587, 465 or 25).
	AlertSMTPPort int `flag:"alert-smtp-port" env:"CRONIX_ALERT_SMTP_PORT" yaml:"alert_smtp_port" help:"SMTP port (0 = 587 for starttls, 465 for tls, 25 for none)"`
	// AlertSMTPSecurity is starttls, tls or none.
	AlertSMTPSecurity string `flag:"alert-smtp-security" env:"CRONIX_ALERT_SMTP_SECURITY" yaml:"alert_smtp_security" help:"SMTP connection security: starttls, tls or none"`
	// AlertSMTPUsername authenticates to the SMTP server.
	AlertSMTPUsername string `flag:"alert-smtp-username" env:"CRONIX_ALERT_SMTP_USERNAME" yaml:"alert_smtp_username" help:"SMTP user name (empty = no authentication)"`
	// AlertSMTPPassword is the SMTP password (prefer the environment variable).
	AlertSMTPPassword string `flag:"alert-smtp-password" env:"CRONIX_ALERT_SMTP_PASSWORD" yaml:"alert_smtp_password" help:"SMTP password (prefer the environment variable; never shown)"`
	// AlertSMTPFrom is the sender address.
	AlertSMTPFrom string `flag:"alert-smtp-from" env:"CRONIX_ALERT_SMTP_FROM" yaml:"alert_smtp_from" help:"sender address of alert e-mails"`
	// AlertAdminEmails receive events about no job (cluster.no_leader, security).
	AlertAdminEmails []string `flag:"alert-admin-emails" env:"CRONIX_ALERT_ADMIN_EMAILS" yaml:"alert_admin_emails" help:"comma-separated recipients of cluster-wide alerts (cluster.no_leader, security)"`
	// AlertWebhookURL is a global webhook named "default".
	AlertWebhookURL string `flag:"alert-webhook-url" env:"CRONIX_ALERT_WEBHOOK_URL" yaml:"alert_webhook_url" help:"URL of a global webhook named \"default\" receiving every alert (overrides the stored webhooks)"`
	// AlertWebhookSecret signs its bodies.
	AlertWebhookSecret string `flag:"alert-webhook-secret" env:"CRONIX_ALERT_WEBHOOK_SECRET" yaml:"alert_webhook_secret" help:"signing secret of --alert-webhook-url (Standard Webhooks; whsec_<base64> or any string)"`
	// AlertThrottleWindow: at most one alert per job and kind in it.
	AlertThrottleWindow time.Duration `flag:"alert-throttle-window" env:"CRONIX_ALERT_THROTTLE_WINDOW" yaml:"alert_throttle_window" help:"at most one alert per job and event kind in this window (0 = stored setting, default 10m)"`
	// AlertMissedThreshold: a fire this late raises schedule.missed.
	AlertMissedThreshold time.Duration `flag:"alert-missed-threshold" env:"CRONIX_ALERT_MISSED_THRESHOLD" yaml:"alert_missed_threshold" help:"a fire not dispatched this long after it was due raises schedule.missed (0 = stored setting, default 30s)"`
	// AlertNoLeaderAfter: no raft leader this long raises cluster.no_leader.
	AlertNoLeaderAfter time.Duration `flag:"alert-no-leader-after" env:"CRONIX_ALERT_NO_LEADER_AFTER" yaml:"alert_no_leader_after" help:"no raft leader for this long raises cluster.no_leader (0 = stored setting, default 30s)"`
	// AlertRetryBase is the wait after a first failed delivery, doubled per attempt.
	AlertRetryBase time.Duration `flag:"alert-retry-base" env:"CRONIX_ALERT_RETRY_BASE" yaml:"alert_retry_base" help:"wait after a failed alert delivery, doubled per attempt up to 10m (8 attempts; 0 = 10s)"`
	// AlertWebhookAllowLoopback lets webhooks reach loopback addresses.
	AlertWebhookAllowLoopback bool `flag:"alert-webhook-allow-loopback" env:"CRONIX_ALERT_WEBHOOK_ALLOW_LOOPBACK" yaml:"alert_webhook_allow_loopback" help:"let alert webhooks connect to loopback addresses (127.0.0.0/8, ::1)"`
	// AlertWebhookAllowPrivate lets webhooks reach private addresses.
	AlertWebhookAllowPrivate bool `flag:"alert-webhook-allow-private" env:"CRONIX_ALERT_WEBHOOK_ALLOW_PRIVATE" yaml:"alert_webhook_allow_private" help:"let alert webhooks connect to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7)"`
}

// alertServiceConfig maps the flags to the alert service's configuration.
func (c alertConfig) alertServiceConfig() alert.Config {
	f := alert.Settings{
		SMTP: alert.SMTP{Host: c.AlertSMTPHost, Port: c.AlertSMTPPort, Security: c.AlertSMTPSecurity,
			Username: c.AlertSMTPUsername, Password: c.AlertSMTPPassword, From: c.AlertSMTPFrom},
		AdminEmails: c.AlertAdminEmails, ThrottleWindow: alert.Duration(c.AlertThrottleWindow),
		MissedThreshold: alert.Duration(c.AlertMissedThreshold), NoLeaderAfter: alert.Duration(c.AlertNoLeaderAfter),
	}
	if c.AlertWebhookURL != "" {
		f.Webhooks = []alert.Webhook{{Name: "default", URL: c.AlertWebhookURL, Secret: c.AlertWebhookSecret}}
	}
	return alert.Config{Flags: f, RetryBase: c.AlertRetryBase,
		WebhookAllowLoopback: c.AlertWebhookAllowLoopback, WebhookAllowPrivate: c.AlertWebhookAllowPrivate}
}

// nodeConfig configures "cronix node".
type nodeConfig struct {
	commonConfig
	pprofConfig
	pluginConfig
	etcdClientConfig
	httpTLSConfig
	DataDir           string        `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"directory for the node's uuid and result spool"`
	Group             string        `flag:"group" env:"CRONIX_NODE_GROUP" yaml:"group" help:"group (appname) this node serves"`
	NodeToken         string        `flag:"node-token" env:"CRONIX_NODE_TOKEN" yaml:"node_token" help:"shared secret presented to servers (required)"`
	PreviousNodeToken string        `flag:"previous-node-token" env:"CRONIX_PREVIOUS_NODE_TOKEN" yaml:"previous_node_token" help:"during a node token rotation: the other token whose cluster key still verifies records and which servers may present (see docs/security.md)"`
	ServerURLs        []string      `flag:"server-urls" env:"CRONIX_SERVER_URLS" yaml:"server_urls" help:"server API URLs for results (default: discovered in etcd)"`
	ListenAddr        string        `flag:"listen-addr" env:"CRONIX_NODE_LISTEN_ADDR" yaml:"listen_addr" help:"address of the node's health endpoint"`
	AdvertiseIP       string        `flag:"advertise-ip" env:"CRONIX_NODE_ADVERTISE_IP" yaml:"advertise_ip" help:"IP registered for this node (default: the listen address's IP)"`
	OutputCap         int           `flag:"output-cap" env:"CRONIX_OUTPUT_CAP" yaml:"output_cap" help:"bytes of output kept per run (more is truncated and flagged)"`
	ResultMemory      int           `flag:"result-memory" env:"CRONIX_RESULT_MEMORY" yaml:"result_memory" help:"bytes of undelivered results the node holds in memory while no server takes them (more wait in its spool file only, read back in order)"`
	MaxConcurrent     int           `flag:"max-concurrent" env:"CRONIX_MAX_CONCURRENT" yaml:"max_concurrent" help:"fires the node runs at once; more wait for a slot (a fire dispatched ahead of its time takes its slot when handed to its plugin, so keep it above the fires due in one second)"`
	LeaseTTL          time.Duration `flag:"lease-ttl" env:"CRONIX_NODE_LEASE_TTL" yaml:"lease_ttl" help:"TTL of the node's etcd registration lease"`
	MetricsAddr       string        `flag:"metrics-addr" env:"CRONIX_METRICS_ADDR" yaml:"metrics_addr" help:"address of a separate listener serving /metrics, /healthz and /readyz without authentication (empty: none; /metrics on --listen-addr needs the node token)"`
}

func defaultStandalone() standaloneConfig {
	return standaloneConfig{commonConfig: defaultCommon(), sessionConfig: defaultSession(), placementConfig: defaultPlacement(), DataDir: "./data", HTTPAddr: "127.0.0.1:8080",
		EtcdClientAddr: "127.0.0.1:2379", EtcdPeerAddr: "127.0.0.1:2380", RaftAddr: "127.0.0.1:7946",
		NodeGroup: "default", OutputCap: 1 << 20, ResultMemory: agent.DefaultResultMemory, MaxConcurrent: agent.DefaultMaxConcurrent}
}

func defaultServer() serverConfig {
	return serverConfig{commonConfig: defaultCommon(), sessionConfig: defaultSession(), placementConfig: defaultPlacement(), etcdClientConfig: defaultEtcdClient(), DataDir: "./data",
		HTTPAddr: "127.0.0.1:8080", RaftAddr: "127.0.0.1:7946", DispatchMaxOps: 128}
}

func defaultNode() nodeConfig {
	return nodeConfig{commonConfig: defaultCommon(), etcdClientConfig: defaultEtcdClient(), DataDir: "./node-data",
		Group: "default", ListenAddr: "127.0.0.1:0", OutputCap: 1 << 20, ResultMemory: agent.DefaultResultMemory,
		MaxConcurrent: agent.DefaultMaxConcurrent, LeaseTTL: 10 * time.Second}
}

const (
	standaloneSummary = "Runs Cronix in one process: embedded etcd, SQLite, a single-voter raft, the server (API + UI) and one node with the built-in plugins."
	serverSummary     = "Runs a server replica: REST API, web admin, raft; the raft leader fires jobs. Needs external etcd and a database."
	etcdSummary       = "Runs a single-member embedded etcd, for development, 'make run-ha' and tests; production uses a real etcd cluster."
	nodeSummary       = "Runs a node agent: registers in etcd, runs dispatched fires through handler plugins, reports results."
)

// loadConfig fills cfg (whose common part is common) for the command name
// and builds the command's logger.
func loadConfig(cfg any, common *commonConfig, name, summary string, args []string,
	getenv func(string) string, stderr io.Writer) (*slog.Logger, error) {
	if err := config.Load(cfg, name, summary, args, getenv, stderr); err != nil {
		return nil, err
	}
	return newLogger(*common, stderr)
}

// requireNodeToken trims the node token and insists on one.
func requireNodeToken(token *string) error {
	*token = strings.TrimSpace(*token)
	if *token == "" {
		return errors.New("--node-token (CRONIX_NODE_TOKEN) is required")
	}
	return nil
}

func newLogger(c commonConfig, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.LogFormat {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", c.LogFormat)
}

func runStandalone(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := defaultStandalone()
	log, err := loadConfig(&cfg, &cfg.commonConfig, "standalone", standaloneSummary, args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := cfg.checkRetention(); err != nil {
		return err
	}
	if err := cfg.checkDispatch(); err != nil {
		return err
	}
	if err := checkNodeSizes(cfg.OutputCap, cfg.ResultMemory, cfg.MaxConcurrent); err != nil {
		return err
	}
	loc, err := loadLocation(cfg.Timezone)
	if err != nil {
		return err
	}
	stopPprof, err := cfg.start(ctx, log, stdout)
	if err != nil {
		return err
	}
	defer stopPprof()
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	token := cfg.NodeToken
	if token == "" {
		if token, err = persistentSecret(filepath.Join(dataDir, "node-token")); err != nil {
			return err
		}
	}
	// The embedded etcd is reachable by anything on the machine: auth is on,
	// with a root password kept beside the node token.
	etcdPassword, err := persistentSecret(filepath.Join(dataDir, etcdPasswordFile))
	if err != nil {
		return err
	}
	etcd, err := embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(dataDir, "etcd"),
		ClientAddr: cfg.EtcdClientAddr, PeerAddr: cfg.EtcdPeerAddr, RootPassword: etcdPassword})
	if err != nil {
		return err
	}
	defer stopWithin(log, "embedded etcd", etcdStopTimeout, etcd.Close)
	met := metrics.New() // one registry for the server and the node
	cli, err := etcd.Client(met.EtcdDialOptions()...)
	if err != nil {
		return err
	}
	defer cli.Close()
	keys := cluster.NewKeys(cfg.EtcdRoot)

	srv, err := server.New(server.Config{
		ID: "standalone", DataDir: filepath.Join(dataDir, "raft"), HTTPAddr: cfg.HTTPAddr,
		DSN: "sqlite://" + filepath.Join(dataDir, "cronix.db"), Keys: keys,
		RaftAddr: cfg.RaftAddr, RaftBootstrap: true, Location: loc, NodeToken: token,
		AdminPassword: getenv("CRONIX_ADMIN_PASSWORD"), DispatchMaxOps: embedetcd.DefaultMaxTxnOps, PlaceJobs: cfg.PlaceJobs, DispatchAhead: cfg.DispatchAhead,
		Version: buildinfo.String(), Logger: log, Alert: cfg.alertServiceConfig(),
		RunRetention: cfg.RunRetention, OutputRetention: cfg.OutputRetention,
		Report:             report.Config{Interval: cfg.ReportInterval},
		SessionIdleTimeout: cfg.SessionIdleTimeout, SessionMaxLifetime: cfg.SessionMaxLifetime,
		BuiltinHandlers: builtinHandlers(ctx),
		Metrics:         met, MetricsAddr: cfg.MetricsAddr,
	}, cli)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer stopWithin(log, "server", serverStopTimeout, srv.Stop)

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating own binary for built-in plugins: %w", err)
	}
	nd, err := node.New(node.Config{
		DataDir: filepath.Join(dataDir, "node"), Group: cfg.NodeGroup, Keys: keys, NodeToken: token,
		ServerURLs: []string{srv.URL()}, ListenAddr: "127.0.0.1:0", OutputCap: cfg.OutputCap, ResultMemory: cfg.ResultMemory,
		MaxConcurrent: cfg.MaxConcurrent, Plugins: builtinPlugins(exe, cfg.pluginConfig), PluginDir: cfg.PluginDir, PluginChecksums: cfg.PluginChecksums,
		Version: buildinfo.String(), Logger: log, Metrics: met,
	}, cli)
	if err != nil {
		return err
	}
	if err := nd.Start(ctx); err != nil {
		return err
	}
	defer stopWithin(log, "node", nodeStopTimeout, nd.Stop)
	nd.AddReadyChecks(srv.Readiness())

	// The URL is printed only once the instance can serve (GET /readyz would answer 200).
	waitCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	err = srv.Readiness().Wait(waitCtx, 100*time.Millisecond)
	cancel()
	if err != nil {
		return fmt.Errorf("not ready within %s: %w", readyTimeout, err)
	}
	fmt.Fprintf(stdout, "\nCronix %s is running (standalone)\n  URL:   %s\n", buildinfo.String(), srv.URL())
	printLogin(stdout, srv, getenv("CRONIX_ADMIN_PASSWORD") != "")
	fmt.Fprintf(stdout, "  etcd:  %s (user root, password in %s)\n  node token: %s\n  data:  %s\n",
		etcd.Endpoint(), filepath.Join(dataDir, etcdPasswordFile), filepath.Join(dataDir, "node-token"), dataDir)
	if a := srv.MetricsAddr(); a != "" {
		fmt.Fprintf(stdout, "  metrics: http://%s/metrics\n", a)
	}
	fmt.Fprint(stdout, "  Stop with Ctrl-C.\n\n")
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping… (Ctrl-C again to exit at once)")
	return nil
}

func runServer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := defaultServer()
	log, err := loadConfig(&cfg, &cfg.commonConfig, "server", serverSummary, args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := cfg.checkRetention(); err != nil {
		return err
	}
	if err := cfg.checkDispatch(); err != nil {
		return err
	}
	if err := requireNodeToken(&cfg.NodeToken); err != nil {
		return err
	}
	if cfg.DB == "" {
		cfg.DB = "sqlite://" + filepath.Join(cfg.DataDir, "cronix.db")
	}
	loc, err := loadLocation(cfg.Timezone)
	if err != nil {
		return err
	}
	if cfg.ID == "" {
		cfg.ID = cfg.RaftAddr
	}
	if msg := api.CheckServerID(cfg.ID); msg != "" {
		// The id other replicas and DELETE /api/v1/cluster/servers/{id} name it by.
		return fmt.Errorf("--id %q %s", cfg.ID, msg)
	}
	if err := checkRaftPeers(cfg); err != nil {
		return err
	}
	if err := cfg.checkTLS(); err != nil {
		return err
	}
	nodeTLS, err := tlsfiles.Client(cfg.TLSCA)
	if err != nil {
		return fmt.Errorf("--tls-ca: %w", err)
	}
	stopPprof, err := cfg.start(ctx, log, stdout)
	if err != nil {
		return err
	}
	defer stopPprof()
	met := metrics.New()
	cli, err := etcdClient(cfg.etcdClientConfig, met)
	if err != nil {
		return err
	}
	defer cli.Close()
	srv, err := server.New(server.Config{
		ID: cfg.ID, DataDir: cfg.DataDir, HTTPAddr: cfg.HTTPAddr, AdvertiseURL: cfg.AdvertiseURL,
		DSN: cfg.DB, Keys: cluster.NewKeys(cfg.EtcdRoot), RaftAddr: cfg.RaftAddr, RaftBootstrap: cfg.RaftBootstrap,
		RaftPeers: cfg.RaftPeers, Location: loc, NodeToken: cfg.NodeToken, PreviousNodeToken: strings.TrimSpace(cfg.PreviousNodeToken),
		AdminPassword: getenv("CRONIX_ADMIN_PASSWORD"),
		TLSCertFile:   cfg.TLSCert, TLSKeyFile: cfg.TLSKey, NodeTLS: nodeTLS,
		DispatchMaxOps: cfg.DispatchMaxOps, PlaceJobs: cfg.PlaceJobs, DispatchAhead: cfg.DispatchAhead, Version: buildinfo.String(), Logger: log,
		Alert:        cfg.alertServiceConfig(),
		RunRetention: cfg.RunRetention, OutputRetention: cfg.OutputRetention,
		Report:             report.Config{Interval: cfg.ReportInterval},
		SessionIdleTimeout: cfg.SessionIdleTimeout, SessionMaxLifetime: cfg.SessionMaxLifetime,
		BuiltinHandlers: builtinHandlers(ctx),
		Metrics:         met, MetricsAddr: cfg.MetricsAddr,
	}, cli)
	if err != nil {
		return err
	}
	if err := srv.Start(ctx); err != nil {
		return err
	}
	defer stopWithin(log, "server", serverStopTimeout, srv.Stop)
	fmt.Fprintf(stdout, "Cronix server %s is running: %s\n", cfg.ID, srv.URL())
	printLogin(stdout, srv, getenv("CRONIX_ADMIN_PASSWORD") != "")
	<-ctx.Done()
	return nil
}

// checkRaftPeers rejects a --raft-peers list that would make replicas
// bootstrap different configurations.
func checkRaftPeers(cfg serverConfig) error {
	if len(cfg.RaftPeers) == 0 {
		return nil
	}
	if cfg.RaftBootstrap {
		return errors.New("--raft-peers and --raft-bootstrap exclude each other (--raft-bootstrap is a single voter)")
	}
	for _, p := range cfg.RaftPeers {
		if id, addr, ok := strings.Cut(strings.TrimSpace(p), "="); ok && id == cfg.ID {
			if addr != cfg.RaftAddr {
				return fmt.Errorf("--raft-peers lists %s at %s but --raft-addr is %s", id, addr, cfg.RaftAddr)
			}
			return nil
		}
	}
	return fmt.Errorf("--raft-peers must list this replica (--id %s); to add a replica to a running cluster start it without --raft-peers and POST /api/v1/cluster/servers on the leader", cfg.ID)
}

func runEtcd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := defaultEtcd()
	if err := config.Load(&cfg, "etcd", etcdSummary, args, getenv, stderr); err != nil {
		return err
	}
	e, err := embedetcd.Start(ctx, embedetcd.Config{Dir: cfg.DataDir, ClientAddr: cfg.ClientAddr, PeerAddr: cfg.PeerAddr,
		RootPassword: cfg.RootPassword, CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, ClientCAFile: cfg.TLSClientCA})
	if err != nil {
		return err
	}
	defer e.Close()
	auth := "off"
	if cfg.RootPassword != "" {
		auth = "on (user root)"
	}
	fmt.Fprintf(stdout, "etcd is running: %s (auth %s)\n", e.Endpoint(), auth)
	<-ctx.Done()
	return nil
}

// checkNodeSizes rejects a node's limits that are not positive (0 would
// otherwise mean the agent's default, unlike what --help shows).
func checkNodeSizes(outputCap, resultMemory, maxConcurrent int) error {
	if outputCap <= 0 {
		return fmt.Errorf("--output-cap %d: must be a positive number of bytes", outputCap)
	}
	if resultMemory <= 0 {
		return fmt.Errorf("--result-memory %d: must be a positive number of bytes", resultMemory)
	}
	if maxConcurrent <= 0 {
		return fmt.Errorf("--max-concurrent %d: must be a positive number of fires", maxConcurrent)
	}
	return nil
}

func runNode(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := defaultNode()
	log, err := loadConfig(&cfg, &cfg.commonConfig, "node", nodeSummary, args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := requireNodeToken(&cfg.NodeToken); err != nil {
		return err
	}
	if err := cfg.checkTLS(); err != nil {
		return err
	}
	if err := checkNodeSizes(cfg.OutputCap, cfg.ResultMemory, cfg.MaxConcurrent); err != nil {
		return err
	}
	serverClient, err := tlsfiles.HTTPClient(cfg.TLSCA, 30*time.Second)
	if err != nil {
		return fmt.Errorf("--tls-ca: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating own binary for built-in plugins: %w", err)
	}
	stopPprof, err := cfg.start(ctx, log, stdout)
	if err != nil {
		return err
	}
	defer stopPprof()
	met := metrics.New()
	cli, err := etcdClient(cfg.etcdClientConfig, met)
	if err != nil {
		return err
	}
	defer cli.Close()
	nd, err := node.New(node.Config{
		DataDir: cfg.DataDir, Group: cfg.Group, Keys: cluster.NewKeys(cfg.EtcdRoot), NodeToken: cfg.NodeToken,
		PreviousNodeToken: strings.TrimSpace(cfg.PreviousNodeToken), ServerURLs: cfg.ServerURLs, ListenAddr: cfg.ListenAddr, AdvertiseIP: cfg.AdvertiseIP,
		TLSCertFile: cfg.TLSCert, TLSKeyFile: cfg.TLSKey, HTTPClient: serverClient,
		OutputCap: cfg.OutputCap, ResultMemory: cfg.ResultMemory, MaxConcurrent: cfg.MaxConcurrent, LeaseTTL: cfg.LeaseTTL, Plugins: builtinPlugins(exe, cfg.pluginConfig),
		PluginDir: cfg.PluginDir, PluginChecksums: cfg.PluginChecksums, Version: buildinfo.String(), Logger: log,
		Metrics: met, MetricsAddr: cfg.MetricsAddr,
	}, cli)
	if err != nil {
		return err
	}
	if err := nd.Start(ctx); err != nil {
		return err
	}
	defer stopWithin(log, "node", nodeStopTimeout, nd.Stop)
	fmt.Fprintf(stdout, "Cronix node %s is running (group %q)\n", nd.UUID(), cfg.Group)
	<-ctx.Done()
	return nil
}

// builtinPlugins are the handlers shipped in this binary, each started as
// "cronix plugin NAME" and pinned to this binary's checksum; pc passes the
// http handler its destination guard settings.
func builtinPlugins(exe string, pc pluginConfig) []pluginhost.Spec {
	sum, _ := fileSHA256(exe) // empty on error: the host then loads without a checksum check
	specs := make([]pluginhost.Spec, 0, len(builtins))
	for name := range builtins {
		spec := pluginhost.Spec{Name: name, Cmd: []string{exe, "plugin", name}, SHA256: sum}
		if name == httpplugin.Name {
			spec.Env = []string{
				httpplugin.EnvAllowLoopback + "=" + strconv.FormatBool(pc.HTTPAllowLoopback),
				httpplugin.EnvAllowPrivate + "=" + strconv.FormatBool(pc.HTTPAllowPrivate),
			}
		}
		specs = append(specs, spec)
	}
	return specs
}

// builtins maps a built-in plugin's name to its handler.
var builtins = map[string]func() pluginapi.Handler{
	shell.Name:      shell.New,
	cmdplugin.Name:  cmdplugin.New,
	httpplugin.Name: httpplugin.New,
}

func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 1 {
		switch args[0] {
		case "verify":
			return runPluginVerify(ctx, args[1:], stdout, stderr)
		case "list":
			return runPluginList(ctx, args[1:], stdout, stderr)
		}
	}
	if len(args) != 1 {
		return fmt.Errorf("usage: cronix plugin NAME (one of %s) | verify FILE | list --plugin-dir DIR",
			strings.Join(builtinNames(), ", "))
	}
	h, ok := builtins[args[0]]
	if !ok {
		return fmt.Errorf("unknown built-in plugin %q (have %s)", args[0], strings.Join(builtinNames(), ", "))
	}
	if err := pluginapi.Serve(h()); err != nil {
		return fmt.Errorf("plugin %s: %w (plugins are started by 'cronix node', not by hand)", args[0], err)
	}
	return nil
}

// builtinHandlers describes the built-in handlers for the handler catalog,
// so jobs using them save before any node has registered.
func builtinHandlers(ctx context.Context) []handlers.Handler {
	out := make([]handlers.Handler, 0, len(builtins))
	for _, name := range builtinNames() {
		info, err := builtins[name]().Info(ctx)
		if err != nil {
			continue // a built-in describes itself without I/O; skip one that cannot
		}
		out = append(out, handlers.Handler{Name: info.Name, Version: info.Version, Description: info.Description,
			ParamsSchema: info.ParamsSchema})
	}
	return out
}

func builtinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	return names
}

func runDocs(args []string, stdout io.Writer) error {
	if len(args) != 1 || args[0] != "configuration" {
		return errors.New("usage: cronix docs configuration")
	}
	fmt.Fprint(stdout, configurationDoc())
	return nil
}

func loadLocation(name string) (*time.Location, error) {
	if name == "" {
		return schedule.HostZone(), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", name, err)
	}
	return loc, nil
}

// etcdClient connects to etcd with the configured TLS and credentials,
// timing requests in met. A password needs a username; a client
// certificate needs its key.
func etcdClient(c etcdClientConfig, met *metrics.Metrics) (*clientv3.Client, error) {
	if len(c.EtcdEndpoints) == 0 {
		return nil, errors.New("--etcd-endpoints is required")
	}
	cc := clientv3.Config{Endpoints: c.EtcdEndpoints, DialTimeout: 10 * time.Second,
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 3 * time.Second, Logger: zap.NewNop(),
		Username: c.EtcdUsername, Password: c.EtcdPassword, DialOptions: met.EtcdDialOptions()}
	switch {
	case c.EtcdPassword != "" && c.EtcdUsername == "":
		return nil, errors.New("--etcd-password needs --etcd-username")
	case c.EtcdUsername != "" && c.EtcdPassword == "":
		return nil, errors.New("--etcd-username needs --etcd-password (CRONIX_ETCD_PASSWORD)")
	case (c.EtcdCert == "") != (c.EtcdKey == ""):
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	tlsOn := c.EtcdCA != "" || c.EtcdCert != ""
	for _, ep := range c.EtcdEndpoints {
		tlsOn = tlsOn || strings.HasPrefix(ep, "https://")
	}
	if tlsOn {
		info := transport.TLSInfo{CertFile: c.EtcdCert, KeyFile: c.EtcdKey, TrustedCAFile: c.EtcdCA}
		tc, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
		cc.TLS = tc
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", c.EtcdEndpoints, err)
	}
	return cli, nil
}

// etcdPasswordFile is the file in standalone's data dir holding the
// embedded etcd's root password.
const etcdPasswordFile = "etcd-root-password"

// persistentSecret reads a secret from path, creating it (0600) if missing.
func persistentSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	s := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return s, nil
}

// printLogin tells how to log in. A generated password is printed once, on
// the start that created it; a password the operator chose is never echoed.
func printLogin(w io.Writer, srv *server.Server, fromEnv bool) {
	created, pw := srv.AdminCreated()
	switch {
	case created && !fromEnv:
		fmt.Fprintf(w, "  login: admin / %s   (shown once; set CRONIX_ADMIN_PASSWORD to choose it)\n", pw)
	case created:
		fmt.Fprintln(w, "  login: admin / the password in CRONIX_ADMIN_PASSWORD")
	default:
		fmt.Fprintln(w, "  login: admin (password set on first start)")
	}
}
