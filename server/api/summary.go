package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// summaryRoutes registers GET /api/v1/stats/summary.
func (s *server) summaryRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/stats/summary", s.user(MaxBodyBytes, s.statsSummary)).Methods(http.MethodGet)
}

// JobCounts are how many jobs are enabled and disabled.
type JobCounts struct {
	Enabled  int `json:"enabled"`
	Disabled int `json:"disabled"`
}

// StatsSummary is the reply of GET /api/v1/stats/summary: the figures the
// web admin's dashboard shows, in one request.
type StatsSummary struct {
	Jobs JobCounts `json:"jobs"`
	// Since is the start of RunsSince (the caller's since, or the start of
	// today, UTC).
	Since Time `json:"since"`
	// RunsSince counts the runs scheduled at or after Since, by status
	// (every run status, zero included).
	RunsSince map[string]int `json:"runs_since"`
	// Day is today, UTC (YYYY-MM-DD).
	Day string `json:"day"`
	// RunsToday counts the runs scheduled on Day, by status: the open day
	// of the daily report, counted live.
	RunsToday map[string]int `json:"runs_today"`
}

// runStatuses are every run status, the keys of StatsSummary's counts.
var runStatuses = lastStatuses[:len(lastStatuses)-1]

// statsSummary handles GET /api/v1/stats/summary?since=: the caller's jobs
// enabled and disabled, their runs since since (RFC 3339; default the start
// of today, UTC: a browser sends the start of its local day) and on today's
// UTC day, by status. A user sees the figures of their groups only.
func (s *server) statsSummary(w http.ResponseWriter, r *http.Request) error {
	now := s.now().UTC()
	day := now.Truncate(24 * time.Hour)
	since := day
	if v := strings.TrimSpace(r.URL.Query().Get("since")); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return &ValidationError{Message: "invalid summary filter",
				Fields: map[string]string{"since": fmt.Sprintf("since %q is not an RFC 3339 time such as 2026-03-01T00:00:00Z", v)}}
		}
		since = t
	}
	ctx := r.Context()
	sc := PrincipalFrom(ctx).Scope()
	jobs, err := s.store.CountJobs(ctx, sc)
	if err != nil {
		return fmt.Errorf("stats summary: %w", err)
	}
	runsSince, err := s.store.CountRunsByStatus(ctx, store.RunFilter{Scope: sc, From: since})
	if err != nil {
		return fmt.Errorf("stats summary: %w", err)
	}
	runsToday, err := s.store.CountRunsByStatus(ctx, store.RunFilter{Scope: sc, From: day, To: day.AddDate(0, 0, 1)})
	if err != nil {
		return fmt.Errorf("stats summary: %w", err)
	}
	writeJSON(w, http.StatusOK, StatsSummary{
		Jobs:  JobCounts{Enabled: jobs.Enabled, Disabled: jobs.Disabled},
		Since: Time{since}, RunsSince: allStatuses(runsSince),
		Day: day.Format(store.DayLayout), RunsToday: allStatuses(runsToday),
	})
	return nil
}

func allStatuses(m map[string]int) map[string]int {
	out := make(map[string]int, len(runStatuses))
	for _, st := range runStatuses {
		out[st] = m[st]
	}
	return out
}

// JobListItem is a job of GET /api/v1/jobs: the job, its latest run and
// its next fire, so a page of the jobs table is one request.
type JobListItem struct {
	Job
	// LastRun is the job's latest run (by scheduled time), null when it
	// never ran.
	LastRun *JobLastRun `json:"last_run"`
	// NextFireAt is the job's next scheduled fire after now, null when it is
	// disabled, never fires on its own (none), or its next fire depends on
	// the previous run's end (fixed_delay).
	NextFireAt Time `json:"next_fire_at"`
}

// JobLastRun is a job's latest run in a job list.
type JobLastRun struct {
	ID          int64  `json:"id"`
	Status      string `json:"status"`
	ScheduledAt Time   `json:"scheduled_at"`
	StartedAt   Time   `json:"started_at"`
	FinishedAt  Time   `json:"finished_at"`
}

// jobListItems adds each job's latest run (one query for the page) and next
// fire to a page of jobs.
func (s *server) jobListItems(ctx context.Context, jobs []store.Job) ([]JobListItem, error) {
	ids := make([]int64, len(jobs))
	for i := range jobs {
		ids[i] = jobs[i].ID
	}
	last, err := s.store.LastRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]JobListItem, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		out[i] = JobListItem{Job: jobFromStore(j), NextFireAt: Time{s.nextFire(j, now)}}
		if r, ok := last[j.ID]; ok {
			out[i].LastRun = &JobLastRun{ID: r.ID, Status: r.Status, ScheduledAt: Time{r.ScheduledAt},
				StartedAt: timeOf(r.StartedAt), FinishedAt: timeOf(r.FinishedAt)}
		}
	}
	return out, nil
}

// nextFire is j's next fire after now as the schedule preview computes it,
// or zero (see JobListItem.NextFireAt).
func (s *server) nextFire(j *store.Job, now time.Time) time.Time {
	if !j.Enabled || j.ScheduleType == schedule.TypeNone || j.ScheduleType == schedule.TypeFixedDelay {
		return time.Time{}
	}
	loc, err := schedule.LoadZone(j.Timezone, s.loc)
	if err != nil {
		return time.Time{}
	}
	sched, err := schedule.Parse(j.ScheduleType, j.Schedule, "", loc)
	if err != nil {
		return time.Time{}
	}
	t := sched.Next(now)
	if !t.After(now) {
		return time.Time{}
	}
	return t
}
