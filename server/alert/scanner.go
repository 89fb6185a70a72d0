package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/server/store"
)

// scanBatch bounds the runs read per query.
const scanBatch = 500

// outputTailBytes is how much of a run's output an event carries.
const outputTailBytes = 2 << 10

// scanCursor is the scanner's position in the runs ordered by (updated_at, id).
type scanCursor struct {
	At time.Time `json:"at"`
	ID int64     `json:"id"`
}

func (c scanCursor) before(at time.Time, id int64) bool {
	return c.At.Before(at) || (c.At.Equal(at) && c.ID < id)
}

// jobState is what the scanner knows of a job's failure episode: whether
// it is failing, and the run (by updated_at, id) that last changed that.
type jobState struct {
	failing bool
	last    scanCursor
}

// scanner is the leader's state for one term.
type scanner struct {
	s      *Service
	cursor scanCursor
	jobs   map[int64]*jobState
	seen   map[int64]time.Time // run id → updated_at of runs handled within the overlap
	// missed holds the fire ids raised as undispatched that the last
	// complete sweep of the undispatched runs still returned; sweep collects
	// them during the current sweep, which replaces missed when it ends. A
	// fire that got dispatched or became terminal is not returned again
	// (no report moves a run back to triggered), so it is forgotten after
	// one sweep and missed holds at most the runs undispatched now.
	missed map[string]bool
	sweep  map[string]bool
	undisp int64 // id cursor of the undispatched-runs query
	// overlapAt is when a pass last re-read the overlap (wall clock: it
	// paces passes, it is not compared with run times).
	overlapAt time.Time
}

// overlapEvery is how often a pass re-reads the overlap: half of it, but
// not less often than every pass.
func (sc *scanner) overlapEvery() time.Duration {
	return max(sc.s.cfg.Overlap/2, sc.s.cfg.ScanInterval)
}

// RunScanner raises run events while this replica leads: it reads the runs
// that became terminal (in order of updated_at, from a cursor kept in SQL)
// and fires that were never dispatched, and raises run.failed, run.timeout,
// run.lost, run.killed (jobs with AlertOnKill), schedule.missed and
// job.recovered (node.down is raised by the lost-run monitor). Start it when
// leadership is gained and cancel ctx when it is lost; it returns when ctx
// is done.
func (s *Service) RunScanner(ctx context.Context) {
	sc := newScanner(s)
	for ctx.Err() == nil {
		err := sc.load(ctx)
		if err == nil {
			break
		}
		s.log.Warn("alert scanner: loading cursor failed; retrying", "err", err)
		if !waitctx.Sleep(ctx, s.cfg.ScanInterval) {
			return
		}
	}
	// Passes start half a second into a second (waitctx.OffBeat), off the
	// burst of the fires of that second, whose runs they read later.
	last := time.Now()
	for waitctx.Until(ctx, waitctx.OffBeat(last, time.Now(), s.cfg.ScanInterval, waitctx.HalfSecond)) {
		last = time.Now()
		if err := sc.pass(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("alert scanner pass failed; retrying", "err", err)
		}
	}
}

func newScanner(s *Service) *scanner {
	return &scanner{s: s, jobs: map[int64]*jobState{}, seen: map[int64]time.Time{},
		missed: map[string]bool{}, sweep: map[string]bool{}}
}

// load reads the stored cursor and steps back Rescan, so that runs whose
// events a crashed leader had not raised yet are read again (their events
// are deduplicated by key). Without a cursor (the first term ever) it
// starts Settle plus Overlap before now: the runs of the last seconds are
// read, older history is not alerted. Starting any later would leave a
// hole: a run stamped before the start whose transaction commits after the
// term's first pass sorts before the cursor, and only the overlap would
// find it, after newer runs of its job.
func (sc *scanner) load(ctx context.Context) error {
	raw, err := sc.s.cfg.Store.GetSetting(ctx, settingScanCursor)
	switch {
	case errors.Is(err, store.ErrNotFound):
		sc.cursor = scanCursor{At: sc.s.cfg.Now().Add(-sc.s.cfg.Settle - sc.s.cfg.Overlap)}
		return nil
	case err != nil:
		return fmt.Errorf("alert: read scan cursor: %w", err)
	}
	var c scanCursor
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return fmt.Errorf("alert: decode scan cursor: %w", err)
	}
	sc.cursor = scanCursor{At: c.At.Add(-sc.s.cfg.Rescan)}
	return nil
}

// pass reads the runs that became terminal since the cursor and raises
// their events; every overlapEvery it first re-reads the runs from Overlap
// plus overlapEvery before the cursor through the cursor, and raises the
// events of those not seen yet. The overlap covers transactions that commit
// well after they stamped updated_at (a writer queued on a lock); runs seen
// already are skipped by id. The runs are read in two steps so that a pass
// costs in proportion to the runs it has not seen: their keys (ids alone for
// the overlap, id and updated_at after the cursor) from an index only, then
// the few columns that tell whether a run can raise anything, for the unseen
// ones only; a run's other columns and output are read only when it raises
// an event.
func (sc *scanner) pass(ctx context.Context) error {
	set, err := sc.s.Settings(ctx)
	if err != nil {
		return err
	}
	now := sc.s.cfg.Now()
	until := now.Add(-sc.s.cfg.Settle)
	// The overlap is re-read every overlapEvery (and on the first pass of a
	// term), from far enough back that a run stamped up to Overlap before
	// the cursor of any pass in between is read.
	every := sc.overlapEvery()
	lo := sc.cursor.At.Add(-sc.s.cfg.Overlap - every)
	latest := sc.cursor
	if sc.overlapAt.IsZero() || time.Since(sc.overlapAt) >= every {
		ids, err := sc.s.cfg.Store.TerminalRunIDsThrough(ctx, lo, sc.cursor.At, sc.cursor.ID)
		if err != nil {
			return err
		}
		if err := sc.heads(ctx, set, sc.unseen(ids), &latest); err != nil {
			return err
		}
		sc.overlapAt = time.Now()
	}
	page := sc.cursor
	for {
		keys, err := sc.s.cfg.Store.TerminalRunKeysSince(ctx, page.At, page.ID, until, scanBatch)
		if err != nil {
			return err
		}
		ids := make([]int64, len(keys))
		for i, k := range keys {
			page, ids[i] = scanCursor{At: k.UpdatedAt, ID: k.ID}, k.ID
		}
		if err := sc.heads(ctx, set, sc.unseen(ids), &latest); err != nil {
			return err
		}
		if len(keys) < scanBatch {
			break
		}
	}
	for id, at := range sc.seen {
		if at.Before(lo) {
			delete(sc.seen, id)
		}
	}
	if latest != sc.cursor {
		sc.cursor = latest
		raw, _ := json.Marshal(sc.cursor)
		if err := sc.s.cfg.Store.PutSetting(ctx, settingScanCursor, string(raw), "alert-scanner"); err != nil {
			return fmt.Errorf("alert: store scan cursor: %w", err)
		}
	}
	return sc.undispatched(ctx, now.Add(-time.Duration(set.MissedThreshold)))
}

// unseen returns the ids not in seen, in their order.
func (sc *scanner) unseen(ids []int64) []int64 {
	var fresh []int64
	for _, id := range ids {
		if _, ok := sc.seen[id]; !ok {
			fresh = append(fresh, id)
		}
	}
	return fresh
}

// heads reads the heads of the runs with the given ids (in (updated_at,
// id) order), scanBatch a query, and raises their events in that order,
// marking each seen and moving latest past it. Terminal runs never change,
// so the heads are those of the ids (less any run deleted in between).
func (sc *scanner) heads(ctx context.Context, set Settings, ids []int64, latest *scanCursor) error {
	for len(ids) > 0 {
		n := min(len(ids), scanBatch)
		runs, err := sc.s.cfg.Store.TerminalRunHeads(ctx, ids[:n])
		if err != nil {
			return err
		}
		ids = ids[n:]
		for i := range runs {
			r := &runs[i]
			if err := sc.run(ctx, set, r); err != nil {
				return err
			}
			sc.seen[r.ID] = r.UpdatedAt
			if latest.before(r.UpdatedAt, r.ID) {
				*latest = scanCursor{At: r.UpdatedAt, ID: r.ID}
			}
		}
	}
	return nil
}

// undispatched raises schedule.missed for fires still not dispatched a
// threshold after they were due. Each pass sweeps all of them (from id 0,
// resuming where a failed pass stopped) and raises the ones not raised by
// an earlier sweep; a fire raised again anyway (forgotten, then returned
// again because the threshold setting shrank) is deduplicated by its key.
func (sc *scanner) undispatched(ctx context.Context, before time.Time) error {
	for {
		runs, err := sc.s.cfg.Store.UndispatchedRunsBefore(ctx, before, sc.undisp, scanBatch)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if !sc.missed[r.FireID] && !sc.sweep[r.FireID] {
				msg := fmt.Sprintf("fire due at %s was not dispatched within the threshold", r.ScheduledAt.UTC().Format(time.RFC3339))
				if _, err := sc.s.raise(ctx, runEvent(KindScheduleMissed, &r, msg), ""); err != nil {
					return err
				}
			}
			sc.sweep[r.FireID] = true
		}
		if len(runs) < scanBatch {
			// Start from the beginning next time: runs below the cursor may
			// still be undispatched. The fires this sweep did not return
			// are dispatched or terminal now: forget them.
			sc.undisp = 0
			sc.missed, sc.sweep = sc.sweep, map[string]bool{} // a new map: a cleared one keeps its peak size
			return nil
		}
		sc.undisp = runs[len(runs)-1].ID
	}
}

// run raises the events of one terminal run. r holds the columns of
// store.TerminalRunHeads; the rest is read (full) only when an event is
// raised, so a success of a job that is not failing costs no read.
func (sc *scanner) run(ctx context.Context, set Settings, r *store.Run) error {
	loaded := false
	full := func() error {
		if loaded {
			return nil
		}
		f, err := sc.s.cfg.Store.RunByFireID(ctx, r.FireID)
		if err != nil {
			return fmt.Errorf("alert: read run %s: %w", r.FireID, err)
		}
		*r, loaded = *f, true
		return nil
	}
	if r.DispatchedAt != nil && !r.ScheduledAt.IsZero() && r.Trigger == cluster.TriggerSchedule &&
		r.DispatchedAt.Sub(r.ScheduledAt) > time.Duration(set.MissedThreshold) {
		if err := full(); err != nil {
			return err
		}
		msg := fmt.Sprintf("fire due at %s was dispatched %s late", r.ScheduledAt.UTC().Format(time.RFC3339),
			r.DispatchedAt.Sub(r.ScheduledAt).Round(time.Millisecond))
		if _, err := sc.s.raise(ctx, runEvent(KindScheduleMissed, withoutOutput(r), msg), ""); err != nil {
			return err
		}
	}
	var kind string
	switch r.Status {
	case cluster.StatusSuccess:
		return sc.success(ctx, r, full)
	case cluster.StatusSkipped:
		kind = KindScheduleMissed
	case cluster.StatusFailed:
		kind = KindRunFailed
		if err := full(); err != nil { // Node is not in the head
			return err
		}
		if r.Node == "" && r.DispatchedAt == nil {
			kind = KindScheduleMissed // never dispatched: no node could take it
		}
	case cluster.StatusTimeout:
		kind = KindRunTimeout
	case cluster.StatusLost:
		kind = KindRunLost
	case cluster.StatusKilled:
		// A person (or a COVER_EARLY block strategy) ended it: alerted only
		// for jobs that ask for it, and outside failure episodes.
		j, err := sc.s.cfg.Store.GetJob(ctx, r.JobID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !j.AlertOnKill) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("alert: job %d of killed run %s: %w", r.JobID, r.FireID, err)
		}
		kind = KindRunKilled
	default:
		return nil
	}
	if err := full(); err != nil {
		return err
	}
	ev := runEvent(kind, r, r.Message)
	if !isFailure(kind) {
		_, err := sc.s.raise(ctx, ev, "")
		return err
	}
	st, err := sc.state(ctx, r.JobID)
	if err != nil {
		return err
	}
	if !st.last.before(r.UpdatedAt, r.ID) {
		// Older than the run that last changed the episode state: read
		// again by a new leader (its event is stored), or a transaction
		// that committed late, read from the overlap after newer runs of
		// its job. Its episode was alerted already (a failure or recovery
		// is newer): record it, suppressed as late, and leave the state
		// (state never reads late events back). A stored event is kept as
		// it is (deduplicated by key).
		_, err := sc.s.raise(ctx, ev, reasonLate)
		return err
	}
	suppress := ""
	if st.failing {
		suppress = reasonEpisode
	}
	if _, err := sc.s.raise(ctx, ev, suppress); err != nil {
		return err
	}
	st.failing, st.last = true, scanCursor{At: r.UpdatedAt, ID: r.ID}
	return nil
}

// success raises job.recovered for the first success after failures; full
// reads the rest of the run when it does.
func (sc *scanner) success(ctx context.Context, r *store.Run, full func() error) error {
	st, err := sc.state(ctx, r.JobID)
	if err != nil {
		return err
	}
	if !st.failing || !st.last.before(r.UpdatedAt, r.ID) {
		return nil
	}
	if err := full(); err != nil {
		return err
	}
	ev := runEvent(KindJobRecovered, withoutOutput(r), "first success after a failure streak")
	if _, err := sc.s.raise(ctx, ev, ""); err != nil {
		return err
	}
	st.failing, st.last = false, scanCursor{At: r.UpdatedAt, ID: r.ID}
	return nil
}

// withoutOutput is r without its output: schedule.missed about a late
// dispatch and job.recovered carry no output tail.
func withoutOutput(r *store.Run) *store.Run {
	c := *r
	c.Output = ""
	return &c
}

// state returns the job's episode state, read from its latest episode
// event in the outbox the first time.
func (sc *scanner) state(ctx context.Context, jobID int64) (*jobState, error) {
	if st, ok := sc.jobs[jobID]; ok {
		return st, nil
	}
	st := &jobState{}
	last, err := sc.s.cfg.Store.LatestAlertEvent(ctx, jobID, append([]string{KindJobRecovered}, failureKinds...), reasonLate)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("alert: episode state of job %d: %w", jobID, err)
	default:
		st.failing = isFailure(last.Kind)
		st.last = scanCursor{At: last.OccurredAt, ID: last.RunID}
	}
	sc.jobs[jobID] = st
	return st, nil
}

// runEvent is the event of kind about run r; its key is kind:fire id. It
// occurs when the run became terminal (updated_at), which orders episodes.
func runEvent(kind string, r *store.Run, msg string) Event {
	return Event{
		Kind: kind, Key: kind + ":" + r.FireID, JobID: r.JobID, RunID: r.ID, FireID: r.FireID, Node: r.Node,
		RunStatus: r.Status, ExitCode: r.ExitCode, Message: msg, OutputTail: tail(r.Output, outputTailBytes),
		OccurredAt: r.UpdatedAt,
	}
}

// tail is the last n bytes of s, starting at a line or rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	for len(s) > 0 && s[0]&0xC0 == 0x80 {
		s = s[1:]
	}
	return s
}
