package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/store"
)

type userKey struct{}

func withUser(ctx context.Context, u *store.User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the authenticated user of a request context, or nil.
func userFrom(ctx context.Context) *store.User {
	u, _ := ctx.Value(userKey{}).(*store.User)
	return u
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate resolves the request's bearer token to a user.
func (s *server) authenticate(r *http.Request) (*store.User, error) {
	u, err := auth.Authenticate(r.Context(), s.store, bearerToken(r), s.now())
	if errors.Is(err, auth.ErrInvalidToken) {
		return nil, errUnauthorized
	}
	return u, err
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

// login handles POST /api/v1/auth/login.
func (s *server) login(w http.ResponseWriter, r *http.Request) error {
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
	expires := s.now().Add(s.tokenTTL)
	token, err := auth.Login(r.Context(), s.store, req.Username, req.Password, expires)
	if errors.Is(err, auth.ErrInvalidCredentials) {
		return errBadCredentials
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, LoginResponse{Token: token, ExpiresAt: Time{expires}})
	return nil
}
