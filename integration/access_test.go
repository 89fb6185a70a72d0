package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// rawCall is one HTTP request against a standalone with full control of
// the headers (the harness client always sends a bearer token).
type rawCall struct {
	method, path string
	body         io.Reader
	contentType  string
	header       http.Header
}

func send(t *testing.T, hc *http.Client, base string, c rawCall) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, c.body)
	require.NoError(t, err)
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	for k, vs := range c.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

func jsonBody(t *testing.T, v any) io.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// TestCookieSessionNeedsCSRF (access issue, acceptance 5): the login sets an
// HttpOnly SameSite=Lax session cookie; an unsafe request authenticated by
// that cookie alone is refused with 403 and changes nothing, the same request
// with the session's CSRF header passes, and the same request with the
// session as a Bearer token needs no CSRF header.
func TestCookieSessionNeedsCSRF(t *testing.T) {
	t.Parallel()
	s := startStandalone(t, t.TempDir(), nil)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}

	code, hdr, raw := send(t, browser, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/auth/login",
		contentType: "application/json", body: jsonBody(t, map[string]string{"username": "admin", "password": adminPassword})})
	require.Equal(t, http.StatusOK, code, "%s", raw)
	var login struct {
		Token     string `json:"token"`
		CSRFToken string `json:"csrf_token"`
	}
	require.NoError(t, json.Unmarshal(raw, &login))
	require.NotEmpty(t, login.CSRFToken, "the login answer carries the CSRF token: %s", raw)
	cookie := hdr.Get("Set-Cookie")
	require.Contains(t, cookie, "cronix_session=")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Lax")
	require.NotContains(t, cookie, "Secure", "plain HTTP: no Secure attribute")

	countJobs := func() int {
		var list struct {
			Total int `json:"total"`
		}
		code, err := s.api.Do(http.MethodGet, "/api/v1/jobs", nil, &list)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		return list.Total
	}
	job := func(name string) io.Reader {
		return jsonBody(t, map[string]any{"name": name, "schedule_type": "none", "handler": "shell",
			"params": map[string]string{"script": "true"}})
	}

	// A safe request with the cookie alone works.
	code, _, raw = send(t, browser, s.api.Base, rawCall{method: http.MethodGet, path: "/api/v1/auth/me"})
	require.Equal(t, http.StatusOK, code, "%s", raw)

	before := countJobs()
	// Cookie, no CSRF header: 403, nothing created.
	code, _, raw = send(t, browser, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/jobs",
		contentType: "application/json", body: job("csrf-none")})
	require.Equal(t, http.StatusForbidden, code, "%s", raw)
	require.Contains(t, strings.ToLower(string(raw)), "csrf")
	// Cookie and a wrong CSRF header: 403.
	code, _, raw = send(t, browser, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/jobs",
		contentType: "application/json", body: job("csrf-wrong"), header: http.Header{"X-Csrf-Token": {"not-it"}}})
	require.Equal(t, http.StatusForbidden, code, "%s", raw)
	require.Equal(t, before, countJobs(), "a refused request changed nothing")

	// Cookie and the right CSRF header: created.
	code, _, raw = send(t, browser, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/jobs",
		contentType: "application/json", body: job("csrf-right"), header: http.Header{"X-Csrf-Token": {login.CSRFToken}}})
	require.Equal(t, http.StatusCreated, code, "%s", raw)

	// The same session as a Bearer token, no cookie, no CSRF header: created.
	code, _, raw = send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/jobs",
		contentType: "application/json", body: job("bearer"), header: http.Header{"Authorization": {"Bearer " + login.Token}}})
	require.Equal(t, http.StatusCreated, code, "%s", raw)
	require.Equal(t, before+2, countJobs())

	// Logout through the cookie (with CSRF) clears the cookie and ends the session.
	code, hdr, raw = send(t, browser, s.api.Base, rawCall{method: http.MethodPost, path: "/api/v1/auth/logout",
		header: http.Header{"X-Csrf-Token": {login.CSRFToken}}})
	require.Equal(t, http.StatusNoContent, code, "%s", raw)
	require.Contains(t, hdr.Get("Set-Cookie"), "Max-Age=0")
	code, _, _ = send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodGet, path: "/api/v1/auth/me",
		header: http.Header{"Authorization": {"Bearer " + login.Token}}})
	require.Equal(t, http.StatusUnauthorized, code)
}

// auditEntry is one row of GET /api/v1/audit.
type auditEntry struct {
	At         time.Time       `json:"at"`
	User       string          `json:"user"`
	Address    string          `json:"address"`
	Action     string          `json:"action"`
	ObjectType string          `json:"object_type"`
	ObjectID   string          `json:"object_id"`
	Diff       json.RawMessage `json:"diff"`
}

func auditOf(t *testing.T, api *harness.Client, query url.Values) []auditEntry {
	t.Helper()
	query.Set("page_size", "500")
	var out struct {
		Items []auditEntry `json:"items"`
		Total int          `json:"total"`
	}
	code, err := api.Do(http.MethodGet, "/api/v1/audit?"+query.Encode(), nil, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out.Items, out.Total, "one page holds every entry")
	return out.Items
}

// TestLoginThrottlingOverHTTP (access issue, acceptance 6): 50 wrong
// passwords for one user inside 5 s are throttled with 429 and Retry-After,
// every attempt is in the audit log, the right password works once the
// announced delay has passed, and another user name from the same address
// gets its own budget and is then throttled too.
func TestLoginThrottlingOverHTTP(t *testing.T) {
	t.Parallel()
	s := startStandalone(t, t.TempDir(), nil)
	for _, u := range []string{"victim", "other"} {
		code, err := s.api.Do(http.MethodPost, "/api/v1/users", map[string]any{"username": u,
			"password": u + "-right-password", "role": "viewer", "groups": []int64{}}, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, code)
	}
	login := func(user, password string) (int, time.Duration) {
		code, hdr, raw := send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodPost,
			path: "/api/v1/auth/login", contentType: "application/json",
			body: jsonBody(t, map[string]string{"username": user, "password": password})})
		var retry time.Duration
		if code == http.StatusTooManyRequests {
			secs, err := strconv.Atoi(hdr.Get("Retry-After"))
			require.NoError(t, err, "429 carries Retry-After in seconds: %q", hdr.Get("Retry-After"))
			require.Positive(t, secs)
			retry = time.Duration(secs) * time.Second
		}
		require.Contains(t, []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests}, code, "%s", raw)
		return code, retry
	}

	// 50 wrong passwords, as fast as the server answers (well inside 5 s).
	start := time.Now()
	var failed, throttled int
	var lastRetry time.Duration
	var lastAt time.Time
	for range 50 {
		code, retry := login("victim", "wrong-password")
		if code == http.StatusTooManyRequests {
			throttled++
			lastRetry, lastAt = retry, time.Now()
		} else {
			failed++
		}
	}
	t.Logf("50 wrong passwords in %s: %d refused as wrong, %d throttled", time.Since(start).Round(time.Millisecond), failed, throttled)
	require.Positive(t, throttled, "guessing was throttled")
	require.GreaterOrEqual(t, failed, 5, "the first failures are free")
	// While throttled, even the right password is refused.
	code, _ := login("victim", "victim-right-password")
	require.Equal(t, http.StatusTooManyRequests, code)

	// Every attempt is audited: the failures and the throttled ones.
	entries := auditOf(t, s.api, url.Values{"user": {"victim"}})
	byAction := map[string]int{}
	for _, e := range entries {
		byAction[e.Action]++
		require.Equal(t, "127.0.0.1", e.Address)
		require.False(t, e.At.IsZero())
	}
	require.Equal(t, failed, byAction["login_failed"], "each failure audited: %v", byAction)
	require.Equal(t, throttled+1, byAction["login_throttled"], "each throttled attempt audited: %v", byAction)

	// After the announced delay the right password works (polled: the
	// delay is what the server said, plus its one-second rounding).
	deadline := lastAt.Add(lastRetry + 2*time.Second)
	for {
		c, retry := login("victim", "victim-right-password")
		if c == http.StatusUnauthorized {
			t.Fatalf("the right password was refused as wrong")
		}
		if c != http.StatusTooManyRequests {
			break
		}
		require.True(t, time.Now().Before(deadline), "still throttled %s after the announced delay (now %s)", lastRetry, retry)
		time.Sleep(min(retry, 200*time.Millisecond)) // pacing the poll, not waiting for an event
	}
	code, hdr, raw := send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodPost,
		path: "/api/v1/auth/login", contentType: "application/json",
		body: jsonBody(t, map[string]string{"username": "victim", "password": "victim-right-password"})})
	require.Equal(t, http.StatusOK, code, "%s %v", raw, hdr)

	// Another user name from the same address: its own free failures, then throttled.
	var otherFailed int
	for range 30 {
		c, _ := login("other", "wrong-password")
		if c == http.StatusTooManyRequests {
			break
		}
		otherFailed++
	}
	require.GreaterOrEqual(t, otherFailed, 1, "the other user had a budget of its own")
	require.Less(t, otherFailed, 30, "the other user name was throttled too")
	c, _ := login("other", "wrong-password")
	require.Equal(t, http.StatusTooManyRequests, c)
}

// TestAPITokenOnTheCompatAPI (access issue, acceptance 7): an API token
// scoped to group A adds a job to group A through /jobinfo/add with
// XXL-JOB-ACCESS-TOKEN, is refused for group B, stops working the moment it
// is revoked, and its secret is not in the database files.
func TestAPITokenOnTheCompatAPI(t *testing.T) {
	t.Parallel()
	s := startStandalone(t, t.TempDir(), nil)
	groupIDs := map[string]int64{}
	for _, g := range []string{"team-a", "team-b"} {
		var out struct {
			ID int64 `json:"id"`
		}
		code, err := s.api.Do(http.MethodPost, "/api/v1/groups", map[string]any{"appname": g, "title": g}, &out)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, code)
		groupIDs[g] = out.ID
	}
	var tok struct {
		ID     int64  `json:"id"`
		Secret string `json:"secret"`
	}
	code, err := s.api.Do(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "portal", "role": "operator",
		"groups": []int64{groupIDs["team-a"]}}, &tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	require.NotEmpty(t, tok.Secret)

	add := func(group string) (int, map[string]any) {
		form := url.Values{"jobGroup": {strconv.FormatInt(groupIDs[group], 10)}, "jobDesc": {"portal job " + group},
			"author": {"portal"}, "scheduleType": {"CRON"}, "scheduleConf": {"0 0 3 * * ?"}, "glueType": {"GLUE_SHELL"},
			"glueSource": {"echo hi"}, "executorRouteStrategy": {"FIRST"}, "executorBlockStrategy": {"SERIAL_EXECUTION"},
			"misfireStrategy": {"DO_NOTHING"}}
		code, _, raw := send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodPost, path: "/jobinfo/add",
			contentType: "application/x-www-form-urlencoded", body: strings.NewReader(form.Encode()),
			header: http.Header{"Xxl-Job-Access-Token": {tok.Secret}}})
		var env map[string]any
		require.NoError(t, json.Unmarshal(raw, &env), "%s", raw)
		return code, env
	}
	code, env := add("team-a")
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 200, env["code"], "group A: %v", env)
	code, env = add("team-b")
	require.Equal(t, http.StatusForbidden, code, "group B: %v", env)
	require.EqualValues(t, 403, env["code"])

	// The secret is stored hashed: no database file holds it.
	files, err := filepath.Glob(filepath.Join(s.dataDir, "cronix.db*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.False(t, bytes.Contains(b, []byte(tok.Secret)), "%s holds the token's secret", f)
	}

	// Revoked: refused by the very next request.
	code, err = s.api.Do(http.MethodDelete, fmt.Sprintf("/api/v1/tokens/%d", tok.ID), nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	code, env = add("team-a")
	require.Equal(t, http.StatusUnauthorized, code, "a revoked token: %v", env)
	code, _, _ = send(t, http.DefaultClient, s.api.Base, rawCall{method: http.MethodGet, path: "/api/v1/jobs",
		header: http.Header{"Authorization": {"Bearer " + tok.Secret}}})
	require.Equal(t, http.StatusUnauthorized, code)
}

// TestAuditTrail (access issue, acceptance 8): creating, updating (with a
// diff), triggering and deleting a job, a failed login and a token creation
// are in the audit log with user, time and address; the log filters by
// object; secrets in a job's params never reach it.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	s := startStandalone(t, t.TempDir(), nil)
	started := time.Now().Add(-time.Second)

	job := map[string]any{"name": "audited", "schedule_type": "none", "handler": "shell", "description": "first",
		"params": map[string]any{"script": "echo $DB_PASSWORD", "env": map[string]string{"DB_PASSWORD": "hunter2-secret"}}}
	var created struct {
		ID int64 `json:"id"`
	}
	code, err := s.api.Do(http.MethodPost, "/api/v1/jobs", job, &created)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)
	id := strconv.FormatInt(created.ID, 10)
	job["description"] = "second"
	job["params"] = map[string]any{"script": "echo $DB_PASSWORD", "env": map[string]string{"DB_PASSWORD": "hunter3-secret"}}
	code, err = s.api.Do(http.MethodPut, "/api/v1/jobs/"+id, job, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	code, err = s.api.Do(http.MethodPost, "/api/v1/jobs/"+id+"/trigger", nil, nil)
	require.NoError(t, err)
	require.Less(t, code, 300)
	code, err = s.api.Do(http.MethodDelete, "/api/v1/jobs/"+id, nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)

	bad := harness.NewClient(s.api.Base)
	require.Error(t, bad.Login("admin", "not-the-password"))
	code, err = s.api.Do(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci", "role": "viewer", "groups": []int64{}}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)

	// Filtered by object: the job's whole life, newest first, nothing else.
	entries := auditOf(t, s.api, url.Values{"object_type": {"job"}, "object_id": {id}})
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
		require.Equal(t, "job", e.ObjectType)
		require.Equal(t, id, e.ObjectID)
		require.Equal(t, "admin", e.User)
		require.Equal(t, "127.0.0.1", e.Address)
		require.WithinRange(t, e.At, started, time.Now().Add(time.Second))
		require.NotContains(t, string(e.Diff), "hunter", "a secret reached the audit log: %s", e.Diff)
	}
	require.Equal(t, []string{"delete", "trigger", "update", "create"}, actions)
	var diff map[string]struct {
		From any `json:"from"`
		To   any `json:"to"`
	}
	require.NoError(t, json.Unmarshal(entries[2].Diff, &diff), "%s", entries[2].Diff)
	require.Equal(t, "first", diff["description"].From)
	require.Equal(t, "second", diff["description"].To)
	require.Contains(t, diff, "params", "the changed params are in the diff, redacted: %s", entries[2].Diff)
	require.Contains(t, string(entries[2].Diff), "[redacted]")
	require.NotContains(t, diff, "name", "an unchanged field is not in the diff")

	all := auditOf(t, s.api, url.Values{})
	var sawFailedLogin, sawToken bool
	for _, e := range all {
		require.NotContains(t, string(e.Diff), "hunter")
		switch {
		case e.Action == "login_failed" && e.User == "admin":
			sawFailedLogin = true
			require.Equal(t, "127.0.0.1", e.Address)
		case e.ObjectType == "token" && e.Action == "create":
			sawToken = true
			require.Equal(t, "admin", e.User)
			require.NotContains(t, string(e.Diff), "secret")
		}
	}
	require.True(t, sawFailedLogin, "failed login audited")
	require.True(t, sawToken, "token creation audited")
}

// TestUserPasswdOnAStoppedStandalone (access issue, acceptance 9): the
// admin password of a real standalone's data dir is reset with
// "cronix user passwd admin" while the standalone is stopped; after a restart
// the new password logs in and the old one does not.
func TestUserPasswdOnAStoppedStandalone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startStandalone(t, dir, nil)
	require.NoError(t, s.proc.Interrupt(30*time.Second))

	p, err := harness.Start(binary, []string{"CRONIX_USER_PASSWORD=break-glass-password"}, "user", "passwd", "--data-dir", dir, "admin")
	require.NoError(t, err)
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("cronix user passwd did not finish: %s", p.Output())
	}
	require.Contains(t, p.Output(), "password of admin set")

	p, err = harness.Start(binary, s.env, s.args...)
	require.NoError(t, err)
	t.Cleanup(p.KillGroup)
	require.NoError(t, s.api.WaitReady(60*time.Second))
	fresh := harness.NewClient(s.api.Base)
	require.Error(t, fresh.Login("admin", adminPassword), "the old password no longer works")
	require.NoError(t, fresh.Login("admin", "break-glass-password"))
}
