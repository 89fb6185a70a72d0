package alert

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/server/store"
)

// Store is the SQL record the alert service reads and writes (satisfied by
// *store.Store).
type Store interface {
	InsertAlertEvent(ctx context.Context, ev *store.AlertEvent, deliveries []store.AlertDelivery) (bool, error)
	LatestAlertEvent(ctx context.Context, jobID int64, kinds []string, exceptReason string) (*store.AlertEvent, error)
	LatestDeliveredAlertEvent(ctx context.Context, jobID int64, kind string) (*store.AlertEvent, error)
	CountSuppressedAlertEvents(ctx context.Context, jobID int64) (int, error)
	DueAlertDeliveries(ctx context.Context, now time.Time, limit int) ([]store.AlertDelivery, error)
	ClaimAlertDelivery(ctx context.Context, id int64, now, until time.Time) (bool, error)
	RecordAlertAttempt(ctx context.Context, id int64, a store.AlertAttempt) error
	GetAlertEvent(ctx context.Context, id int64) (*store.AlertEvent, error)
	FindAlertEvents(ctx context.Context, f store.AlertEventFilter, p store.Page) ([]store.AlertEvent, int, error)
	GetSetting(ctx context.Context, name string) (string, error)
	PutSetting(ctx context.Context, name, value, updatedBy string) error
	GetJob(ctx context.Context, id int64) (*store.Job, error)
	TerminalRunKeysSince(ctx context.Context, since time.Time, afterID int64, until time.Time, limit int) ([]store.ScanKey, error)
	TerminalRunIDsThrough(ctx context.Context, since, through time.Time, throughID int64) ([]int64, error)
	TerminalRunHeads(ctx context.Context, ids []int64) ([]store.Run, error)
	UndispatchedRunsBefore(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.Run, error)
	RunByFireID(ctx context.Context, fireID string) (*store.Run, error)
}

var _ Store = (*store.Store)(nil)

// Setting names in the settings table.
const (
	settingAlerting   = "alerting"
	settingScanCursor = "alert_scan_cursor"
)

// Defaults of Config.
const (
	DefaultPollInterval = time.Second
	DefaultRetryBase    = 10 * time.Second
	DefaultRetryMax     = 10 * time.Minute
	DefaultMaxAttempts  = 8
	DefaultClaimTTL     = time.Minute
	DefaultSendTimeout  = 30 * time.Second
	DefaultScanInterval = time.Second
	DefaultSettle       = 2 * time.Second
	DefaultRescan       = time.Minute
	DefaultOverlap      = 10 * time.Second
)

// Config wires a Service.
type Config struct {
	// Store is the SQL record. Required.
	Store Store
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// Metrics counts delivery attempts by channel and outcome (satisfied by
	// *metrics.Metrics); nil counts nothing.
	Metrics Recorder
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Flags are settings given by flags/env; their non-zero fields override
	// the stored settings (config as code).
	Flags Settings
	// BaseURL is the web admin's URL for links when the settings name none.
	BaseURL string
	// TLSConfig is the base TLS configuration of SMTP connections (e.g. a
	// private CA); nil = the system roots.
	TLSConfig *tls.Config
	// WebhookAllowLoopback and WebhookAllowPrivate let webhooks reach
	// loopback and private addresses (refused by default, like the http
	// handler: link-local and metadata addresses are always refused).
	WebhookAllowLoopback bool
	WebhookAllowPrivate  bool
	// PollInterval between delivery passes (default 1s).
	PollInterval time.Duration
	// RetryBase is the wait after a first failed attempt, doubled per
	// attempt up to RetryMax (defaults 10s, 10m).
	RetryBase time.Duration
	RetryMax  time.Duration
	// MaxAttempts before a delivery is failed for good (default 8).
	MaxAttempts int
	// ClaimTTL bounds how long a replica holds a delivery it is sending
	// (default 1m, above SendTimeout); a crashed holder's claim expires after it.
	ClaimTTL time.Duration
	// SendTimeout bounds one attempt (default 30s).
	SendTimeout time.Duration
	// ScanInterval between passes of the leader's run scanner (default 1s).
	ScanInterval time.Duration
	// Settle: runs are read once they are this old, so that transactions
	// committing late are not skipped (default 2s).
	Settle time.Duration
	// Rescan: a new leader re-reads this far before the stored cursor (default 1m).
	Rescan time.Duration
	// Overlap: every pass re-reads this far before its cursor, for runs
	// committed late (default 10s, above SQLite's 5s busy timeout).
	Overlap time.Duration
	// WatchCallTimeout bounds each store call of the no-leader watch
	// (default 10s): a database that hangs shows in the log as a failed
	// attempt, retried at the next check, instead of stopping the one
	// alert an outage depends on without a word.
	WatchCallTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.WatchCallTimeout, 10*time.Second)
	def(&c.RetryBase, DefaultRetryBase)
	def(&c.RetryMax, DefaultRetryMax)
	def(&c.ClaimTTL, DefaultClaimTTL)
	def(&c.SendTimeout, DefaultSendTimeout)
	def(&c.ScanInterval, DefaultScanInterval)
	def(&c.Settle, DefaultSettle)
	def(&c.Rescan, DefaultRescan)
	def(&c.Overlap, DefaultOverlap)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
}

// Recorder counts alert delivery attempts; outcome is "sent" or "failed".
type Recorder interface {
	AlertSent(channel, outcome string)
}

// Service raises alert events into the outbox and delivers them.
type Service struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}
}

var _ Raiser = (*Service)(nil)

// New returns a Service; its loops (RunSender, RunScanner, WatchLeader)
// are started by the caller.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("alert: Config.Store is required")
	}
	if err := cfg.Flags.Validate(); err != nil {
		return nil, fmt.Errorf("alert: settings from flags: %w", err)
	}
	cfg.setDefaults()
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "alert"), wake: make(chan struct{}, 1)}, nil
}

// Settings returns the effective settings: the stored ones overlaid with
// the flags, defaults filled.
func (s *Service) Settings(ctx context.Context) (Settings, error) {
	stored, err := s.storedSettings(ctx)
	if err != nil {
		return Settings{}, err
	}
	return Overlay(stored, s.cfg.Flags).withDefaults(), nil
}

// FlagSettings are the settings given by flags/env.
func (s *Service) FlagSettings() Settings { return s.cfg.Flags }

func (s *Service) storedSettings(ctx context.Context) (Settings, error) {
	var st Settings
	raw, err := s.cfg.Store.GetSetting(ctx, settingAlerting)
	if errors.Is(err, store.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("alert: reading settings: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return st, fmt.Errorf("alert: decoding stored settings: %w", err)
	}
	return st, nil
}

// PutSettings validates next and stores it, keeping the stored secrets
// that next leaves empty (see KeepSecrets) and the stored value of every
// field flags/env set (see KeepFlagged). It returns the effective settings.
func (s *Service) PutSettings(ctx context.Context, next Settings, by string) (Settings, error) {
	if err := next.Validate(); err != nil {
		return Settings{}, err
	}
	prev, err := s.storedSettings(ctx)
	if err != nil {
		return Settings{}, err
	}
	next = KeepFlagged(prev, KeepSecrets(prev, next), s.cfg.Flags)
	raw, err := json.Marshal(next)
	if err != nil {
		return Settings{}, fmt.Errorf("alert: encoding settings: %w", err)
	}
	if err := s.cfg.Store.PutSetting(ctx, settingAlerting, string(raw), by); err != nil {
		return Settings{}, fmt.Errorf("alert: storing settings: %w", err)
	}
	return s.Settings(ctx)
}

// FindEvents returns a page of alert events with their deliveries, newest
// first, and the total.
func (s *Service) FindEvents(ctx context.Context, f store.AlertEventFilter, p store.Page) ([]store.AlertEvent, int, error) {
	evs, total, err := s.cfg.Store.FindAlertEvents(ctx, f, p)
	if err != nil {
		return nil, 0, fmt.Errorf("alert: list events: %w", err)
	}
	return evs, total, nil
}

// Raise records ev in the outbox (see Raiser). A throttled event is
// recorded as suppressed and not delivered.
func (s *Service) Raise(ctx context.Context, ev Event) error {
	_, err := s.raise(ctx, ev, "")
	return err
}

// Suppression reasons.
const (
	reasonThrottled = "throttled"
	reasonEpisode   = "failure_episode"
	reasonLate      = "late"
)

// raise records ev; suppress, when set, records it suppressed for that
// reason. It reports whether the event was new.
func (s *Service) raise(ctx context.Context, ev Event, suppress string) (bool, error) {
	if ev.Key == "" || !knownKind(ev.Kind) {
		return false, fmt.Errorf("alert: raise: want a key and a known kind, got key %q kind %q", ev.Key, ev.Kind)
	}
	set, err := s.Settings(ctx)
	if err != nil {
		return false, err
	}
	var job *store.Job
	if ev.JobID != 0 {
		job, err = s.cfg.Store.GetJob(ctx, ev.JobID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			job = nil
		case err != nil:
			return false, fmt.Errorf("alert: raise %s: reading job %d: %w", ev.Key, ev.JobID, err)
		}
		if job != nil {
			if ev.JobName == "" {
				ev.JobName = job.Name
			}
			if ev.Group == "" {
				ev.Group = job.Group
			}
		}
	}
	row := store.AlertEvent{
		DedupeKey: ev.Key, Kind: ev.Kind, JobID: ev.JobID, JobName: ev.JobName, Group: ev.Group,
		RunID: ev.RunID, FireID: ev.FireID, Node: ev.Node, RunStatus: ev.RunStatus, ExitCode: ev.ExitCode,
		Message: ev.Message, OutputTail: ev.OutputTail, OccurredAt: ev.OccurredAt,
		Link: link(set, s.cfg.BaseURL, ev),
	}
	if row.OccurredAt.IsZero() {
		row.OccurredAt = s.cfg.Now()
	}
	if suppress == "" && ev.Kind != KindTest && set.ThrottleWindow > 0 {
		last, err := s.cfg.Store.LatestDeliveredAlertEvent(ctx, ev.JobID, ev.Kind)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return false, fmt.Errorf("alert: raise %s: %w", ev.Key, err)
		case s.cfg.Now().Sub(last.CreatedAt) < time.Duration(set.ThrottleWindow):
			suppress = reasonThrottled
		}
	}
	var deliveries []store.AlertDelivery
	if suppress != "" {
		row.Suppressed, row.SuppressedReason = true, suppress
	} else {
		if row.SuppressedCount, err = s.cfg.Store.CountSuppressedAlertEvents(ctx, ev.JobID); err != nil {
			return false, fmt.Errorf("alert: raise %s: %w", ev.Key, err)
		}
		deliveries = targets(set, ev, job)
	}
	inserted, err := s.cfg.Store.InsertAlertEvent(ctx, &row, deliveries)
	if err != nil {
		return false, fmt.Errorf("alert: raise %s: %w", ev.Key, err)
	}
	if inserted {
		s.log.Info("alert event raised", "kind", ev.Kind, "key", ev.Key, "job_id", ev.JobID,
			"suppressed", row.Suppressed, "deliveries", len(deliveries))
		s.Wake()
	}
	return inserted, nil
}

// Wake makes the local sender look for due deliveries now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// link is the web admin URL of the event's run (or job).
func link(set Settings, base string, ev Event) string {
	if set.PublicURL != "" {
		base = set.PublicURL
	}
	base = strings.TrimRight(base, "/")
	switch {
	case base == "":
		return ""
	case ev.RunID != 0:
		return base + "/runs/" + strconv.FormatInt(ev.RunID, 10)
	case ev.JobID != 0:
		return base + "/jobs/" + strconv.FormatInt(ev.JobID, 10)
	}
	return base + "/"
}

// Channels.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// targets are the deliveries of an event: one e-mail to the job's alarm
// e-mails and its group's defaults (or to the admin e-mails for an event
// about no job) when SMTP is set up, and one per matching webhook.
func targets(set Settings, ev Event, job *store.Job) []store.AlertDelivery {
	var out []store.AlertDelivery
	var rcpts []string
	if ev.JobID == 0 {
		rcpts = append(rcpts, set.AdminEmails...)
	} else {
		if job != nil {
			rcpts = append(rcpts, job.AlarmEmails...)
		}
		rcpts = append(rcpts, set.GroupEmails[ev.Group]...)
	}
	rcpts = dedupe(rcpts)
	if set.SMTP.Host != "" && len(rcpts) > 0 {
		out = append(out, store.AlertDelivery{Channel: ChannelEmail, Target: ChannelEmail, Recipients: rcpts})
	}
	for _, w := range set.Webhooks {
		if w.Group != "" && w.Group != ev.Group {
			continue
		}
		if len(w.Kinds) > 0 && !slices.Contains(w.Kinds, ev.Kind) {
			continue
		}
		out = append(out, store.AlertDelivery{Channel: ChannelWebhook, Target: w.Name})
	}
	return out
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := list[:0:0]
	for _, a := range list {
		a = strings.TrimSpace(a)
		if a == "" || seen[strings.ToLower(a)] {
			continue
		}
		seen[strings.ToLower(a)] = true
		out = append(out, a)
	}
	return out
}
