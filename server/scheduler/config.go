package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/dispatch"
	"github.com/cronix/cronix/server/store"
)

// JobSource reads job definitions (satisfied by *store.Store).
type JobSource interface {
	// ForEnabledJobs calls fn with every enabled job (a page of rows at a
	// time: the loop keeps a slim copy of each, never every full row).
	ForEnabledJobs(ctx context.Context, fn func(j *store.Job) error) error
	// EnabledJobRevisions returns the id, revision and schedule type of
	// every enabled job (the relist compares them, then reads the changed
	// jobs with JobsByID).
	EnabledJobRevisions(ctx context.Context) ([]store.JobRevision, error)
	// GetJob returns a job or an error wrapping store.ErrNotFound.
	GetJob(ctx context.Context, id int64) (*store.Job, error)
	// JobsByID returns the jobs of ids that exist (one query per few
	// hundred ids): a batch of job signals is loaded at once.
	JobsByID(ctx context.Context, ids []int64) ([]store.Job, error)
	// ListGroups returns every group (manual groups route to their
	// Addresses).
	ListGroups(ctx context.Context) ([]store.Group, error)
}

// RunRecorder records fires before they are dispatched (satisfied by *store.Store).
type RunRecorder interface {
	// InsertRuns inserts runs in one batch, leaving existing fire ids untouched.
	InsertRuns(ctx context.Context, runs []store.Run) ([]string, error)
	// RunsByFireIDs returns the recorded runs of the given fire ids (those
	// that exist). The loop calls it only for replayed fires.
	RunsByFireIDs(ctx context.Context, fireIDs []string) ([]store.Run, error)
}

// CursorStore holds the replicated scheduler state: fire cursors and route
// state (satisfied by *raftha.Node).
type CursorStore interface {
	// ApplyTick commits, in ONE raft entry, cursor advances (job id →
	// scheduled Unix ms, kept as max), route state entries (a nil value
	// deletes the key) and the deletion of the cursors of deleted jobs.
	ApplyTick(ctx context.Context, cursors map[int64]int64, routes map[string][]byte, deleteCursors []int64) error
	// Cursors returns a copy of every cursor.
	Cursors() map[int64]int64
	// RouteStates returns a copy of every route state entry.
	RouteStates() map[string][]byte
}

// Dispatcher writes fenced batches to etcd (satisfied by *dispatch.Dispatcher).
type Dispatcher interface {
	Claim(ctx context.Context, term uint64) error
	Dispatch(ctx context.Context, term uint64, items []dispatch.DispatchItem) error
	PlaceJob(ctx context.Context, term uint64, ps ...dispatch.Placement) error
	UnplaceJob(ctx context.Context, term uint64, refs ...dispatch.JobRef) error
	Cancel(ctx context.Context, term uint64, now time.Time, items []dispatch.CancelItem) error
}

// Defaults of Config.
const (
	DefaultRelistInterval   = 30 * time.Second
	DefaultMisfireThreshold = 5 * time.Second
	DefaultRetryMin         = 100 * time.Millisecond
	DefaultRetryMax         = 5 * time.Second
	DefaultBeatInterval     = 2 * time.Second
	DefaultBeatTimeout      = time.Second
)

// Config wires a Scheduler.
type Config struct {
	// Jobs is where job definitions are read (the SQL store).
	Jobs JobSource
	// Runs records every fire before it is dispatched (the SQL store).
	Runs RunRecorder
	// Cursors is the replicated cursor state (the raft node).
	Cursors CursorStore
	// Dispatcher writes fenced runs and placements to etcd.
	Dispatcher Dispatcher
	// Etcd is used to read and watch nodes, job signals and once requests,
	// and to delete handled once requests.
	Etcd *clientv3.Client
	// Keys builds the etcd keys.
	Keys cluster.Keys
	// Clock tells time and makes timers; nil = the real clock.
	Clock Clock
	// Logger receives the loop's logs; nil discards them.
	Logger *slog.Logger
	// Location is the time zone of jobs without one; nil = time.Local.
	Location *time.Location
	// PlaceJobs writes each enabled job's config to the node chosen for it
	// (/Cronix/job/<node>/<id>). No node reads these records yet, and they
	// cost etcd space and leader memory per job, so they are off by
	// default; when off, the leader removes the placements it finds.
	PlaceJobs bool
	// RelistInterval is how often every enabled job is reloaded as a safety
	// net for missed signals (default 30s).
	RelistInterval time.Duration
	// MisfireThreshold: while leading, a fire that is more than this late
	// (the loop was stalled, e.g. etcd was down) is treated as a misfire and
	// collapsed like the misfires of a leaderless period (default 5s).
	MisfireThreshold time.Duration
	// RetryMin and RetryMax bound the backoff of a failed batch, watch
	// resync or placement (defaults 100ms and 5s).
	RetryMin, RetryMax time.Duration
	// BeatInterval is how often the leader GETs /healthz of every live node
	// for FAILOVER (default 2s; negative turns beats off: FAILOVER then
	// uses the registration status only).
	BeatInterval time.Duration
	// BeatTimeout bounds one beat request (default 1s).
	BeatTimeout time.Duration
	// HTTPClient sends the beats; nil = a plain http.Client.
	HTTPClient *http.Client
	// Metrics records fires, dispatch batches and lateness; nil records nothing.
	Metrics *metrics.Metrics
	// DispatchAhead is how long before its scheduled time a fire is
	// recorded and dispatched, with Dispatch.StartAt set so that the node
	// holds it until that time: the batch's SQL insert, etcd transaction,
	// raft entry and the node's intake all happen before the second begins,
	// not after. Used only while every live node offers
	// cluster.FeatureStartAt. 0 (the default here; the server sets
	// DefaultDispatchAhead) dispatches every fire at its time.
	DispatchAhead time.Duration
	// DispatchAheadMin, when above 0 and below DispatchAhead, makes how far
	// ahead follow the size of the batches (ahead): a batch is dispatched
	// a third of a millisecond per fire of the previous batch ahead, at least
	// DispatchAheadMin and at most DispatchAhead (the server sets half of
	// DispatchAhead), or longer while the last batches' write path was
	// slow: its duration plus half of that, up to twice DispatchAhead and
	// MaxDispatchAhead (writeAhead). 0: always DispatchAhead.
	DispatchAheadMin time.Duration
}

// DefaultDispatchAhead is the server's default Config.DispatchAhead (and
// half of it its DispatchAheadMin). At thousands of fires per second the
// batch's SQL insert and etcd transaction take 100-200 ms and the node's
// intake and hand-over to the plugins a few hundred more: with 500 ms,
// some seconds' last fires reached their plugin after their time (3,000
// http jobs/s: max lateness 199 -> 141 ms, p99 135 -> 123 ms with 1 s).
// Not a whole second: a batch committed at a second competes with the
// fires of that second (the node reading their responses, the plugin
// sending their results) while their targets answer; 850 ms puts the
// largest batches 150 ms after it (3,000 http jobs/s, mean p99 of 60-s
// runs, four with 1 s and six with 850 ms: at the receiver's socket
// 45 -> 33 ms, at its handler 114 -> 98 ms). Batches below 1,275 fires go
// 425 ms ahead (aheadFiresPerSecond).
const DefaultDispatchAhead = 850 * time.Millisecond

// MaxDispatchAhead bounds Config.DispatchAhead: a disable or delete
// reaches fires dispatched ahead only through a cancel the node may see
// too late, and a job edit applies only to fires dispatched after it.
const MaxDispatchAhead = 5 * time.Second

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = RealClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.RelistInterval <= 0 {
		c.RelistInterval = DefaultRelistInterval
	}
	if c.MisfireThreshold <= 0 {
		c.MisfireThreshold = DefaultMisfireThreshold
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.BeatInterval == 0 {
		c.BeatInterval = DefaultBeatInterval
	}
	if c.BeatTimeout <= 0 {
		c.BeatTimeout = DefaultBeatTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
}

// Validate reports missing dependencies.
func (c *Config) Validate() error {
	var errs []error
	if c.Jobs == nil {
		errs = append(errs, errors.New("scheduler: Jobs is required"))
	}
	if c.Runs == nil {
		errs = append(errs, errors.New("scheduler: Runs is required"))
	}
	if c.Cursors == nil {
		errs = append(errs, errors.New("scheduler: Cursors is required"))
	}
	if c.Dispatcher == nil {
		errs = append(errs, errors.New("scheduler: Dispatcher is required"))
	}
	if c.Etcd == nil {
		errs = append(errs, errors.New("scheduler: Etcd is required"))
	}
	if c.DispatchAhead < 0 || c.DispatchAhead > MaxDispatchAhead {
		errs = append(errs, fmt.Errorf("scheduler: DispatchAhead %s is outside 0..%s", c.DispatchAhead, MaxDispatchAhead))
	}
	if c.DispatchAheadMin < 0 {
		errs = append(errs, fmt.Errorf("scheduler: DispatchAheadMin %s is negative", c.DispatchAheadMin))
	}
	return errors.Join(errs...)
}
