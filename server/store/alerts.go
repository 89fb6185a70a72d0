package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
	schema "github.com/cronix/cronix/sql"
)

// Delivery statuses of an AlertDelivery.
const (
	DeliveryPending = "pending" // not sent yet; sent when due
	DeliverySent    = "sent"    // the channel accepted it
	DeliveryFailed  = "failed"  // every attempt failed; no more attempts
)

// AlertEvent is one alert event in the outbox, unique by DedupeKey.
type AlertEvent struct {
	ID        int64
	DedupeKey string
	Kind      string
	JobID     int64 // 0 for events about no job (cluster.no_leader)
	JobName   string
	Group     string
	RunID     int64
	FireID    string
	Node      string
	RunStatus string
	ExitCode  *int
	Message   string
	// OutputTail is the end of the run's output.
	OutputTail string
	// Link points at the run (or job) in the web admin.
	Link       string
	OccurredAt time.Time
	// Suppressed events are recorded, never delivered (throttled or inside
	// a failure episode); SuppressedReason says why.
	Suppressed       bool
	SuppressedReason string
	// SuppressedCount is how many suppressed events of the job preceded this
	// one since the job's previous delivered event.
	SuppressedCount int
	CreatedAt       time.Time
	// Deliveries are filled by GetAlertEvent and FindAlertEvents.
	Deliveries []AlertDelivery
}

// AlertDelivery is an event's delivery to one channel target.
type AlertDelivery struct {
	ID      int64
	EventID int64
	Channel string // "email" or "webhook"
	// Target names the target: "email", or the webhook's name.
	Target string
	// Recipients are the e-mail addresses (email channel only).
	Recipients    []string
	Status        string // Delivery*
	Attempts      int
	LastError     string
	NextAttemptAt time.Time
	SentAt        *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// AlertEventFilter selects alert events; zero fields match every event.
type AlertEventFilter struct {
	Kind  string
	JobID int64
	// Status matches events having a delivery in that status.
	Status string
	// Suppressed, when set, matches events by their suppressed flag.
	Suppressed *bool
}

type alertEventRow struct {
	bun.BaseModel `bun:"table:alert_events,alias:ae"`

	ID               int64     `bun:"id,pk,autoincrement"`
	DedupeKey        string    `bun:"dedupe_key,notnull"`
	Kind             string    `bun:"kind,notnull"`
	JobID            int64     `bun:"job_id,notnull"`
	JobName          string    `bun:"job_name,notnull"`
	GroupName        string    `bun:"group_name,notnull"`
	RunID            int64     `bun:"run_id,notnull"`
	FireID           string    `bun:"fire_id,notnull"`
	Node             string    `bun:"node,notnull"`
	RunStatus        string    `bun:"run_status,notnull"`
	ExitCode         *int      `bun:"exit_code"`
	Message          string    `bun:"message,notnull"`
	OutputTail       string    `bun:"output_tail,notnull"`
	Link             string    `bun:"link,notnull"`
	OccurredAt       time.Time `bun:"occurred_at,notnull"`
	Suppressed       bool      `bun:"suppressed,notnull"`
	SuppressedReason string    `bun:"suppressed_reason,notnull"`
	SuppressedCount  int       `bun:"suppressed_count,notnull"`
	CreatedAt        time.Time `bun:"created_at,notnull"`
}

type alertDeliveryRow struct {
	bun.BaseModel `bun:"table:alert_deliveries,alias:ad"`

	ID            int64      `bun:"id,pk,autoincrement"`
	EventID       int64      `bun:"event_id,notnull"`
	Channel       string     `bun:"channel,notnull"`
	Target        string     `bun:"target,notnull"`
	Recipients    string     `bun:"recipients,notnull"` // comma-separated
	Status        string     `bun:"status,notnull"`
	Attempts      int        `bun:"attempts,notnull"`
	LastError     string     `bun:"last_error,notnull"`
	NextAttemptAt time.Time  `bun:"next_attempt_at,notnull"`
	ClaimedUntil  *time.Time `bun:"claimed_until"`
	SentAt        *time.Time `bun:"sent_at"`
	CreatedAt     time.Time  `bun:"created_at,notnull"`
	UpdatedAt     time.Time  `bun:"updated_at,notnull"`
}

type settingRow struct {
	bun.BaseModel `bun:"table:settings,alias:st"`

	Name      string    `bun:"name,pk"`
	Value     string    `bun:"value,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	UpdatedBy string    `bun:"updated_by,notnull"`
}

// Text limits of alert events.
const (
	maxAlertOutputTail = 4 << 10
	maxAlertError      = 2 << 10
)

func (r *alertEventRow) domain() AlertEvent {
	return AlertEvent{
		ID: r.ID, DedupeKey: r.DedupeKey, Kind: r.Kind, JobID: r.JobID, JobName: r.JobName, Group: r.GroupName,
		RunID: r.RunID, FireID: r.FireID, Node: r.Node, RunStatus: r.RunStatus, ExitCode: r.ExitCode,
		Message: r.Message, OutputTail: r.OutputTail, Link: r.Link, OccurredAt: utc(r.OccurredAt),
		Suppressed: r.Suppressed, SuppressedReason: r.SuppressedReason, SuppressedCount: r.SuppressedCount,
		CreatedAt: utc(r.CreatedAt),
	}
}

func (r *alertDeliveryRow) domain() AlertDelivery {
	d := AlertDelivery{
		ID: r.ID, EventID: r.EventID, Channel: r.Channel, Target: r.Target, Status: r.Status,
		Attempts: r.Attempts, LastError: r.LastError, NextAttemptAt: utc(r.NextAttemptAt),
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	if r.Recipients != "" {
		d.Recipients = strings.Split(r.Recipients, ",")
	}
	if r.SentAt != nil {
		t := utc(*r.SentAt)
		d.SentAt = &t
	}
	return d
}

// InsertAlertEvent records ev and its deliveries in one transaction and
// sets their ids. It returns false, writing nothing, when an event with
// ev.DedupeKey exists already: that is how a re-raised event is dropped.
func (s *Store) InsertAlertEvent(ctx context.Context, ev *AlertEvent, deliveries []AlertDelivery) (bool, error) {
	if ev.DedupeKey == "" || ev.Kind == "" {
		return false, errors.New("store: insert alert event: dedupe key and kind are required")
	}
	t := now()
	msg, _ := cleanText(ev.Message, maxMessageBytes)
	tail, _ := cleanText(ev.OutputTail, maxAlertOutputTail)
	row := alertEventRow{
		DedupeKey: ev.DedupeKey, Kind: ev.Kind, JobID: ev.JobID, JobName: ev.JobName, GroupName: ev.Group,
		RunID: ev.RunID, FireID: ev.FireID, Node: ev.Node, RunStatus: ev.RunStatus, ExitCode: ev.ExitCode,
		Message: msg, OutputTail: tail, Link: ev.Link, OccurredAt: utc(ev.OccurredAt),
		Suppressed: ev.Suppressed, SuppressedReason: ev.SuppressedReason, SuppressedCount: ev.SuppressedCount,
		CreatedAt: t,
	}
	if row.OccurredAt.IsZero() {
		row.OccurredAt = t
	}
	// A key stored already (a new leader re-reading runs) costs one read,
	// not a write transaction (on SQLite, a turn at the write gate); the
	// check inside the transaction settles races.
	if exists, err := s.AlertEventExists(ctx, ev.DedupeKey); err != nil || exists {
		return false, err
	}
	rows := make([]alertDeliveryRow, len(deliveries))
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		exists, err := tx.NewSelect().Model((*alertEventRow)(nil)).Where("dedupe_key = ?", ev.DedupeKey).Exists(ctx)
		if err != nil {
			return err
		}
		if exists {
			return errDuplicate
		}
		if _, err := tx.NewInsert().Model(&row).Returning("id").Exec(ctx); err != nil {
			return err
		}
		if len(deliveries) == 0 {
			return nil
		}
		for i, d := range deliveries {
			next := utc(d.NextAttemptAt)
			if next.IsZero() {
				next = t
			}
			rows[i] = alertDeliveryRow{
				EventID: row.ID, Channel: d.Channel, Target: d.Target, Recipients: strings.Join(d.Recipients, ","),
				Status: DeliveryPending, NextAttemptAt: next, CreatedAt: t, UpdatedAt: t,
			}
		}
		_, err = tx.NewInsert().Model(&rows).Returning("id").Exec(ctx)
		return err
	})
	if errors.Is(err, errDuplicate) || (err != nil && isUniqueViolation(err)) {
		return false, nil
	}
	if err != nil {
		return false, wrap(err, "insert alert event %q", ev.DedupeKey)
	}
	*ev = row.domain()
	ev.Deliveries = make([]AlertDelivery, len(rows))
	for i := range rows {
		ev.Deliveries[i] = rows[i].domain()
	}
	return true, nil
}

// errDuplicate ends InsertAlertEvent's transaction when the key exists.
var errDuplicate = errors.New("duplicate alert event")

// AlertEventExists reports whether an event with the dedupe key is stored.
func (s *Store) AlertEventExists(ctx context.Context, key string) (bool, error) {
	ok, err := s.db.NewSelect().Model((*alertEventRow)(nil)).Where("dedupe_key = ?", key).Exists(ctx)
	if err != nil {
		return false, wrap(err, "look up alert event %q", key)
	}
	return ok, nil
}

// LatestAlertEvent returns the job's latest event (by id) of one of kinds,
// suppressed or not, leaving out the events suppressed for exceptReason
// (when set), or ErrNotFound.
func (s *Store) LatestAlertEvent(ctx context.Context, jobID int64, kinds []string, exceptReason string) (*AlertEvent, error) {
	var row alertEventRow
	q := s.db.NewSelect().Model(&row).Where("ae.job_id = ?", jobID).Where("ae.kind IN (?)", bun.List(kinds))
	if exceptReason != "" {
		q = q.Where("ae.suppressed_reason <> ?", exceptReason)
	}
	err := q.OrderExpr("ae.id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return nil, wrap(err, "latest alert event of job %d", jobID)
	}
	ev := row.domain()
	return &ev, nil
}

// LatestDeliveredAlertEvent returns the job's latest event of kind that was
// not suppressed, or ErrNotFound.
func (s *Store) LatestDeliveredAlertEvent(ctx context.Context, jobID int64, kind string) (*AlertEvent, error) {
	var row alertEventRow
	err := s.db.NewSelect().Model(&row).Where("ae.job_id = ?", jobID).Where("ae.kind = ?", kind).
		Where("ae.suppressed = ?", false).OrderExpr("ae.id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return nil, wrap(err, "latest delivered %s event of job %d", kind, jobID)
	}
	ev := row.domain()
	return &ev, nil
}

// CountSuppressedAlertEvents counts the job's suppressed events recorded
// after its latest event that was not suppressed (all of them if none).
func (s *Store) CountSuppressedAlertEvents(ctx context.Context, jobID int64) (int, error) {
	var lastID int64
	err := s.db.NewSelect().Model((*alertEventRow)(nil)).ColumnExpr("COALESCE(MAX(ae.id), 0)").
		Where("ae.job_id = ?", jobID).Where("ae.suppressed = ?", false).Scan(ctx, &lastID)
	if err != nil {
		return 0, wrap(err, "last delivered alert event of job %d", jobID)
	}
	n, err := s.db.NewSelect().Model((*alertEventRow)(nil)).
		Where("ae.job_id = ?", jobID).Where("ae.suppressed = ?", true).Where("ae.id > ?", lastID).Count(ctx)
	if err != nil {
		return 0, wrap(err, "count suppressed alert events of job %d", jobID)
	}
	return int(n), nil
}

// DueAlertDeliveries returns up to limit pending deliveries whose next
// attempt is due at now and that no replica holds a claim on, oldest first.
func (s *Store) DueAlertDeliveries(ctx context.Context, now time.Time, limit int) ([]AlertDelivery, error) {
	var rows []alertDeliveryRow
	err := s.db.NewSelect().Model(&rows).
		Where("ad.status = ?", DeliveryPending).
		Where("ad.next_attempt_at <= ?", utc(now)).
		Where("(ad.claimed_until IS NULL OR ad.claimed_until < ?)", utc(now)).
		OrderExpr("ad.next_attempt_at ASC, ad.id ASC").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, wrap(err, "list due alert deliveries")
	}
	out := make([]AlertDelivery, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// ClaimAlertDelivery claims a pending delivery until the given time unless
// another claim on it is still valid at now. Only the holder of the claim
// sends it; a claim that outlives its holder (a crash) expires.
func (s *Store) ClaimAlertDelivery(ctx context.Context, id int64, now, until time.Time) (bool, error) {
	res, err := s.db.NewUpdate().Model((*alertDeliveryRow)(nil)).
		Set("claimed_until = ?", utc(until)).
		Where("id = ?", id).
		Where("status = ?", DeliveryPending).
		Where("(claimed_until IS NULL OR claimed_until < ?)", utc(now)).
		Exec(ctx)
	if err != nil {
		return false, wrap(err, "claim alert delivery %d", id)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrap(err, "claim alert delivery %d: rows affected", id)
	}
	return n == 1, nil
}

// AlertAttempt is the outcome of one delivery attempt.
type AlertAttempt struct {
	// Err is what failed ("" = sent).
	Err string
	// Final: no more attempts (the delivery becomes failed when Err is set).
	Final bool
	// NextAttemptAt is when to try again after a failure that is not final.
	NextAttemptAt time.Time
}

// RecordAlertAttempt records an attempt of a delivery and releases its claim.
func (s *Store) RecordAlertAttempt(ctx context.Context, id int64, a AlertAttempt) error {
	t := now()
	q := s.db.NewUpdate().Model((*alertDeliveryRow)(nil)).
		Set("attempts = attempts + 1").
		Set("claimed_until = NULL").
		Set("updated_at = ?", t).
		Where("id = ?", id).
		Where("status = ?", DeliveryPending)
	if a.Err == "" {
		q = q.Set("status = ?", DeliverySent).Set("sent_at = ?", t).Set("last_error = ''")
	} else {
		msg, _ := cleanText(a.Err, maxAlertError)
		q = q.Set("last_error = ?", msg)
		if a.Final {
			q = q.Set("status = ?", DeliveryFailed)
		} else {
			q = q.Set("next_attempt_at = ?", utc(a.NextAttemptAt))
		}
	}
	if _, err := q.Exec(ctx); err != nil {
		return wrap(err, "record attempt of alert delivery %d", id)
	}
	return nil
}

// GetAlertEvent returns an event with its deliveries, or ErrNotFound.
func (s *Store) GetAlertEvent(ctx context.Context, id int64) (*AlertEvent, error) {
	var row alertEventRow
	if err := s.db.NewSelect().Model(&row).Where("ae.id = ?", id).Scan(ctx); err != nil {
		return nil, wrap(err, "alert event %d", id)
	}
	evs := []AlertEvent{row.domain()}
	if err := s.fillDeliveries(ctx, evs); err != nil {
		return nil, err
	}
	return &evs[0], nil
}

// FindAlertEvents returns a page of the events f selects, newest first,
// with their deliveries, and how many it selects in all.
func (s *Store) FindAlertEvents(ctx context.Context, f AlertEventFilter, p Page) ([]AlertEvent, int, error) {
	var rows []alertEventRow
	q := s.db.NewSelect().Model(&rows)
	if f.Kind != "" {
		q = q.Where("ae.kind = ?", f.Kind)
	}
	if f.JobID != 0 {
		q = q.Where("ae.job_id = ?", f.JobID)
	}
	if f.Suppressed != nil {
		q = q.Where("ae.suppressed = ?", *f.Suppressed)
	}
	if f.Status != "" {
		q = q.Where("EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.event_id = ae.id AND d.status = ?)", f.Status)
	}
	total, err := q.OrderExpr("ae.id DESC").Limit(int64(p.PageSize)).Offset(int64(p.Offset())).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, wrap(err, "list alert events")
	}
	out := make([]AlertEvent, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	if err := s.fillDeliveries(ctx, out); err != nil {
		return nil, 0, err
	}
	return out, int(total), nil
}

// fillDeliveries loads the deliveries of evs.
func (s *Store) fillDeliveries(ctx context.Context, evs []AlertEvent) error {
	if len(evs) == 0 {
		return nil
	}
	ids := make([]int64, len(evs))
	at := make(map[int64]int, len(evs))
	for i := range evs {
		ids[i] = evs[i].ID
		at[evs[i].ID] = i
		evs[i].Deliveries = []AlertDelivery{}
	}
	var rows []alertDeliveryRow
	if err := s.db.NewSelect().Model(&rows).Where("ad.event_id IN (?)", bun.List(ids)).
		OrderExpr("ad.id ASC").Scan(ctx); err != nil {
		return wrap(err, "list deliveries of %d alert events", len(ids))
	}
	for i := range rows {
		ev := &evs[at[rows[i].EventID]]
		ev.Deliveries = append(ev.Deliveries, rows[i].domain())
	}
	return nil
}

// GetSetting returns a setting's value, or ErrNotFound.
func (s *Store) GetSetting(ctx context.Context, name string) (string, error) {
	var row settingRow
	if err := s.db.NewSelect().Model(&row).Where("st.name = ?", name).Scan(ctx); err != nil {
		return "", wrap(err, "setting %q", name)
	}
	return row.Value, nil
}

// PutSetting creates or replaces a setting.
func (s *Store) PutSetting(ctx context.Context, name, value, updatedBy string) error {
	row := settingRow{Name: name, Value: value, UpdatedAt: now(), UpdatedBy: updatedBy}
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model(&row).Column("value", "updated_at", "updated_by").WherePK().Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		_, err = tx.NewInsert().Model(&row).Exec(ctx)
		return err
	})
	return wrap(err, "put setting %q", name)
}

// TerminalRunsSince returns up to limit runs in a terminal status whose
// last change (updated_at) is after since, or at since with an id above
// afterID, and not after until; ordered by updated_at, then id. A terminal
// run never changes again, so its updated_at is when it became terminal.
// Output is not read (it is empty in the result): use RunByFireID.
func (s *Store) TerminalRunsSince(ctx context.Context, since time.Time, afterID int64, until time.Time, limit int) ([]Run, error) {
	var rows []runRow
	q := s.db.NewSelect().Model(&rows).ModelTableExpr(s.scanTable()).ExcludeColumn("output")
	err := terminalSince(q, since, afterID, until, limit).Scan(ctx)
	if err != nil {
		return nil, wrap(err, "list runs finished since %s", since.Format(time.RFC3339Nano))
	}
	out := make([]Run, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// ScanKey is a run's place in the order of updated_at, then id (the alert
// scanner's order).
type ScanKey struct {
	ID        int64     `bun:"id"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// TerminalRunKeysSince is TerminalRunsSince reading only the runs' keys:
// it is a range scan of runs_updated_at_id_status_idx that reads no table
// row, so re-reading runs already handled costs little.
func (s *Store) TerminalRunKeysSince(ctx context.Context, since time.Time, afterID int64, until time.Time, limit int) ([]ScanKey, error) {
	var keys []ScanKey
	err := terminalSince(s.scanSelect("r.id", "r.updated_at"), since, afterID, until, limit).Scan(ctx, &keys)
	if err != nil {
		return nil, wrap(err, "list keys of runs finished since %s", since.Format(time.RFC3339Nano))
	}
	for i := range keys {
		keys[i].UpdatedAt = keys[i].UpdatedAt.UTC()
	}
	return keys, nil
}

// TerminalRunIDsThrough returns the ids of the terminal runs whose
// (updated_at, id) is at or after (since, 0) and at or before (through,
// throughID): the runs up to the alert scanner's cursor that it re-reads
// for late commits. Like TerminalRunKeysSince it scans
// runs_updated_at_id_status_idx and reads no table row; reading ids alone,
// with no limit, costs a fraction of paging through the keys
// (the range is the scanner's overlap, seconds of runs). They are in
// (updated_at, id) order, the index's.
func (s *Store) TerminalRunIDsThrough(ctx context.Context, since, through time.Time, throughID int64) ([]int64, error) {
	var ids []int64
	err := terminalThrough(s.scanSelect("r.id"), since, through, throughID).Scan(ctx, &ids)
	if err != nil {
		return nil, wrap(err, "list ids of runs finished from %s to %s", since.Format(time.RFC3339Nano), through.Format(time.RFC3339Nano))
	}
	return ids, nil
}

// scanTable is the runs table, as r, for the alert scanner's reads. SQLite
// has no statistics (no ANALYZE) and would take "status IN (...)" on
// runs_status_idx for the selective term, which reads every terminal run
// of the table and sorts them: it is told the index. PostgreSQL and MySQL
// plan from statistics.
func (s *Store) scanTable() string {
	if s.dialect == schema.SQLite {
		return "runs AS r INDEXED BY runs_updated_at_id_status_idx"
	}
	return "runs AS r"
}

// scanSelect selects columns of scanTable.
func (s *Store) scanSelect(columns ...string) *bun.SelectQuery {
	return s.db.NewSelect().TableExpr(s.scanTable()).Column(columns...)
}

// terminalBetween restricts q to the terminal runs with updated_at from
// since to until, in (updated_at, id) order. The plain bound "updated_at >=
// since" comes first, so that every dialect's planner starts the index
// range there; the callers' OR terms only filter the rows at either end.
func terminalBetween(q *bun.SelectQuery, since, until time.Time) *bun.SelectQuery {
	return q.Where("r.updated_at >= ?", utc(since)).
		Where("r.updated_at <= ?", utc(until)).
		Where("r.status IN (" + terminalList + ")").
		OrderExpr("r.updated_at ASC, r.id ASC")
}

// terminalSince restricts q to the terminal runs after (since, afterID) and
// not after until, at most limit of them.
func terminalSince(q *bun.SelectQuery, since time.Time, afterID int64, until time.Time, limit int) *bun.SelectQuery {
	return terminalBetween(q, since, until).
		Where("(r.updated_at > ? OR r.id > ?)", utc(since), afterID).
		Limit(int64(limit))
}

// terminalThrough restricts q to the terminal runs from (since, 0) through
// (through, throughID).
func terminalThrough(q *bun.SelectQuery, since, through time.Time, throughID int64) *bun.SelectQuery {
	return terminalBetween(q, since, through).
		Where("(r.updated_at < ? OR r.id <= ?)", utc(through), throughID)
}

// terminalRunHeads is the query of TerminalRunHeads: rows by primary key.
func (s *Store) terminalRunHeads(db bun.IDB, rows *[]runRow, ids []int64) *bun.SelectQuery {
	return db.NewSelect().Model(rows).Column(runHeadColumns...).
		Where("r.id IN (?)", bun.List(ids)).
		Where("r.status IN (" + terminalList + ")").
		OrderExpr("r.updated_at ASC, r.id ASC")
}

// runHeadColumns are the columns TerminalRunHeads reads.
var runHeadColumns = []string{"id", "fire_id", "job_id", "trigger", "status", "scheduled_at", "dispatched_at", "updated_at"}

// TerminalRunHeads returns the runs with the given ids that are in a
// terminal status, ordered by updated_at, then id, with only ID, FireID,
// JobID, Trigger, Status, ScheduledAt, DispatchedAt and UpdatedAt read
// (enough to tell whether a run can raise an alert; RunByFireID reads the
// rest). Unknown ids are left out. It reads rows just written, on the
// writer connection of a SQLite file (onWriter).
func (s *Store) TerminalRunHeads(ctx context.Context, ids []int64) ([]Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []runRow
	err := s.onWriter(ctx, func(db bun.IDB) error { return s.terminalRunHeads(db, &rows, ids).Scan(ctx) })
	if err != nil {
		return nil, wrap(err, "read %d finished runs", len(ids))
	}
	out := make([]Run, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// UndispatchedRunsBefore returns up to limit runs still triggered, never
// dispatched, and scheduled before before, with an id above afterID, by id.
func (s *Store) UndispatchedRunsBefore(ctx context.Context, before time.Time, afterID int64, limit int) ([]Run, error) {
	var rows []runRow
	err := s.db.NewSelect().Model(&rows).
		Where("r.status = ?", cluster.StatusTriggered).
		Where("r.dispatched_at IS NULL").
		Where("r.scheduled_at < ?", utc(before)).
		Where("r.id > ?", afterID).
		OrderExpr("r.id ASC").Limit(int64(limit)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list undispatched runs: %w", err)
	}
	out := make([]Run, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}
