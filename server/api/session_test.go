package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// cookieDo sends a request authenticated by the session cookie only (no
// Authorization header), as the web admin does, with an optional CSRF token.
func (b *bundle) cookieDo(method, path string, cookie *http.Cookie, csrf string, body any) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, rd)
	require.NoError(b.t, err)
	req.AddCookie(cookie)
	if csrf != "" {
		req.Header.Set(api.CSRFHeader, csrf)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return b.send(req)
}

// TestMeRestoresCSRFTokenForCookieSessions: a browser keeps the CSRF token in
// memory only, so after a reload GET /api/v1/auth/me must give it back to a
// cookie session — and the token it gives back must be the one that unsafe
// cookie requests need. Bearer callers (session or API token) get "".
func TestMeRestoresCSRFTokenForCookieSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Log in as the browser does and keep only the cookie.
	raw, err := json.Marshal(map[string]string{"username": "admin", "password": adminPassword})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/api/v1/auth/login", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	var login api.LoginResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&login))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, login.CSRFToken)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "login sets the %s cookie", api.SessionCookie)
	require.True(t, cookie.HttpOnly)

	// "Reload": only the cookie survives; /auth/me gives the CSRF token back.
	status, body := b.cookieDo(http.MethodGet, "/api/v1/auth/me", cookie, "", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var me api.MeResponse
	require.NoError(t, json.Unmarshal(body, &me))
	require.Equal(t, "admin", me.Username)
	require.Equal(t, "admin", me.Role)
	require.Equal(t, login.CSRFToken, me.CSRFToken, "the cookie session's CSRF token comes back from /auth/me")

	// The restored token is the one an unsafe cookie request needs.
	job := validJob()
	status, body = b.cookieDo(http.MethodPost, "/api/v1/jobs", cookie, "", job)
	require.Equal(t, http.StatusForbidden, status, "a cookie write without the CSRF token: %s", body)
	status, body = b.cookieDo(http.MethodPost, "/api/v1/jobs", cookie, "not-the-token", job)
	require.Equal(t, http.StatusForbidden, status, "a cookie write with a wrong CSRF token: %s", body)
	require.Equal(t, 0, b.jobTotal(), "a refused write changes nothing")
	status, body = b.cookieDo(http.MethodPost, "/api/v1/jobs", cookie, me.CSRFToken, job)
	require.Equal(t, http.StatusCreated, status, "a cookie write with the restored CSRF token: %s", body)
	require.Equal(t, 1, b.jobTotal())

	// A bearer session (the same token in Authorization) gets no CSRF token.
	var bearerMe api.MeResponse
	b.doJSON(http.MethodGet, "/api/v1/auth/me", login.Token, nil, http.StatusOK, &bearerMe)
	require.Equal(t, "admin", bearerMe.Username)
	require.Empty(t, bearerMe.CSRFToken, "no CSRF token for a bearer caller")

	// Nor does an API token.
	var tok api.TokenCreated
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, map[string]any{"name": "ci", "role": "viewer"}, http.StatusCreated, &tok)
	require.NotEmpty(t, tok.Secret)
	var tokenMe api.MeResponse
	b.doJSON(http.MethodGet, "/api/v1/auth/me", tok.Secret, nil, http.StatusOK, &tokenMe)
	require.Empty(t, tokenMe.CSRFToken)

	// After logout the cookie no longer restores anything.
	status, body = b.cookieDo(http.MethodPost, "/api/v1/auth/logout", cookie, me.CSRFToken, nil)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	status, _ = b.cookieDo(http.MethodGet, "/api/v1/auth/me", cookie, "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}

// TestPasswordChangeGoesThroughTheLoginThrottle: a wrong old_password of
// POST /api/v1/auth/password is a failed login of the user — counted by
// the login throttle (429 with Retry-After after 5, the password not even
// checked then), logged, and audited as login_failed / login_throttled —
// so a session cannot guess its user's password at full speed. An API
// token cannot change its owner's password at all (403), nor spend the
// user's free failures.
func TestPasswordChangeGoesThroughTheLoginThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var tok api.TokenCreated
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, map[string]any{"name": "script", "role": "admin", "groups": []int64{}},
		http.StatusCreated, &tok)
	for range 8 {
		e := b.errorOf(http.MethodPost, "/api/v1/auth/password", tok.Secret,
			map[string]string{"old_password": "guess", "new_password": "brand-new-password"}, http.StatusForbidden)
		require.Contains(t, e.Error, "needs a login session")
	}
	e := b.errorOf(http.MethodPost, "/api/v1/auth/password", tok.Secret,
		map[string]string{"old_password": adminPassword, "new_password": "brand-new-password"}, http.StatusForbidden)
	require.Contains(t, e.Error, "not an API token")

	change := func(old string) (int, http.Header, []byte) {
		raw, err := json.Marshal(map[string]string{"old_password": old, "new_password": "brand-new-password"})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/api/v1/auth/password", bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, body
	}
	for i := range 5 {
		status, _, body := change(fmt.Sprintf("guess-%d", i))
		require.Equal(t, http.StatusBadRequest, status, "%s", body)
		require.Contains(t, string(body), "old_password is wrong")
	}
	// The sixth try waits, whatever its password; so does a login.
	for _, old := range []string{"guess-5", adminPassword} {
		status, hdr, body := change(old)
		require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
		require.Equal(t, "1", hdr.Get("Retry-After"))
		require.Contains(t, string(body), "retry later")
	}
	b.errorOf(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": adminPassword},
		http.StatusTooManyRequests)

	entries, _, err := b.store.FindAudit(b.ctx, store.AuditFilter{Username: "admin"}, store.Page{Page: 1, PageSize: 50})
	require.NoError(t, err)
	refused := map[string]int{}
	for _, a := range entries {
		if a.Action == "login_failed" || a.Action == "login_throttled" {
			refused[a.Action+" "+a.ObjectType+" "+a.ObjectID]++
		}
	}
	require.Equal(t, map[string]int{"login_failed user 1": 5, "login_throttled user 1": 2, "login_throttled session ": 1},
		refused)
	require.Equal(t, 5, strings.Count(b.logs.String(), "password change with a wrong old password"))

	// Once the delay has passed the right password works, and clears the count.
	b.clock.Advance(2 * time.Second)
	status, _, body := change(adminPassword)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": "brand-new-password"},
		http.StatusOK, nil)
}

// TestLoginNeedsJSONContentType: a login must declare its JSON body
// (application/json, any parameters): a cross-site form can post
// text/plain, url-encoded or multipart bodies without a preflight, and
// must not log the browser in (login CSRF). Such a login gets 415, no
// cookie and no session.
func TestLoginNeedsJSONContentType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"username":"admin","password":"` + adminPassword + `"}`
	login := func(contentType, body string) (int, http.Header, []byte) {
		req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/api/v1/auth/login", strings.NewReader(body))
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := b.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, raw
	}
	logins := func() int {
		_, n, err := b.store.FindAudit(b.ctx, store.AuditFilter{Username: "admin", ObjectType: "user"}, store.Page{Page: 1, PageSize: 1})
		require.NoError(t, err)
		return n
	}
	before := logins()
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/jsonp", "not a media type;;"} {
		status, hdr, raw := login(ct, body)
		require.Equal(t, http.StatusUnsupportedMediaType, status, "%q: %s", ct, raw)
		require.Contains(t, string(raw), "Content-Type: application/json", ct)
		require.Empty(t, hdr.Values("Set-Cookie"), ct)
	}
	status, _, raw := login("application/x-www-form-urlencoded", "username=admin&password="+adminPassword)
	require.Equal(t, http.StatusUnsupportedMediaType, status, "%s", raw)
	require.Equal(t, before, logins(), "no session was opened")

	status, hdr, raw := login("application/json; charset=utf-8", body)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	require.NotEmpty(t, hdr.Values("Set-Cookie"))
	require.Equal(t, before+1, logins())
}
