package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
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
	resp, err := b.srv.Client().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, raw
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
