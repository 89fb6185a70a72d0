package api

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// MaxTokenNameChars bounds API token names.
const MaxTokenNameChars = 100

// tokenRoutes registers the API tokens routes (every user: their own tokens;
// admins see and revoke everyone's).
func (s *server) tokenRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/tokens", s.user(MaxBodyBytes, s.listTokens)).Methods(http.MethodGet)
	r.Handle(v1+"/tokens", s.user(MaxBodyBytes, s.createToken)).Methods(http.MethodPost)
	r.Handle(v1+"/tokens/{id:[0-9]+}", s.user(MaxBodyBytes, s.deleteToken)).Methods(http.MethodDelete)
}

// errTokenNeedsSession refuses a token created by a token: it would
// outlive its creator's expiry and revocation (a stolen token could mint
// itself a permanent successor).
var errTokenNeedsSession = &statusError{http.StatusForbidden,
	"creating an API token needs a login session (POST /api/v1/auth/login), not an API token"}

// createToken handles POST /api/v1/tokens, for a login session only: role
// at most the caller's, groups a subset of the caller's. The secret is in
// this reply only.
func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := PrincipalFrom(ctx)
	if p.Kind != authz.KindSession {
		return errTokenNeedsSession
	}
	var req TokenRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	req.Name = strings.TrimSpace(req.Name)
	fields := map[string]string{}
	switch {
	case req.Name == "":
		fields["name"] = "name is required"
	case utf8.RuneCountInString(req.Name) > MaxTokenNameChars:
		fields["name"] = fmt.Sprintf("name must be at most %d characters", MaxTokenNameChars)
	}
	switch {
	case !authz.ValidRole(req.Role):
		fields["role"] = fmt.Sprintf("role must be one of %s", strings.Join(authz.Roles, ", "))
	case authz.Rank(req.Role) > authz.Rank(p.Role):
		fields["role"] = fmt.Sprintf("role must not exceed yours (%s)", p.Role)
	}
	// null or absent: no expiry. Any instant given, the zero one
	// (0001-01-01T00:00:00Z) included, must be in the future.
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.now()) {
		fields["expires_at"] = "expires_at must be in the future (omit it, or send null, for a token that never expires)"
	}
	if p.AllGroups() {
		if err := s.checkGroups(ctx, fields, req.Groups); err != nil {
			return err
		}
	} else {
		var outside []string
		for _, g := range req.Groups {
			if !slices.Contains(p.Groups, g) {
				outside = append(outside, strconv.FormatInt(g, 10))
			}
		}
		if len(outside) > 0 {
			fields["groups"] = "not among your groups: " + strings.Join(outside, ", ")
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid token", Fields: fields}
	}
	secret, hash := auth.NewAPIToken()
	t := &store.AccessToken{TokenHash: hash, UserID: p.UserID, Username: p.Username, Name: req.Name, Role: req.Role,
		Groups: req.Groups}
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC()
		t.ExpiresAt = &e
	}
	if err := s.store.CreateAccessToken(ctx, t); err != nil {
		return err
	}
	out := tokenFromStore(t)
	setAudit(ctx, func(a *auditRecord) { a.objectID, a.diff = strconv.FormatInt(t.ID, 10), out })
	w.Header().Set("Location", "/api/v1/tokens/"+strconv.FormatInt(t.ID, 10))
	writeJSON(w, http.StatusCreated, TokenCreated{Token: out, Secret: secret})
	return nil
}

// listTokens handles GET /api/v1/tokens: the caller's tokens (an admin's:
// everyone's), never their secrets.
func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	pg, err := parsePage(r)
	if err != nil {
		return err
	}
	p := PrincipalFrom(r.Context())
	owner := p.UserID
	if p.Role == store.RoleAdmin {
		owner = 0
	}
	tokens, total, err := s.store.ListAccessTokens(r.Context(), owner, pg)
	if err != nil {
		return err
	}
	out := List[Token]{Items: make([]Token, 0, len(tokens)), Total: total, Page: pg.Page, PageSize: pg.PageSize}
	for i := range tokens {
		out.Items = append(out.Items, tokenFromStore(&tokens[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteToken handles DELETE /api/v1/tokens/{id}: revokes one of the
// caller's tokens (an admin: anyone's); another user's token is a 404.
func (s *server) deleteToken(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "token")
	if err != nil {
		return err
	}
	ctx := r.Context()
	p := PrincipalFrom(ctx)
	t, err := s.store.GetAccessToken(ctx, id)
	if err != nil {
		return public(err, "token %d not found", id)
	}
	if t.UserID != p.UserID && p.Role != store.RoleAdmin {
		return public(store.ErrNotFound, "token %d not found", id)
	}
	if err := s.store.DeleteAccessToken(ctx, id); err != nil {
		return public(err, "token %d not found", id)
	}
	setAudit(ctx, func(a *auditRecord) { a.diff = tokenFromStore(t) })
	w.WriteHeader(http.StatusNoContent)
	return nil
}
