package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
	schema "github.com/cronix/cronix/sql"
)

// Store is the SQL record. It is safe for concurrent use.
type Store struct {
	db      *bun.DB
	writer  *bun.DB // SQLite file: inTx's connection (openedDB.writer); else nil
	dialect string
	gate    *writeGate // SQLite: the writers' queue (sqlitegate.go)
	// stopCheckpoints stops a SQLite file's checkpointer and waits for it
	// (checkpoint.go); nil when none runs.
	stopCheckpoints func()
	closeOnce       sync.Once
	closeErr        error
	// jobList keeps the jobs list's totals and page anchors on SQLite and
	// PostgreSQL (joblist.go).
	jobList jobListKeeps
	// stmts keeps the prepared batch statements of a SQLite file's writer
	// connection (prepared.go); nil elsewhere.
	stmts *batchStmts
	// observe is Open's query observer (WithQueryObserver), told of the
	// statements that bypass bun's query hook (prepared.go); may be nil.
	observe func(operation string, d time.Duration)
}

// Open connects to dsn and applies pending migrations. DSN forms:
//
//	sqlite:///abs/path/cronix.db   or a bare file path (SQLite)
//	postgres://user@host:5432/db?sslmode=disable
//	mysql://user:pass@tcp(host:3306)/db?parseTime=true   (go-sql-driver DSN after "mysql://")
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	odb, err := openDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.observe != nil {
		// Clones sharing the connection pools.
		odb.db = odb.db.WithQueryHook(queryHook(o))
		if odb.writer != nil {
			odb.writer = odb.writer.WithQueryHook(queryHook(o))
		}
	}
	s := newStore(odb)
	s.observe = o.observe
	if err := s.migrateRetryingBusy(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if s.writer != nil {
		s.startCheckpoints(checkpointEvery)
	}
	return s, nil
}

// openBusyRetry bounds how long Open retries a migration refused with
// SQLITE_BUSY.
const openBusyRetry = 30 * time.Second

// migrateRetryingBusy migrates, retrying while SQLite answers SQLITE_BUSY
// at once: processes opening one new database file together (replicas
// starting side by side) can be refused without the busy timeout applying
// while another one turns the file to WAL mode. Other errors, and other
// dialects, are not retried.
func (s *Store) migrateRetryingBusy(ctx context.Context) error {
	deadline := time.Now().Add(openBusyRetry)
	wait := 20 * time.Millisecond
	for {
		err := s.migrate(ctx)
		if err == nil || !isSQLiteBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// Option configures Open.
type Option func(*options)

type options struct {
	observe func(operation string, d time.Duration)
}

// WithQueryObserver calls observe after every SQL statement with its
// operation (SELECT, INSERT, ...) and duration, e.g. for metrics. observe
// must be cheap and must not block.
func WithQueryObserver(observe func(operation string, d time.Duration)) Option {
	return func(o *options) { o.observe = observe }
}

// queryHook feeds a query observer.
type queryHook struct {
	observe func(operation string, d time.Duration)
}

func (h queryHook) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (h queryHook) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	h.observe(e.Operation(), time.Since(e.StartTime))
}

// Ping checks that the database answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: %w", s.dialect, err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stopCheckpoints != nil {
			s.stopCheckpoints()
		}
		if s.stmts != nil {
			s.closeErr = s.stmts.close()
		}
		s.closeErr = errors.Join(s.closeErr, s.db.Close())
		if s.writer != nil {
			s.closeErr = errors.Join(s.closeErr, s.writer.Close())
		}
	})
	return s.closeErr
}

// newStore is the Store of an opened database.
func newStore(o *openedDB) *Store {
	s := &Store{db: o.db, writer: o.writer, dialect: o.dialect, gate: o.gate, jobList: jobListKeeps{every: anchorEvery}}
	if s.writer != nil {
		s.stmts = newBatchStmts(s.writer.DB, s.fireConflict)
	}
	return s
}

// Dialect is "sqlite", "postgres" or "mysql".
func (s *Store) Dialect() string { return s.dialect }

// maxTxAttempts bounds how often a transaction that lost a deadlock or
// serialization race is run again.
const maxTxAttempts = 5

// inTx runs fn in a transaction, again if it failed only because it lost a
// race with a concurrent transaction. fn must be safe to repeat.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return retrying(ctx, func() error { return s.runInTx(ctx, fn) })
}

// inStatements runs fn, which writes chunks (one statement each on
// SQLite), atomically and retried as inTx does. A single chunk on a SQLite
// file runs on the writer connection after the write gate but without
// BEGIN: a statement is atomic on its own, and SQLite keeps a statement
// journal (a copy of every page the statement changes, for rolling back
// the statement alone) only for a statement inside a transaction. A tick's
// run inserts touch a page of the job index per job, so that copy cost a
// third of InsertRuns at 3,000 jobs a second (docs/performance.md, stop
// 36). More chunks, and the other dialects, run in one transaction.
func (s *Store) inStatements(ctx context.Context, chunks int, fn func(ctx context.Context, db bun.IDB) error) error {
	if s.writer == nil || chunks != 1 {
		return s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
	}
	return retrying(ctx, func() error {
		return s.onWriter(ctx, func(db bun.IDB) error { return fn(ctx, db) })
	})
}

// onWriter runs fn on the writer connection after the write gate on a
// SQLite file (whose page cache stays warm, see openedDB.writer), else on
// the pool: a single statement, or a read of rows the writers have just
// written.
func (s *Store) onWriter(ctx context.Context, fn func(db bun.IDB) error) error {
	if s.writer == nil {
		return fn(s.db)
	}
	if err := s.gate.acquire(ctx); err != nil {
		return err
	}
	defer s.gate.release()
	return fn(s.writer)
}

// retrying calls try until it succeeds, fails with an error that is not
// retryable, or maxTxAttempts are spent, pausing longer each time.
func retrying(ctx context.Context, try func() error) error {
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil || attempt >= maxTxAttempts || !isRetryable(err) {
			return err
		}
		t := time.NewTimer(time.Duration(attempt*attempt) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// runInTx runs fn in one transaction: on a SQLite file on the writer
// connection, the gate taken first (so the writers queue for it in order,
// not in the pool's random order, and the connection is free when taken).
func (s *Store) runInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	if s.writer == nil {
		return s.db.RunInTx(ctx, nil, fn)
	}
	if err := s.gate.acquire(ctx); err != nil {
		return err
	}
	defer s.gate.release()
	return s.writer.RunInTx(ctx, nil, fn)
}

// now is the store's clock for created_at/updated_at.
func now() time.Time { return utc(time.Now()) }

// --- jobs

// CreateJob inserts j (sets ID, Revision=1, CreatedAt, UpdatedAt) and
// records it as the job's first version, saved by nobody in particular.
func (s *Store) CreateJob(ctx context.Context, j *Job) error {
	return s.CreateJobBy(ctx, j, "")
}

// CreateJobBy is CreateJob recording savedBy (a user name) as the author of
// the first version, in the same transaction as the job.
func (s *Store) CreateJobBy(ctx context.Context, j *Job, savedBy string) error {
	return s.createJob(ctx, j, savedBy, false)
}

// CreateJobWithGroupBy is CreateJobBy that also creates the job's group,
// as EnsureGroup does (titled by its appname), when no group has that
// appname yet, in the same transaction: a job that cannot be stored
// leaves no new group behind.
func (s *Store) CreateJobWithGroupBy(ctx context.Context, j *Job, savedBy string) error {
	return s.createJob(ctx, j, savedBy, true)
}

func (s *Store) createJob(ctx context.Context, j *Job, savedBy string, withGroup bool) error {
	t := now()
	row := jobRowOf(j)
	row.Revision, row.CreatedAt, row.UpdatedAt = 1, t, t
	cols := append(append([]string{}, jobWriteColumns...), "revision", "created_at", "updated_at")
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if withGroup {
			if err := s.ensureJobGroups(ctx, tx, []*Job{j}, t); err != nil {
				return err
			}
		}
		q := tx.NewInsert().Model(&row).Column(cols...)
		if s.dialect != schema.MySQL {
			q = q.Returning("id")
		}
		if _, err := q.Exec(ctx); err != nil {
			return err
		}
		return insertJobVersion(ctx, tx, &row, row.ID, 1, t, savedBy)
	})
	if err != nil {
		return wrap(err, "create job %q", j.Name)
	}
	j.ID, j.Revision, j.CreatedAt, j.UpdatedAt = row.ID, 1, t, t
	j.Params = []byte(row.Params)
	return nil
}

// GetJob returns the job or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id int64) (*Job, error) {
	var row jobRow
	if err := s.db.NewSelect().Model(&row).Where("j.id = ?", id).Scan(ctx); err != nil {
		return nil, wrap(err, "job %d", id)
	}
	j := row.domain()
	return &j, nil
}

// UpdateJob overwrites the job's fields, bumps Revision and UpdatedAt (written back into j)
// and records the new revision as a version. ErrNotFound if absent.
func (s *Store) UpdateJob(ctx context.Context, j *Job) error {
	return s.UpdateJobBy(ctx, j, "")
}

// UpdateJobBy is UpdateJob recording savedBy (a user name) as the author of
// the new version, in the same transaction as the update.
func (s *Store) UpdateJobBy(ctx context.Context, j *Job, savedBy string) error {
	return s.updateJob(ctx, j, savedBy, false)
}

// UpdateJobWithGroupBy is UpdateJobBy that also creates the job's group,
// as EnsureGroup does (titled by its appname), when no group has that
// appname yet, in the same transaction: an update that cannot be stored
// leaves no new group behind.
func (s *Store) UpdateJobWithGroupBy(ctx context.Context, j *Job, savedBy string) error {
	return s.updateJob(ctx, j, savedBy, true)
}

func (s *Store) updateJob(ctx context.Context, j *Job, savedBy string, withGroup bool) error {
	t := now()
	row := jobRowOf(j)
	row.UpdatedAt = t
	var stored jobRow
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if withGroup {
			if err := s.ensureJobGroups(ctx, tx, []*Job{j}, t); err != nil {
				return err
			}
		}
		q := tx.NewUpdate().Model(&row).Column(jobWriteColumns...).Column("updated_at").
			Set("revision = revision + 1").
			Where("id = ?", j.ID)
		res, err := q.Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		if err := tx.NewSelect().Model(&stored).Column("revision", "created_at").Where("j.id = ?", j.ID).Scan(ctx); err != nil {
			return err
		}
		return insertJobVersion(ctx, tx, &row, j.ID, stored.Revision, t, savedBy)
	})
	if err != nil {
		return wrap(err, "update job %d", j.ID)
	}
	j.Revision, j.CreatedAt, j.UpdatedAt = stored.Revision, stored.CreatedAt.UTC(), t
	j.Params = []byte(row.Params)
	return nil
}

// DeleteJob deletes the job, its runs and its versions. ErrNotFound if absent.
func (s *Store) DeleteJob(ctx context.Context, id int64) error {
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewDelete().TableExpr("jobs").Where("id = ?", id).Exec(ctx)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		if _, err := tx.NewDelete().TableExpr("runs").Where("job_id = ?", id).Exec(ctx); err != nil {
			return err
		}
		_, err = tx.NewDelete().TableExpr("job_versions").Where("job_id = ?", id).Exec(ctx)
		return err
	})
	return wrap(err, "delete job %d", id)
}

// ListJobs returns a page of jobs ordered by id, and the total count.
func (s *Store) ListJobs(ctx context.Context, p Page) ([]Job, int, error) {
	return s.FindJobs(ctx, JobFilter{}, p)
}

// FindJobs returns a page of the jobs f selects, in f's order, and how many
// it selects in all. An unknown f.Sort is an error.
func (s *Store) FindJobs(ctx context.Context, f JobFilter, p Page) ([]Job, int, error) {
	order, err := jobOrder(f.Sort)
	if err != nil {
		return nil, 0, err
	}
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		q = scopeJobsWhere(q, f.Scope)
		if f.Group != "" {
			q = q.Where("j.group_name = ?", f.Group)
		}
		if f.Enabled != nil {
			q = q.Where("j.enabled = ?", *f.Enabled)
		}
		if f.Handler != "" {
			q = q.Where("j.handler = ?", f.Handler)
		}
		if f.Author != "" {
			q = q.Where("j.author = ?", f.Author)
		}
		if f.NameLike != "" {
			q = q.Where("LOWER(j.name) LIKE ? ESCAPE '!'", containsPattern(f.NameLike))
		}
		if f.Search != "" {
			pattern := containsPattern(f.Search)
			q = q.Where("(LOWER(j.name) LIKE ? ESCAPE '!' OR LOWER(j.description) LIKE ? ESCAPE '!')", pattern, pattern)
		}
		if f.ScheduleType != "" {
			q = q.Where("j.schedule_type = ?", f.ScheduleType)
		}
		switch f.LastStatus {
		case "":
		case LastStatusNone:
			q = q.Where("NOT EXISTS (SELECT 1 FROM runs AS lr WHERE lr.job_id = j.id)")
		default:
			// The latest run by the runs_job_id_scheduled_at_idx index: one
			// index probe per job. The same order as FindRuns, so the status
			// filtered on is the one the job's run list shows first.
			q = q.Where("(SELECT lr.status FROM runs AS lr WHERE lr.job_id = j.id"+
				" ORDER BY lr.scheduled_at DESC, lr.id DESC LIMIT 1) = ?", f.LastStatus)
		}
		return q
	}
	// The count and the page each walk the filter's index up to the page
	// (OFFSET), so at 100,000 jobs they take about as long as each other:
	// they run at once, on two connections. On SQLite and PostgreSQL the
	// total is kept until a job or group changes, and on SQLite the pages'
	// anchors too (joblist.go). The page's OFFSET is taken in a subquery
	// of ids (MySQL refuses LIMIT there): where the filter's index covers
	// it (a group in id order, or in name order on SQLite) the skipped
	// entries are stepped through in the index alone, and only the page's
	// rows are read whole.
	key, keep := s.jobListKey(f)
	var stamp int64
	if keep {
		if stamp, err = s.jobsStamp(ctx); err != nil {
			return nil, 0, err
		}
	}
	counted := make(chan error, 1)
	var total int
	go func() {
		var err error
		total, err = s.countJobs(key, stamp, func() (int, error) {
			n, err := filter(s.db.NewSelect().Model((*jobRow)(nil))).Count(ctx)
			return int(n), err
		})
		counted <- err
	}()
	var rows []jobRow
	selectIDs := func() *bun.SelectQuery { return filter(s.db.NewSelect().Model((*jobRow)(nil)).Column("j.id")) }
	paged := false
	if keep && s.anchored(f, p) {
		paged, err = s.anchoredPage(ctx, key, stamp, f.Sort == SortIDDesc, p, selectIDs, &rows)
	}
	if !paged && err == nil {
		rows = nil
		var q *bun.SelectQuery
		if s.dialect != schema.MySQL && p.PageSize > 0 {
			q = s.db.NewSelect().Model(&rows).Where("j.id IN (?)", paginate(selectIDs().Order(order...), p)).Order(order...)
		} else {
			q = paginate(filter(s.db.NewSelect().Model(&rows)).Order(order...), p)
		}
		err = q.Scan(ctx)
	}
	if cerr := <-counted; cerr != nil {
		return nil, 0, wrap(cerr, "count jobs")
	}
	if err != nil {
		return nil, 0, wrap(err, "list jobs")
	}
	out := make([]Job, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, total, nil
}

// jobOrder is the ORDER BY of a JobFilter.Sort.
func jobOrder(sort string) ([]string, error) {
	switch sort {
	case "", SortIDAsc:
		return []string{"j.id ASC"}, nil
	case SortIDDesc:
		return []string{"j.id DESC"}, nil
	case SortNameAsc:
		return []string{"j.name ASC", "j.id ASC"}, nil
	case SortNameDesc:
		return []string{"j.name DESC", "j.id DESC"}, nil
	case SortUpdatedAtAsc:
		return []string{"j.updated_at ASC", "j.id ASC"}, nil
	case SortUpdatedAtDesc:
		return []string{"j.updated_at DESC", "j.id DESC"}, nil
	}
	return nil, fmt.Errorf("store: unknown job sort %q (one of %s)", sort, strings.Join(JobSorts, ", "))
}

// containsPattern is a LIKE pattern (escape character '!') matching values
// that contain sub, lower-cased: callers compare with LOWER(column).
func containsPattern(sub string) string {
	r := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")
	return "%" + r.Replace(strings.ToLower(sub)) + "%"
}

// EnabledJobs returns every enabled job.
func (s *Store) EnabledJobs(ctx context.Context) ([]Job, error) {
	var rows []jobRow
	if err := s.db.NewSelect().Model(&rows).Where("j.enabled = ?", true).Order("j.id ASC").Scan(ctx); err != nil {
		return nil, wrap(err, "list enabled jobs")
	}
	out := make([]Job, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, nil
}

// paginate applies p to q; PageSize <= 0 means every row.
func paginate(q *bun.SelectQuery, p Page) *bun.SelectQuery {
	if p.PageSize <= 0 {
		return q
	}
	return q.Limit(int64(p.PageSize)).Offset(int64(p.Offset()))
}

// --- runs

// InsertRuns records fires in one batch (status as given, usually triggered;
// empty means triggered).
// A run whose FireID already exists is left untouched. It returns the fire
// ids that were newly inserted.
func (s *Store) InsertRuns(ctx context.Context, runs []Run) (inserted []string, err error) {
	if len(runs) == 0 {
		return nil, nil
	}
	t := now()
	seen := make(map[string]bool, len(runs))
	rows := make([]runRow, 0, len(runs))
	for i := range runs {
		r := &runs[i]
		if r.FireID == "" {
			return nil, fmt.Errorf("store: insert runs: run %d has no fire id", i)
		}
		if seen[r.FireID] {
			continue // the first of duplicates wins, like separate inserts would
		}
		seen[r.FireID] = true
		rows = append(rows, runRowOf(r, t))
	}
	// One lock order for every writer: overlapping batches then wait for
	// each other instead of deadlocking.
	sort.Slice(rows, func(i, j int) bool { return rows[i].FireID < rows[j].FireID })
	chunks := s.chunks(rows)

	err = s.inStatements(ctx, len(chunks), func(ctx context.Context, db bun.IDB) error {
		inserted = inserted[:0]
		for _, chunk := range chunks {
			got, err := s.insertRunChunk(ctx, db, chunk)
			if err != nil {
				return err
			}
			inserted = append(inserted, got...)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "insert %d runs", len(rows))
	}
	return inserted, nil
}

// insertRunChunk inserts one chunk with a single statement and returns the
// fire ids it created.
func (s *Store) insertRunChunk(ctx context.Context, db bun.IDB, chunk []runRow) ([]string, error) {
	var got []string
	done, err := s.runBatch(ctx, db, insertRunsBatch, chunk, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		got = append(got, id)
		return nil
	})
	if done {
		return got, err
	}
	if s.dialect != schema.MySQL {
		// RETURNING lists only the rows the statement inserted.
		err := db.NewInsert().Model(&chunk).Column(runInsertColumns...).
			On(s.fireConflict("DO NOTHING")).
			Returning(insertRunsReturning).
			Scan(ctx, &got)
		return got, err
	}
	// MySQL has no RETURNING: mark the rows this statement creates with a
	// random token (a duplicate keeps its own) and read the marked ones back.
	token := insertToken()
	_, err = db.NewInsert().Model(&chunk).Column(runInsertColumns...).
		Value("insert_token", "?", token).
		On("DUPLICATE KEY UPDATE").Set("id = id").
		Returning("NULL"). // MariaDB would otherwise return the NULL columns
		Exec(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(chunk))
	for i := range chunk {
		ids[i] = chunk[i].FireID
	}
	err = db.NewSelect().TableExpr("runs").Column("fire_id").
		Where("fire_id IN (?)", bun.List(ids)).
		Where("insert_token = ?", token).
		Scan(ctx, &got)
	return got, err
}

// insertToken is a random non-zero 63-bit marker (0 is the column default).
func insertToken() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := int64(binary.LittleEndian.Uint64(b[:]) >> 1); v != 0 {
			return v
		}
	}
}

// ApplyResults stores node reports in batches, idempotently by fire id: a run
// already in a terminal status is never changed; a result for an unknown
// fire id inserts the run; "running" never overwrites a terminal status.
func (s *Store) ApplyResults(ctx context.Context, results []cluster.RunResult) error {
	_, err := s.ApplyResultsFinished(ctx, results)
	return err
}

// ApplyResultsFinished is ApplyResults that also returns the runs this call
// moved to a terminal status (inserted terminal, or changed from a
// non-terminal status), in fire id order. A replayed report finds its run
// terminal already and is not listed again, even when two calls race.
func (s *Store) ApplyResultsFinished(ctx context.Context, results []cluster.RunResult) ([]Finished, error) {
	if len(results) == 0 {
		return nil, nil
	}
	t := now()
	// A statement may touch a row once (PostgreSQL enforces it): fold
	// reports for one fire id the way applying them in order would.
	idx := make(map[string]int, len(results))
	rows := make([]runRow, 0, len(results))
	for i := range results {
		r := &results[i]
		if r.FireID == "" || r.Status == "" {
			return nil, fmt.Errorf("store: apply results: result %d has no fire id or status", i)
		}
		row := resultRowOf(r, t)
		if j, ok := idx[r.FireID]; ok {
			if !cluster.Terminal(rows[j].Status) {
				rows[j] = row // last wins until a terminal status sticks
			}
			continue
		}
		idx[r.FireID] = len(rows)
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].FireID < rows[j].FireID })
	chunks := s.chunks(rows)

	var finished []Finished
	err := s.inStatements(ctx, len(chunks), func(ctx context.Context, db bun.IDB) error {
		finished = finished[:0]
		for _, chunk := range chunks {
			changed, err := s.applyResultChunk(ctx, db, chunk)
			if err != nil {
				return err
			}
			for _, c := range changed {
				if cluster.Terminal(c.Status) {
					finished = append(finished, Finished(c))
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "apply %d results", len(rows))
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].FireID < finished[j].FireID })
	return finished, nil
}

// changedRun is a run row an upsert inserted or changed.
type changedRun struct {
	FireID string `bun:"fire_id"`
	JobID  int64  `bun:"job_id"`
	Status string `bun:"status"`
}

// applyResultChunk upserts one chunk with a single statement and returns the
// rows it inserted or changed (a terminal row is never changed).
func (s *Store) applyResultChunk(ctx context.Context, db bun.IDB, chunk []runRow) ([]changedRun, error) {
	var changed []changedRun
	done, err := s.runBatch(ctx, db, applyResultsBatch, chunk, func(rows *sql.Rows) error {
		var c changedRun
		if err := rows.Scan(&c.FireID, &c.JobID, &c.Status); err != nil {
			return err
		}
		changed = append(changed, c)
		return nil
	})
	if done {
		return changed, err
	}
	if s.dialect != schema.MySQL {
		// RETURNING lists only the rows the statement inserted or updated:
		// the WHERE clause of DO UPDATE skips terminal runs.
		err := db.NewInsert().Model(&chunk).Column(runInsertColumns...).
			On(s.fireConflict("DO UPDATE")).Set(upsertResultSet).
			Where(resultNotTerminal).
			Returning(resultsReturning).
			Scan(ctx, &changed)
		return changed, err
	}
	// MySQL: mark the rows this statement inserts or changes with a random
	// token (a terminal row keeps its own) and read the marked ones back.
	token := insertToken()
	_, err = db.NewInsert().Model(&chunk).Column(runInsertColumns...).
		Value("insert_token", "?", token).
		On("DUPLICATE KEY UPDATE").
		Set("insert_token = IF(status IN ("+terminalList+"), insert_token, ?)", token).
		Set(mysqlResultSet).
		Returning("NULL"). // MariaDB would otherwise return the NULL columns
		Exec(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(chunk))
	for i := range chunk {
		ids[i] = chunk[i].FireID
	}
	err = db.NewSelect().TableExpr("runs").Column("fire_id", "job_id", "status").
		Where("fire_id IN (?)", bun.List(ids)).
		Where("insert_token = ?", token).
		Scan(ctx, &changed)
	return changed, err
}

// terminalList is the SQL list of terminal statuses.
var terminalList = func() string {
	var b strings.Builder
	for i, st := range []string{
		cluster.StatusSuccess, cluster.StatusFailed, cluster.StatusTimeout,
		cluster.StatusKilled, cluster.StatusLost, cluster.StatusSkipped,
	} {
		if !cluster.Terminal(st) {
			panic("store: " + st + " is not terminal")
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + st + "'")
	}
	return b.String()
}()

// The RETURNING lists of InsertRuns' and ApplyResults' statements, and the
// condition of the latter's DO UPDATE, for bun's statements and the
// prepared ones (prepared.go).
const (
	insertRunsReturning = "fire_id"
	resultsReturning    = "fire_id, job_id, status"
)

var resultNotTerminal = "r.status NOT IN (" + terminalList + ")"

// upsertResultSet updates a non-terminal run from a report (PostgreSQL,
// SQLite; the WHERE clause keeps terminal runs as they are). A report never
// moves a run back to "triggered", and blank fields keep what is stored.
var upsertResultSet = `status = CASE WHEN EXCLUDED.status = '` + cluster.StatusTriggered + `' THEN r.status ELSE EXCLUDED.status END,
node = CASE WHEN EXCLUDED.node <> '' THEN EXCLUDED.node ELSE r.node END,
started_at = COALESCE(EXCLUDED.started_at, r.started_at),
finished_at = COALESCE(EXCLUDED.finished_at, r.finished_at),
exit_code = COALESCE(EXCLUDED.exit_code, r.exit_code),
output = EXCLUDED.output,
output_truncated = EXCLUDED.output_truncated,
message = EXCLUDED.message,
attempt = CASE WHEN EXCLUDED.attempt > 0 THEN EXCLUDED.attempt ELSE r.attempt END,
updated_at = EXCLUDED.updated_at`

// mysqlResultSet is upsertResultSet for MySQL's ON DUPLICATE KEY UPDATE,
// which has no WHERE: every assignment keeps the old value of a terminal
// run. MySQL applies assignments left to right and later ones see the new
// values, so status is assigned last.
var mysqlResultSet = func() string {
	keep := "status IN (" + terminalList + ")"
	return `node = IF(` + keep + `, node, IF(VALUES(node) <> '', VALUES(node), node)),
started_at = IF(` + keep + `, started_at, COALESCE(VALUES(started_at), started_at)),
finished_at = IF(` + keep + `, finished_at, COALESCE(VALUES(finished_at), finished_at)),
exit_code = IF(` + keep + `, exit_code, COALESCE(VALUES(exit_code), exit_code)),
output = IF(` + keep + `, output, VALUES(output)),
output_truncated = IF(` + keep + `, output_truncated, VALUES(output_truncated)),
message = IF(` + keep + `, message, VALUES(message)),
attempt = IF(` + keep + ` OR VALUES(attempt) <= 0, attempt, VALUES(attempt)),
updated_at = IF(` + keep + `, updated_at, VALUES(updated_at)),
status = IF(` + keep + ` OR VALUES(status) = '` + cluster.StatusTriggered + `', status, VALUES(status))`
}()

// GetRun returns a run or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (*Run, error) {
	var row runRow
	if err := s.db.NewSelect().Model(&row).Where("r.id = ?", id).Scan(ctx); err != nil {
		return nil, wrap(err, "run %d", id)
	}
	r := row.domain()
	return &r, nil
}

// RunByFireID returns a run or ErrNotFound.
func (s *Store) RunByFireID(ctx context.Context, fireID string) (*Run, error) {
	var row runRow
	cond, args := s.fireIDEquals("r.", fireID)
	if err := s.db.NewSelect().Model(&row).Where(cond, args...).Scan(ctx); err != nil {
		return nil, wrap(err, "run %q", fireID)
	}
	r := row.domain()
	return &r, nil
}

// ListRuns returns a page of a job's runs, newest scheduled first, and the total.
func (s *Store) ListRuns(ctx context.Context, jobID int64, p Page) ([]Run, int, error) {
	return s.FindRuns(ctx, RunFilter{JobID: jobID}, p)
}

// runFilterWhere adds f's conditions but its Status to a query on runs
// (alias r): scope, job, node and the scheduled-time bounds.
func runFilterWhere(q *bun.SelectQuery, f RunFilter) *bun.SelectQuery {
	q = scopeRunsWhere(q, f.Scope)
	if f.JobID != 0 {
		q = q.Where("r.job_id = ?", f.JobID)
	}
	if f.Node != "" {
		q = q.Where("r.node = ?", f.Node)
	}
	if !f.From.IsZero() {
		q = q.Where("r.scheduled_at >= ?", utc(f.From))
	}
	if !f.To.IsZero() {
		q = q.Where("r.scheduled_at < ?", utc(f.To))
	}
	return q
}

// FindRuns returns a page of the runs f selects, newest scheduled first
// (ties: newest id first), and how many it selects in all.
func (s *Store) FindRuns(ctx context.Context, f RunFilter, p Page) ([]Run, int, error) {
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		q = runFilterWhere(q, f)
		if f.Status != "" {
			q = q.Where("r.status = ?", f.Status)
		}
		return q
	}
	total, err := filter(s.db.NewSelect().Model((*runRow)(nil))).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count runs")
	}
	var rows []runRow
	q := filter(s.db.NewSelect().Model(&rows)).Order("r.scheduled_at DESC", "r.id DESC")
	q = paginate(q, p)
	if err := q.Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list runs")
	}
	out := make([]Run, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, int(total), nil
}
