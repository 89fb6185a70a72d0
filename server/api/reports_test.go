package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/report"
	"github.com/cronix/cronix/server/store"
)

// TestDailyReportAPI: GET /api/v1/reports/daily lists the report rows of
// a day range, filtered by group and limited to the caller's groups; bad
// filters answer 400 naming the field.
func TestDailyReportAPI(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	ctx := b.ctx
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	groups := map[string]*store.Group{}
	for _, name := range []string{"billing", "ops"} {
		g := &store.Group{AppName: name}
		require.NoError(t, b.store.CreateGroup(ctx, g))
		groups[name] = g
		j := &store.Job{Name: name + "-job", Group: name, ScheduleType: "cron", Schedule: "* * * * *", Handler: "shell"}
		require.NoError(t, b.store.CreateJob(ctx, j))
		var results []cluster.RunResult
		for i := range 5 {
			at := day.Add(time.Duration(i) * time.Hour)
			st := cluster.StatusSuccess
			if i == 4 {
				st = cluster.StatusFailed
			}
			started, finished := at.Add(10*time.Millisecond), at.Add(110*time.Millisecond)
			results = append(results, cluster.RunResult{FireID: cluster.FireID(j.ID, at), JobID: j.ID,
				Trigger: cluster.TriggerSchedule, Node: "n1", Status: st, ScheduledAt: at,
				StartedAt: &started, FinishedAt: &finished})
		}
		require.NoError(t, b.store.ApplyResults(ctx, results))
	}
	svc, err := report.New(report.Config{Store: b.store, Now: func() time.Time { return day.Add(72 * time.Hour) }})
	require.NoError(t, err)
	_, err = svc.Report(ctx)
	require.NoError(t, err)

	hash, err := auth.HashPassword("viewer-pw")
	require.NoError(t, err)
	require.NoError(t, b.store.CreateUser(ctx, &store.User{Username: "vic", PasswordHash: hash, Role: store.RoleViewer,
		Groups: []int64{groups["billing"].ID}}))
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "vic", "password": "viewer-pw"},
		http.StatusOK, &login)

	get := func(token, query string) api.List[api.DailyReport] {
		var out api.List[api.DailyReport]
		b.doJSON(http.MethodGet, "/api/v1/reports/daily?"+query, token, nil, http.StatusOK, &out)
		return out
	}
	all := get(b.token, "from=2026-03-10&to=2026-03-10")
	require.Equal(t, 2, all.Total)
	require.Equal(t, "billing", all.Items[0].Group)
	require.Equal(t, "ops", all.Items[1].Group)
	r := all.Items[0]
	require.Equal(t, "2026-03-10", r.Day)
	require.Equal(t, api.RunCounts{Total: 5, Success: 4, Failed: 1}, r.Runs)
	require.Equal(t, api.Percentiles{Count: 5, P50: 10, P99: 10}, r.LatenessMs)
	require.Equal(t, api.Percentiles{Count: 5, P50: 100, P99: 100}, r.DurationMs)
	require.True(t, r.Final)
	require.False(t, r.UpdatedAt.IsZero())
	// Written like every instant of the API: UTC with milliseconds.
	_, raw := b.do(http.MethodGet, "/api/v1/reports/daily?from=2026-03-10&to=2026-03-10", b.token, nil)
	require.Contains(t, string(raw), `"updated_at":"`+r.UpdatedAt.UTC().Format(api.TimeLayout)+`"`)

	ops := get(b.token, "from=2026-03-01&to=2026-03-31&group=ops")
	require.Equal(t, 1, ops.Total)
	require.Equal(t, "ops-job", ops.Items[0].JobName)

	// A viewer of billing sees billing only, even when asking for ops.
	mine := get(login.Token, "from=2026-03-10&to=2026-03-10")
	require.Equal(t, 1, mine.Total)
	require.Equal(t, "billing", mine.Items[0].Group)
	require.Zero(t, get(login.Token, "from=2026-03-10&to=2026-03-10&group=ops").Total)

	// Outside the range: nothing. Default range (the last 7 days): nothing here either.
	require.Zero(t, get(b.token, "from=2026-03-11&to=2026-03-12").Total)
	require.Zero(t, get(b.token, "").Total)

	for query, field := range map[string]string{
		"from=yesterday":                "from",
		"from=2026-03-10&to=2026-13-01": "to",
		"from=2026-03-12&to=2026-03-10": "from",
		"from=2024-01-01&to=2026-03-10": "to",
		"page_size=0":                   "page_size",
		fmt.Sprintf("group=%0200d", 1):  "group",
	} {
		e := b.errorOf(http.MethodGet, "/api/v1/reports/daily?"+query, b.token, nil, http.StatusBadRequest)
		require.Contains(t, e.Fields, field, query)
	}
	b.errorOf(http.MethodGet, "/api/v1/reports/daily", "", nil, http.StatusUnauthorized)
}

// TestJobAlertOnKillRoundTrip: alert_on_kill is saved, shown, and reset by
// a full replace that leaves it out.
func TestJobAlertOnKillRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := validJob()
	body["alert_on_kill"] = true
	var created api.SavedJob
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &created)
	require.True(t, created.AlertOnKill)
	var got api.Job
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", created.ID), b.token, nil, http.StatusOK, &got)
	require.True(t, got.AlertOnKill)
	st, err := b.store.GetJob(b.ctx, created.ID)
	require.NoError(t, err)
	require.True(t, st.AlertOnKill)
	delete(body, "alert_on_kill")
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", created.ID), b.token, body, http.StatusOK, &got)
	require.False(t, got.AlertOnKill)
}
