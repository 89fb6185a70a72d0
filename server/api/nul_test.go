package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/store"
)

// loginAs creates a user of role (in groups) and returns its session token.
func (b *bundle) loginAs(username, role string, groups []int64) string {
	b.t.Helper()
	hash, err := auth.HashPassword(username + "-password")
	require.NoError(b.t, err)
	require.NoError(b.t, b.store.CreateUser(b.ctx, &store.User{Username: username, PasswordHash: hash, Role: role,
		Groups: groups}))
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": username,
		"password": username + "-password"}, http.StatusOK, &login)
	return login.Token
}

// auditCount is the number of audit entries.
func (b *bundle) auditCount() int {
	b.t.Helper()
	_, n, err := b.store.FindAudit(b.ctx, store.AuditFilter{}, store.Page{Page: 1, PageSize: 1})
	require.NoError(b.t, err)
	return n
}

// TestNULInQueryParametersIsRefused: a NUL (%00) in any query parameter of
// any route is a 400 naming the parameter, for any caller (a viewer, or
// nobody), before anything reaches SQL: it used to answer 500 (SQLite
// refuses NUL in text) on every list filter.
func TestNULInQueryParametersIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)
	viewer := b.loginAs("vera", store.RoleViewer, nil)
	jobRuns := fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID)
	for _, tc := range []struct{ path, param string }{
		{"/api/v1/jobs?q=%00", "q"},
		{"/api/v1/jobs?group=a%00b", "group"},
		{"/api/v1/jobs?author=%00", "author"},
		{"/api/v1/jobs?handler=%00", "handler"},
		{"/api/v1/runs?node=%00", "node"},
		{jobRuns + "?node=%00", "node"},
		{"/api/v1/audit?user=%00", "user"},
		{"/api/v1/audit?object_type=%00", "object_type"},
		{"/api/v1/audit?object_id=%00", "object_id"},
		{"/api/v1/groups?appname=%00", "appname"},
		{"/api/v1/groups?title=%00", "title"},
		{"/api/v1/reports/daily?group=%00", "group"},
		{"/api/v1/jobs?page=1&q=ok&q=%00", "q"},
	} {
		for _, token := range []string{b.token, viewer, ""} {
			e := b.errorOf(http.MethodGet, tc.path, token, nil, http.StatusBadRequest)
			require.Equal(t, map[string]string{tc.param: "query parameter " + tc.param +
				` must not contain a NUL character (\u0000)`}, e.Fields, tc.path)
		}
	}
	// A parameter's name is checked too (and named readably).
	e := b.errorOf(http.MethodGet, "/api/v1/jobs?x%00y=1", b.token, nil, http.StatusBadRequest)
	require.Contains(t, e.Fields, `x\u0000y`)
	// Even on a route that needs no login, and on the node routes.
	b.errorOf(http.MethodGet, "/healthz?x=%00", "", nil, http.StatusBadRequest)
	b.errorOf(http.MethodPost, "/api/v1/internal/results?x=%00", nodeToken, cluster.ResultBatch{}, http.StatusBadRequest)
	require.NotContains(t, b.logs.String(), "api request failed")
	// Without a NUL the same filters answer.
	b.doJSON(http.MethodGet, "/api/v1/jobs?q=back&group=default&author=x&handler=shell", viewer, nil, http.StatusOK, nil)
}

// TestNULInCompatParametersIsRefused: the xxl-job-compatible API reads
// query, form and JSON parameters; a NUL in any of them is a 400 in
// xxl-job's envelope, before authentication, and nothing is written.
func TestNULInCompatParametersIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var tok api.TokenCreated
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, map[string]any{"name": "portal", "role": "admin", "groups": []int64{}},
		http.StatusCreated, &tok)
	before := b.jobTotal()
	send := func(method, path, contentType, body string, token string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if token != "" {
			req.Header.Set(api.XXLTokenHeader, token)
		}
		resp, err := b.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct{ method, path, ct, body, param string }{
		{http.MethodGet, "/jobinfo/list?jobDesc=%00", "", "", "jobDesc"},
		{http.MethodGet, "/jobgroup/list?title=%00", "", "", "title"},
		{http.MethodPost, "/jobinfo/list", form, "jobDesc=a%00b", "jobDesc"},
		{http.MethodPost, "/jobgroup/list", form, "title=%00", "title"},
		{http.MethodPost, "/jobgroup/list", "", "title=%00", "title"}, // compat reads a form whatever its type
		{http.MethodPost, "/jobgroup/list", "application/json", `{"title":"a\u0000"}`, "title"},
		{http.MethodPost, "/jobinfo/add", "application/json", `{"jobGroup":1,"jobDesc":"x\u0000","author":"a",` +
			`"scheduleType":"CRON","scheduleConf":"0 0 * * * ?","executorHandler":"shell"}`, "jobDesc"},
		{http.MethodPost, "/jobinfo/add", form, "jobGroup=1&jobDesc=nul&author=a%00", "author"},
	} {
		for _, token := range []string{tok.Secret, ""} {
			status, out := send(tc.method, tc.path, tc.ct, tc.body, token)
			require.Equal(t, http.StatusBadRequest, status, "%s %s %q: %v", tc.method, tc.path, tc.body, out)
			require.EqualValues(t, 400, out["code"], tc.path)
			require.Contains(t, out["msg"], tc.param+` must not contain a NUL character (\u0000)`, tc.path)
			require.Contains(t, out, "content")
		}
	}
	require.Equal(t, before, b.jobTotal())
	// The same parameters without a NUL still work.
	status, out := send(http.MethodPost, "/jobgroup/list", form, "title=x", tok.Secret)
	require.Equal(t, http.StatusOK, status, "%v", out)
	status, out = send(http.MethodGet, "/jobinfo/list?jobDesc=x", "", "", tok.Secret)
	require.Equal(t, http.StatusOK, status, "%v", out)
}

// TestNULInJSONBodiesIsRefused: a NUL in any string of a JSON body (a
// value or a map key) is a 400 naming the field by its JSON path; nothing is
// written, the audit log loses nothing, and no request answers 500 — not
// even an anonymous login.
func TestNULInJSONBodiesIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var g api.Group
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "grp1"}, http.StatusCreated, &g)
	auditBefore := b.auditCount()
	nul := ` must not contain a NUL character (\u0000)`
	for _, tc := range []struct {
		method, path, token, body string
		fields                    map[string]string
	}{
		{http.MethodPost, "/api/v1/auth/login", "", `{"username":"a\u0000","password":"x"}`,
			map[string]string{"username": "username" + nul}},
		{http.MethodPost, "/api/v1/groups", b.token, `{"appname":"grp2","title":"a\u0000b"}`,
			map[string]string{"title": "title" + nul}},
		{http.MethodPut, fmt.Sprintf("/api/v1/groups/%d", g.ID), b.token, `{"appname":"grp1","title":"\u0000"}`,
			map[string]string{"title": "title" + nul}},
		{http.MethodPut, fmt.Sprintf("/api/v1/groups/%d", g.ID), b.token,
			`{"appname":"grp1","address_type":"manual","addresses":["n1","n\u0000"]}`,
			map[string]string{"addresses": "addresses" + nul}},
		{http.MethodPost, "/api/v1/tokens", b.token, `{"name":"a\u0000b","role":"viewer","groups":[]}`,
			map[string]string{"name": "name" + nul}},
		{http.MethodPost, "/api/v1/internal/security-events", nodeToken,
			`{"node":"n\u0000","events":[{"kind":"bad_signature","key":"/k","reason":"r"}]}`,
			map[string]string{"node": "node" + nul}},
		{http.MethodPost, "/api/v1/internal/security-events", nodeToken,
			`{"node":"n1","events":[{"kind":"bad_signature","key":"/k","reason":"r"},{"kind":"stale_term","key":"/k\u0000"}]}`,
			map[string]string{"events[1].key": "key" + nul}},
		{http.MethodPost, "/api/v1/jobs", b.token, `{"name":"j\u0000","schedule":"@every 1m","handler":"shell",` +
			`"alarm_emails":["a@example.com","b\u0000@example.com"]}`,
			map[string]string{"name": "name" + nul, "alarm_emails": "alarm_emails" + nul}},
		{http.MethodPost, "/api/v1/jobs/batch", b.token, `{"jobs":[{"name":"ok","schedule":"@every 1m","handler":"shell"},` +
			`{"name":"x","description":"\u0000","schedule":"@every 1m","handler":"shell"}]}`,
			map[string]string{"jobs[1].description": "description" + nul}},
		{http.MethodPost, "/api/v1/users", b.token, `{"username":"u\u0000ser","password":"long-enough-pw","role":"viewer"}`,
			map[string]string{"username": "username" + nul}},
	} {
		e := b.errorOf(tc.method, tc.path, tc.token, tc.body, http.StatusBadRequest)
		require.Equal(t, tc.fields, e.Fields, "%s %s", tc.method, tc.path)
	}
	require.NotContains(t, b.logs.String(), "api request failed")
	require.NotContains(t, b.logs.String(), "audit entry not written")
	require.Equal(t, auditBefore, b.auditCount(), "a refused request is not audited, and none failed to be")
	got, err := b.store.GetGroup(b.ctx, g.ID)
	require.NoError(t, err)
	require.Equal(t, "grp1", got.Title)
	require.Equal(t, 0, b.jobTotal())
	tokens, _, err := b.store.ListAccessTokens(b.ctx, 0, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Empty(t, tokens)
	events, _, err := b.store.ListSecurityEvents(b.ctx, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Empty(t, events)
}

// TestNULInRunOutputIsStillAccepted: a node reports what a process wrote,
// which may hold any byte; the store cleans a NUL in a run's output or
// message (U+FFFD) instead of refusing the batch, so the result intake
// keeps accepting it.
func TestNULInRunOutputIsStillAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)
	sched := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	finished := sched.Add(time.Second)
	exit := 1
	res := []cluster.RunResult{{FireID: cluster.FireID(job.ID, sched), JobID: job.ID, Trigger: cluster.TriggerSchedule,
		Node: "n1", Status: cluster.StatusFailed, ScheduledAt: sched, StartedAt: &sched, FinishedAt: &finished,
		ExitCode: &exit, Output: "bin\x00ary", Message: "exit\x00 1"}}
	b.postResults(res)
	var runs api.List[api.Run]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID), b.token, nil, http.StatusOK, &runs)
	require.Len(t, runs.Items, 1)
	require.Equal(t, "bin\uFFFDary", runs.Items[0].Output)

	// Its other fields are names: a NUL there is refused.
	res[0].Node = "n\x00"
	e := b.errorOf(http.MethodPost, "/api/v1/internal/results", nodeToken, cluster.ResultBatch{Results: res},
		http.StatusBadRequest)
	require.Equal(t, map[string]string{"results[0].node": `node must not contain a NUL character (\u0000)`}, e.Fields)
}
