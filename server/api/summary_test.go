package api_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/store"
)

// summaryFixture: groups billing (an enabled cron job with runs yesterday
// and today, a disabled job that never ran) and ops (a fixed_delay job with
// one run today), and a viewer of billing.
func summaryFixture(ctx context.Context, t *testing.T, b *alertBundle) (day time.Time, jobs map[string]*store.Job, viewer string) {
	t.Helper()
	day = time.Now().UTC().Truncate(24 * time.Hour)
	groups := map[string]*store.Group{}
	for _, name := range []string{"billing", "ops"} {
		g := &store.Group{AppName: name}
		require.NoError(t, b.store.CreateGroup(ctx, g))
		groups[name] = g
	}
	jobs = map[string]*store.Job{
		"cron":     {Name: "cron", Group: "billing", ScheduleType: "cron", Schedule: "*/5 * * * *", Handler: "shell", Enabled: true},
		"disabled": {Name: "disabled", Group: "billing", ScheduleType: "cron", Schedule: "*/5 * * * *", Handler: "shell"},
		"delay":    {Name: "delay", Group: "ops", ScheduleType: "fixed_delay", Schedule: "10s", Handler: "shell", Enabled: true},
	}
	for _, k := range []string{"cron", "disabled", "delay"} {
		require.NoError(t, b.store.CreateJob(ctx, jobs[k]))
	}
	run := func(j *store.Job, at time.Time, status string) cluster.RunResult {
		fin := at.Add(time.Second)
		return cluster.RunResult{FireID: cluster.FireID(j.ID, at), JobID: j.ID, Trigger: cluster.TriggerSchedule,
			Node: "n1", Status: status, ScheduledAt: at, StartedAt: &at, FinishedAt: &fin}
	}
	require.NoError(t, b.store.ApplyResults(ctx, []cluster.RunResult{
		run(jobs["cron"], day.Add(-time.Hour), cluster.StatusFailed),
		run(jobs["cron"], day.Add(time.Minute), cluster.StatusSuccess),
		run(jobs["cron"], day.Add(2*time.Minute), cluster.StatusSuccess),
		run(jobs["cron"], day.Add(3*time.Minute), cluster.StatusTimeout),
		run(jobs["delay"], day.Add(time.Minute), cluster.StatusFailed),
	}))
	hash, err := auth.HashPassword("viewer-pw")
	require.NoError(t, err)
	require.NoError(t, b.store.CreateUser(ctx, &store.User{Username: "vic", PasswordHash: hash, Role: store.RoleViewer,
		Groups: []int64{groups["billing"].ID}}))
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "vic", "password": "viewer-pw"},
		http.StatusOK, &login)
	return day, jobs, login.Token
}

// TestStatsSummaryAPI: GET /api/v1/stats/summary counts the caller's jobs
// enabled and disabled and their runs by status, since the given time and
// on today's UTC day, in one reply; a viewer sees their groups' figures.
func TestStatsSummaryAPI(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	day, _, viewer := summaryFixture(b.ctx, t, b)

	get := func(token, query string) api.StatsSummary {
		var out api.StatsSummary
		b.doJSON(http.MethodGet, "/api/v1/stats/summary"+query, token, nil, http.StatusOK, &out)
		return out
	}
	zero := map[string]int{"triggered": 0, "running": 0, "success": 0, "failed": 0, "timeout": 0, "killed": 0, "lost": 0, "skipped": 0}
	with := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range zero {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}

	all := get(b.token, "")
	require.Equal(t, api.JobCounts{Enabled: 2, Disabled: 1}, all.Jobs)
	require.Equal(t, day.Format(store.DayLayout), all.Day)
	require.True(t, all.Since.Equal(day), "since defaults to the start of today, UTC: %v", all.Since)
	require.Equal(t, with(map[string]int{"success": 2, "timeout": 1, "failed": 1}), all.RunsToday)
	require.Equal(t, all.RunsToday, all.RunsSince)

	// A since before midnight (a browser east of UTC) takes yesterday's last run in; today's UTC day does not change.
	since := day.Add(-2 * time.Hour)
	earlier := get(b.token, "?since="+url.QueryEscape(since.Format(time.RFC3339)))
	require.True(t, earlier.Since.Equal(since))
	require.Equal(t, with(map[string]int{"success": 2, "timeout": 1, "failed": 2}), earlier.RunsSince)
	require.Equal(t, all.RunsToday, earlier.RunsToday)

	// The viewer of billing sees billing's jobs and runs only.
	v := get(viewer, "")
	require.Equal(t, api.JobCounts{Enabled: 1, Disabled: 1}, v.Jobs)
	require.Equal(t, with(map[string]int{"success": 2, "timeout": 1}), v.RunsToday)

	e := b.errorOf(http.MethodGet, "/api/v1/stats/summary?since=yesterday", b.token, nil, http.StatusBadRequest)
	require.Contains(t, e.Fields["since"], "RFC 3339")
	b.errorOf(http.MethodGet, "/api/v1/stats/summary", "", nil, http.StatusUnauthorized)
}

// TestJobListCarriesLastRunAndNextFire: each item of GET /api/v1/jobs
// carries the job's latest run and next fire, so the jobs table needs no
// request per row.
func TestJobListCarriesLastRunAndNextFire(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	day, jobs, _ := summaryFixture(b.ctx, t, b)

	before := time.Now()
	var page api.List[api.JobListItem]
	b.doJSON(http.MethodGet, "/api/v1/jobs?sort=id", b.token, nil, http.StatusOK, &page)
	require.Len(t, page.Items, 3)
	byName := map[string]api.JobListItem{}
	for _, it := range page.Items {
		byName[it.Name] = it
	}

	cron := byName["cron"]
	require.Equal(t, jobs["cron"].ID, cron.ID)
	require.NotNil(t, cron.LastRun, "the cron job ran")
	require.Equal(t, "timeout", cron.LastRun.Status, "the latest run by scheduled time")
	require.True(t, cron.LastRun.ScheduledAt.Equal(day.Add(3*time.Minute)))
	require.True(t, cron.LastRun.FinishedAt.Equal(day.Add(3*time.Minute+time.Second)))
	// */5 * * * *: the next multiple of five minutes after now.
	require.True(t, cron.NextFireAt.After(before), "next fire %v is after the request", cron.NextFireAt)
	require.LessOrEqual(t, cron.NextFireAt.Sub(before), 5*time.Minute+time.Second)
	require.Zero(t, cron.NextFireAt.Minute()%5)
	require.Zero(t, cron.NextFireAt.Second())

	disabled := byName["disabled"]
	require.Nil(t, disabled.LastRun, "never ran")
	require.True(t, disabled.NextFireAt.IsZero(), "a disabled job does not fire")

	delay := byName["delay"]
	require.Equal(t, "failed", delay.LastRun.Status)
	require.True(t, delay.NextFireAt.IsZero(), "a fixed_delay job's next fire depends on its last run's end")

	// The wire form: null for no run and no next fire.
	var raw struct {
		Items []map[string]any `json:"items"`
	}
	b.doJSON(http.MethodGet, "/api/v1/jobs?enabled=false", b.token, nil, http.StatusOK, &raw)
	require.Len(t, raw.Items, 1)
	require.Contains(t, raw.Items[0], "last_run")
	require.Nil(t, raw.Items[0]["last_run"])
	require.Nil(t, raw.Items[0]["next_fire_at"])
}
