package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// SessionCookie is the name of the login session cookie.
const SessionCookie = "cronix_session"

// CSRFHeader carries the session's CSRF token on unsafe cookie-authenticated requests.
const CSRFHeader = "X-CSRF-Token"

// XXLTokenHeader is xxl-job's access token header, accepted on the compat API.
const XXLTokenHeader = "XXL-JOB-ACCESS-TOKEN"

type principalKey struct{}

func withPrincipal(ctx context.Context, p *authz.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns who is calling, as the authorization middleware
// found it, or nil on public and node routes.
func PrincipalFrom(ctx context.Context) *authz.Principal {
	p, _ := ctx.Value(principalKey{}).(*authz.Principal)
	return p
}

// userName is the name of the calling user, "" when none.
func userName(ctx context.Context) string {
	if p := PrincipalFrom(ctx); p != nil {
		return p.Username
	}
	return ""
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// isCompatPath reports whether p is served by the xxl-job-compatible API.
func isCompatPath(p string) bool {
	return strings.HasPrefix(p, "/jobinfo/") || strings.HasPrefix(p, "/jobgroup/")
}

// authenticate resolves the request's credentials to a principal: a bearer
// token (session or API token), the compat API's XXL-JOB-ACCESS-TOKEN, or
// the session cookie (then Principal.Cookie is set and CSRF applies).
func (s *server) authenticate(r *http.Request) (*authz.Principal, error) {
	secret, cookie := bearerToken(r), false
	if secret == "" && isCompatPath(r.URL.Path) {
		secret = strings.TrimSpace(r.Header.Get(XXLTokenHeader))
	}
	if secret == "" {
		if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
			secret, cookie = c.Value, true
		}
	}
	p, err := s.sessions.Resolve(r.Context(), secret, s.now())
	if errors.Is(err, auth.ErrInvalidToken) {
		return nil, errUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if cookie && p.Kind != authz.KindSession {
		return nil, errUnauthorized // an API token is never a cookie
	}
	p.Cookie = cookie
	return p, nil
}

// nodeAuthorized reports whether the request carries the node token.
func (s *server) nodeAuthorized(r *http.Request) bool {
	token := bearerToken(r)
	if s.nodeToken == "" || token == "" {
		return false
	}
	ok := subtle.ConstantTimeCompare([]byte(token), []byte(s.nodeToken)) == 1
	if s.prevToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.prevToken)) == 1 {
		ok = true
	}
	return ok
}

// checkCSRF requires the session's CSRF token on unsafe cookie-authenticated requests.
func checkCSRF(r *http.Request, p *authz.Principal) error {
	if !p.Cookie || safeMethod(r.Method) {
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(p.CSRFToken)) != 1 {
		return errCSRF
	}
	return nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// clientAddress is the request's peer IP (proxies' X-Forwarded-For is not trusted).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// setSessionCookie sets (or with maxAge < 0 clears) the session cookie.
func setSessionCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	c := &http.Cookie{Name: SessionCookie, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
	}
	http.SetCookie(w, c)
}

// errLoginNotJSON refuses a login whose body is not declared JSON: a
// cross-site HTML form can post text/plain or a url-encoded body without a
// CORS preflight, but not application/json, so requiring it stops a
// foreign page from logging the browser into an account of its choosing
// (login CSRF).
var errLoginNotJSON = &statusError{http.StatusUnsupportedMediaType,
	"login needs Content-Type: application/json and a JSON body {\"username\",\"password\"}"}

// login handles POST /api/v1/auth/login.
func (s *server) login(w http.ResponseWriter, r *http.Request) error {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return errLoginNotJSON
	}
	var req LoginRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	fields := map[string]string{}
	if req.Username == "" {
		fields["username"] = "username is required"
	}
	if req.Password == "" {
		fields["password"] = "password is required"
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid login", Fields: fields}
	}
	ctx := r.Context()
	addr := clientAddress(r)
	now := s.now()
	if wait := s.throttle.Check(req.Username, addr, now); wait > 0 {
		s.log.WarnContext(ctx, "login throttled", slog.String("username", req.Username),
			slog.String("address", addr), slog.Duration("retry_after", wait))
		s.audit(ctx, &store.AuditEntry{Username: req.Username, Address: addr, Action: "login_throttled",
			ObjectType: "session"})
		return &throttledError{retryAfter: wait}
	}
	res, err := s.sessions.Login(ctx, req.Username, req.Password, now)
	if errors.Is(err, auth.ErrInvalidCredentials) {
		s.throttle.Failure(req.Username, addr, now)
		s.log.WarnContext(ctx, "login failed", slog.String("username", req.Username), slog.String("address", addr))
		s.audit(ctx, &store.AuditEntry{Username: req.Username, Address: addr, Action: "login_failed",
			ObjectType: "session"})
		return errBadCredentials
	}
	if err != nil {
		return err
	}
	s.throttle.Success(req.Username)
	s.audit(ctx, &store.AuditEntry{UserID: res.User.ID, Username: res.User.Username, Address: addr, Action: "login",
		ObjectType: "user", ObjectID: strconv.FormatInt(res.User.ID, 10)})
	setSessionCookie(w, r, res.Token, res.ExpiresAt)
	writeJSON(w, http.StatusOK, LoginResponse{Token: res.Token, ExpiresAt: Time{res.ExpiresAt}, CSRFToken: res.CSRFToken,
		User: userFromStore(res.User)})
	return nil
}

// logout handles POST /api/v1/auth/logout: the session ends on every replica.
func (s *server) logout(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r.Context())
	if p.Kind == authz.KindSession {
		if err := s.store.DeleteSession(r.Context(), p.SessionHash); err != nil {
			return err
		}
	}
	setSessionCookie(w, r, "", time.Time{})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// me handles GET /api/v1/auth/me: who is calling, and for a cookie session
// its CSRF token.
func (s *server) me(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalFrom(r.Context())
	u, err := s.store.GetUser(r.Context(), p.UserID)
	if err != nil {
		return err
	}
	groups := p.Groups
	if groups == nil {
		groups = []int64{}
	}
	// The CSRF token goes back to cookie sessions only: a page reload loses
	// the browser's in-memory copy, and /auth/me restores it. A bearer caller
	// needs none (CSRF applies to cookies only), so none is echoed to it.
	csrf := ""
	if p.Cookie {
		csrf = p.CSRFToken
	}
	writeJSON(w, http.StatusOK, MeResponse{ID: u.ID, Username: u.Username, Role: p.Role, Groups: groups,
		Disabled: u.Disabled, CSRFToken: csrf})
	return nil
}

// errPasswordNeedsSession refuses a password change by an API token: a
// token (a script's credential, possibly stolen) must not be a way to
// guess or replace its owner's password.
var errPasswordNeedsSession = &statusError{http.StatusForbidden,
	"changing your password needs a login session (POST /api/v1/auth/login), not an API token"}

// changePassword handles POST /api/v1/auth/password: the caller's own
// password, given the old one. Every session of the user ends. Only a
// login session may; a wrong old password counts as a failed login of the
// user (throttled, logged and audited as login_failed, login_throttled).
func (s *server) changePassword(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := PrincipalFrom(ctx)
	if p.Kind != authz.KindSession {
		return errPasswordNeedsSession
	}
	var req PasswordChangeRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	u, err := s.store.GetUser(ctx, p.UserID)
	if err != nil {
		return err
	}
	fields := map[string]string{}
	if req.OldPassword == "" {
		fields["old_password"] = "old_password is required"
	} else if ok, err := s.checkOldPassword(ctx, r, u, req.OldPassword); err != nil {
		return err
	} else if !ok {
		fields["old_password"] = "old_password is wrong"
	}
	if msg := auth.ValidatePassword(u.Username, req.NewPassword); msg != "" {
		fields["new_password"] = msg
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid password change", Fields: fields}
	}
	if err := s.setPassword(ctx, u.ID, req.NewPassword); err != nil {
		return err
	}
	setAudit(ctx, func(a *auditRecord) { a.objectType, a.objectID = "user", strconv.FormatInt(u.ID, 10) })
	setSessionCookie(w, r, "", time.Time{})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkOldPassword checks a password change's old password through the
// login throttle of the user name and the client address: while it is
// throttled the password is not checked (429), a wrong one is a failed
// login of the user, a right one clears the user name's count.
func (s *server) checkOldPassword(ctx context.Context, r *http.Request, u *store.User, password string) (bool, error) {
	addr, now := clientAddress(r), s.now()
	userID := strconv.FormatInt(u.ID, 10)
	if wait := s.throttle.Check(u.Username, addr, now); wait > 0 {
		s.log.WarnContext(ctx, "password change throttled", slog.String("username", u.Username),
			slog.String("address", addr), slog.Duration("retry_after", wait))
		s.audit(ctx, &store.AuditEntry{UserID: u.ID, Username: u.Username, Address: addr, Action: "login_throttled",
			ObjectType: "user", ObjectID: userID})
		return false, &throttledError{retryAfter: wait, msg: "too many wrong passwords, retry later"}
	}
	if !auth.CheckPassword(u.PasswordHash, password) {
		s.throttle.Failure(u.Username, addr, now)
		s.log.WarnContext(ctx, "password change with a wrong old password", slog.String("username", u.Username),
			slog.String("address", addr))
		s.audit(ctx, &store.AuditEntry{UserID: u.ID, Username: u.Username, Address: addr, Action: "login_failed",
			ObjectType: "user", ObjectID: userID})
		return false, nil
	}
	s.throttle.Success(u.Username)
	return true, nil
}

// setPassword hashes and stores a new password; the store ends the user's sessions.
func (s *server) setPassword(ctx context.Context, id int64, password string) error {
	hash, err := auth.HashPassword(password)
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", id, err)
	}
	if _, _, err := s.store.UpdateUser(ctx, id, store.UserChange{PasswordHash: &hash}); err != nil {
		return public(err, "user %d not found", id)
	}
	return nil
}
