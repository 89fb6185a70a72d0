// Package report is the trigger leader's daily report and retention.
//
// # Daily report
//
// One row per UTC day and job (table daily_reports): runs by status and
// the p50/p99 of lateness (scheduled -> started, scheduled fires) and
// duration (started -> finished) in milliseconds. A run belongs to the day
// of its scheduled time. Every Interval the leader updates the days that
// are still open — from the stored cursor (the first day not final) to
// today — (or, when that took longer than Interval/9, nine times that
// later, so the report never keeps the database busy more than 10% of the
// time) and replaces each day's rows in one transaction. The first pass
// of a term reads the open days in keyset pages of PageSize by
// (scheduled_at, id) and keeps per job what they add up to; later passes
// read only the runs inserted since and the ones still unfinished when
// last read (live.go says why that is enough). A day becomes final once
// it ended Settle ago: it is then read in full once more, its rows never
// change and the cursor moves past it. Days are computed at most
// MaxDaysPerPass per pass, so a first start over years of runs catches up
// over several passes. Counts are exact (an open day's but for a run that
// commits a pass after a higher id, see live.go); percentiles are exact
// below 128 ms and within 1.6% above (a fixed-size histogram per job, so
// a day with millions of runs needs no more memory than its jobs).
//
// # Retention
//
// After the report, runs older than RunRetention are deleted and the output
// of runs older than OutputRetention is emptied, terminal runs only, in
// batches of RetentionBatch rows (one bounded SELECT of ids, one DELETE or
// UPDATE by id) with a pause between batches (RetentionPause, or nine
// times the last batch's duration when that is longer), so the trigger
// loop's own writes interleave (SQLite has one writer) and retention takes
// at most a tenth of the writer's time, and at most
// RetentionMaxBatches batches per pass. Runs of a day whose report is not
// final are never deleted: the report outlives the runs it counts.
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cronix/cronix/server/store"
)

// Store is the SQL record the service reads and writes (satisfied by *store.Store).
type Store interface {
	ReportRunsPage(ctx context.Context, after store.RunKey, to time.Time, limit int) ([]store.ReportRun, error)
	ReportRunsAfterID(ctx context.Context, after int64, limit int) ([]store.ReportRun, error)
	ReportRunsByID(ctx context.Context, ids []int64) ([]store.ReportRun, error)
	MaxRunID(ctx context.Context) (int64, error)
	OldestRunScheduledAt(ctx context.Context) (time.Time, error)
	ReplaceDailyReports(ctx context.Context, day string, rows []store.DailyReport, final bool) error
	DeleteRunsBefore(ctx context.Context, cutoff time.Time, after store.RunKey, limit int) (read, deleted int, next store.RunKey, err error)
	ClearOutputBefore(ctx context.Context, cutoff time.Time, after store.RunKey, limit int) (read, cleared int, next store.RunKey, err error)
	JobLabels(ctx context.Context, ids []int64) (map[int64]store.JobLabel, error)
	GetSetting(ctx context.Context, name string) (string, error)
	PutSetting(ctx context.Context, name, value, updatedBy string) error
}

var _ Store = (*store.Store)(nil)

// settingCursor names the stored cursor: the first day not final.
const settingCursor = "report_cursor"

// Defaults of Config.
const (
	DefaultInterval            = time.Minute
	DefaultSettle              = time.Hour
	DefaultPageSize            = 5000
	DefaultMaxDaysPerPass      = 7
	DefaultRetentionBatch      = 250
	DefaultRetentionPause      = 25 * time.Millisecond
	DefaultRetentionMaxBatches = 2000
)

// MinRetention is the shortest retention accepted.
const MinRetention = time.Hour

// Config wires a Service.
type Config struct {
	// Store is the SQL record. Required.
	Store Store
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Interval between passes (default 1m).
	Interval time.Duration
	// Settle: a day is final once it ended this long ago (default 1h), so
	// that runs scheduled late in the day have finished.
	Settle time.Duration
	// PageSize is the runs read per query (default 5000).
	PageSize int
	// MaxDaysPerPass bounds the days computed per pass (default 7).
	MaxDaysPerPass int
	// RunRetention: terminal runs scheduled longer ago are deleted (0 = kept forever).
	RunRetention time.Duration
	// OutputRetention: the output of terminal runs scheduled longer ago is
	// emptied (0 = kept as long as the run).
	OutputRetention time.Duration
	// RetentionBatch is the rows deleted or cleared per statement (default
	// 250: on SQLite, one writer, a statement holds the write lock the
	// trigger loop waits for, so it must stay short).
	RetentionBatch int
	// RetentionPause is the wait between batches (default 25ms).
	RetentionPause time.Duration
	// RetentionMaxBatches bounds the batches per pass and kind (default 2000).
	RetentionMaxBatches int
}

// Validate checks the retentions.
func (c *Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("report: Store is required"))
	}
	for name, d := range map[string]time.Duration{"run retention": c.RunRetention, "output retention": c.OutputRetention} {
		if d != 0 && d < MinRetention {
			errs = append(errs, fmt.Errorf("report: %s %s is below the minimum %s (0 keeps everything)", name, d, MinRetention))
		}
	}
	return errors.Join(errs...)
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
	def(&c.Interval, DefaultInterval)
	def(&c.Settle, DefaultSettle)
	def(&c.RetentionPause, DefaultRetentionPause)
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	defInt(&c.PageSize, DefaultPageSize)
	defInt(&c.MaxDaysPerPass, DefaultMaxDaysPerPass)
	defInt(&c.RetentionBatch, DefaultRetentionBatch)
	defInt(&c.RetentionMaxBatches, DefaultRetentionMaxBatches)
}

// Service computes the daily report and applies retention while this
// replica leads.
type Service struct {
	cfg Config
	log *slog.Logger
	// mu serializes passes: a new term's Run may start before the old one
	// has returned.
	mu sync.Mutex
	// outputAfter is where output retention resumes (guarded by mu).
	outputAfter store.RunKey
	// live is the open days' runs counted so far this term (guarded by
	// mu; nil: read them in full).
	live *live
}

// New checks cfg and returns a Service; Run starts it.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "report")}, nil
}

// Run makes a pass at once and then every Interval until ctx is done.
// Start it when leadership is gained and cancel ctx when it is lost.
func (s *Service) Run(ctx context.Context) {
	s.mu.Lock()
	s.outputAfter = store.RunKey{}
	s.live = nil
	s.mu.Unlock()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		took, err := s.timedPass(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("report pass failed; retrying next interval", "err", err)
		}
		t.Reset(nextPass(s.cfg.Interval, took))
	}
}

// busyFactor bounds the share of time spent in passes: a pass that took
// d is followed by at least busyFactor×d of rest, so a day with millions of
// runs is recomputed less often instead of keeping the database busy.
const busyFactor = 9

// nextPass is the wait before the next pass.
func nextPass(interval, took time.Duration) time.Duration {
	return max(interval, busyFactor*took)
}

// timedPass is Pass, also returning how long the report part took.
func (s *Service) timedPass(ctx context.Context) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	started := time.Now()
	open, err := s.report(ctx)
	took := time.Since(started)
	if err != nil {
		return took, err
	}
	return took, s.retain(ctx, open)
}

// Pass computes the open days of the report, then applies retention.
func (s *Service) Pass(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	open, err := s.report(ctx)
	if err != nil {
		return err
	}
	return s.retain(ctx, open)
}

// dayStart is the start of the UTC day of t.
func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// cursor returns the first day not final: the stored one, else the day of
// the oldest run, else today.
func (s *Service) cursor(ctx context.Context) (time.Time, error) {
	raw, err := s.cfg.Store.GetSetting(ctx, settingCursor)
	switch {
	case err == nil:
		var day string
		if err := json.Unmarshal([]byte(raw), &day); err != nil {
			return time.Time{}, fmt.Errorf("report: decode cursor %q: %w", raw, err)
		}
		t, err := time.Parse(store.DayLayout, day)
		if err != nil {
			return time.Time{}, fmt.Errorf("report: decode cursor %q: %w", raw, err)
		}
		return t, nil
	case !errors.Is(err, store.ErrNotFound):
		return time.Time{}, fmt.Errorf("report: read cursor: %w", err)
	}
	oldest, err := s.cfg.Store.OldestRunScheduledAt(ctx)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return dayStart(s.cfg.Now()), nil
	case err != nil:
		return time.Time{}, fmt.Errorf("report: oldest run: %w", err)
	}
	return dayStart(oldest), nil
}

// Report recomputes the open days (at most MaxDaysPerPass) and returns the
// first day still open afterwards.
func (s *Service) Report(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report(ctx)
}

func (s *Service) report(ctx context.Context) (time.Time, error) {
	open, err := s.cursor(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := s.cfg.Now()
	today := dayStart(now)
	first := open
	var notFinal []time.Time // a suffix of the days of this pass
	for day, n := first, 0; !day.After(today) && n < s.cfg.MaxDaysPerPass; day, n = day.AddDate(0, 0, 1), n+1 {
		if now.Before(day.AddDate(0, 0, 1).Add(s.cfg.Settle)) {
			notFinal = append(notFinal, day)
			continue
		}
		if err := s.computeDay(ctx, day, true); err != nil {
			return open, err
		}
		if s.live != nil {
			s.live.finalDay(day)
		}
		if day.Equal(open) {
			open = day.AddDate(0, 0, 1)
		}
	}
	switch {
	case len(notFinal) > 0 && notFinal[len(notFinal)-1].Equal(today):
		if err := s.liveReport(ctx, notFinal); err != nil {
			return open, err
		}
	default: // catching up: the days open in this pass end before today
		s.live = nil
		for _, day := range notFinal {
			if err := s.computeDay(ctx, day, false); err != nil {
				return open, err
			}
		}
	}
	if !open.Equal(first) {
		raw, _ := json.Marshal(open.Format(store.DayLayout))
		if err := s.cfg.Store.PutSetting(ctx, settingCursor, string(raw), "report"); err != nil {
			return first, fmt.Errorf("report: store cursor: %w", err)
		}
	}
	return open, nil
}

// computeDay reads the runs of day and replaces its report rows.
func (s *Service) computeDay(ctx context.Context, day time.Time, final bool) error {
	jobs := map[int64]*jobDay{}
	after, end := store.RunKey{ScheduledAt: day}, day.AddDate(0, 0, 1)
	for {
		runs, err := s.cfg.Store.ReportRunsPage(ctx, after, end, s.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("report: %s: %w", day.Format(store.DayLayout), err)
		}
		for i := range runs {
			jobOf(jobs, runs[i].JobID).add(&runs[i])
		}
		if len(runs) < s.cfg.PageSize {
			break
		}
		last := runs[len(runs)-1]
		after = store.RunKey{ScheduledAt: last.ScheduledAt, ID: last.ID}
	}
	return s.writeDay(ctx, day, jobs, final)
}

// writeDay replaces day's report rows with jobs, in job id order.
func (s *Service) writeDay(ctx context.Context, day time.Time, jobs map[int64]*jobDay, final bool) error {
	order := make([]int64, 0, len(jobs))
	for id := range jobs {
		order = append(order, id)
	}
	slices.Sort(order)
	labels, err := s.cfg.Store.JobLabels(ctx, order)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	rows := make([]store.DailyReport, 0, len(order))
	for _, id := range order {
		l, ok := labels[id]
		if !ok {
			l.Name = fmt.Sprintf("(deleted job %d)", id)
		}
		rows = append(rows, jobs[id].result(id, l.Name, l.Group))
	}
	day0 := day.Format(store.DayLayout)
	if err := s.cfg.Store.ReplaceDailyReports(ctx, day0, rows, final); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	s.log.Debug("daily report computed", "day", day0, "jobs", len(rows), "final", final)
	return nil
}

// Retain applies retention: runs are deleted only before open, the first
// day whose report is not final. Each kind walks the old runs from the
// oldest in (scheduled_at, id) order, one batch at a time.
func (s *Service) Retain(ctx context.Context, open time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retain(ctx, open)
}

func (s *Service) retain(ctx context.Context, open time.Time) error {
	now := s.cfg.Now()
	if s.cfg.RunRetention > 0 {
		cutoff := now.Add(-s.cfg.RunRetention)
		if open.Before(cutoff) {
			cutoff = open
		}
		var after store.RunKey
		n, err := s.batches(ctx, func() (int, int, error) {
			read, deleted, next, err := s.cfg.Store.DeleteRunsBefore(ctx, cutoff, after, s.cfg.RetentionBatch)
			after = next
			return read, deleted, err
		})
		if n > 0 {
			s.log.Info("run retention deleted runs", "runs", n, "before", cutoff.UTC().Format(time.RFC3339))
		}
		if err != nil {
			return fmt.Errorf("report: run retention: %w", err)
		}
	}
	if s.cfg.OutputRetention > 0 {
		cutoff := now.Add(-s.cfg.OutputRetention)
		n, err := s.batches(ctx, func() (int, int, error) {
			read, cleared, next, err := s.cfg.Store.ClearOutputBefore(ctx, cutoff, s.outputAfter, s.cfg.RetentionBatch)
			s.outputAfter = next
			return read, cleared, err
		})
		if n > 0 {
			s.log.Info("output retention emptied run outputs", "runs", n, "before", cutoff.UTC().Format(time.RFC3339))
		}
		if err != nil {
			return fmt.Errorf("report: output retention: %w", err)
		}
	}
	return nil
}

// retentionRest is how many times a batch's own duration retention rests
// after it (at least RetentionPause): a batch holds SQLite's single write
// lock for its duration, so retention takes at most a tenth of the
// writer's time however slow the disk or large the rows, and the trigger
// loop's inserts and the results' updates wait behind at most one batch.
const retentionRest = 9

// batches calls batch (which reports the rows it read and changed) until
// it reads less than RetentionBatch or RetentionMaxBatches were made,
// pausing between batches (the longer of RetentionPause and retentionRest
// times the last batch's duration), and returns the rows it changed.
func (s *Service) batches(ctx context.Context, batch func() (read, changed int, err error)) (int, error) {
	total := 0
	var took time.Duration
	for i := 0; i < s.cfg.RetentionMaxBatches; i++ {
		if i > 0 && !pause(ctx, s.rest(took)) {
			return total, ctx.Err()
		}
		began := time.Now()
		read, changed, err := batch()
		took = time.Since(began)
		total += changed
		if err != nil || read < s.cfg.RetentionBatch {
			return total, err
		}
	}
	return total, nil
}

// rest is the pause after a batch that took took.
func (s *Service) rest(took time.Duration) time.Duration {
	return max(s.cfg.RetentionPause, retentionRest*took)
}

func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
