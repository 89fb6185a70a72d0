package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// userStore is the part of the store the users, tokens and audit routes use.
type userStore interface {
	CountUsers(ctx context.Context) (int, error)
	CreateUser(ctx context.Context, u *store.User) error
	GetUser(ctx context.Context, id int64) (*store.User, error)
	ListUsers(ctx context.Context, p store.Page) ([]store.User, int, error)
	UpdateUser(ctx context.Context, id int64, ch store.UserChange) (before, after *store.User, err error)
	DeleteUser(ctx context.Context, id int64) (*store.User, error)
	ExistingGroups(ctx context.Context, ids []int64) ([]int64, error)
	DeleteSession(ctx context.Context, tokenHash string) error

	CreateAccessToken(ctx context.Context, t *store.AccessToken) error
	ListAccessTokens(ctx context.Context, userID int64, p store.Page) ([]store.AccessToken, int, error)
	GetAccessToken(ctx context.Context, id int64) (*store.AccessToken, error)
	DeleteAccessToken(ctx context.Context, id int64) error

	InsertAudit(ctx context.Context, e *store.AuditEntry) error
	FindAudit(ctx context.Context, f store.AuditFilter, p store.Page) ([]store.AuditEntry, int, error)
}

// MaxUsernameChars bounds user names.
const MaxUsernameChars = 64

var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// userRoutes registers the users API (admin only, see authz.Routes).
func (s *server) userRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/users", s.user(MaxBodyBytes, s.listUsers)).Methods(http.MethodGet)
	r.Handle(v1+"/users", s.user(MaxBodyBytes, s.createUser)).Methods(http.MethodPost)
	r.Handle(v1+"/users/{id:[0-9]+}", s.user(MaxBodyBytes, s.getUser)).Methods(http.MethodGet)
	r.Handle(v1+"/users/{id:[0-9]+}", s.user(MaxBodyBytes, s.patchUser)).Methods(http.MethodPatch)
	r.Handle(v1+"/users/{id:[0-9]+}", s.user(MaxBodyBytes, s.deleteUser)).Methods(http.MethodDelete)
	r.Handle(v1+"/users/{id:[0-9]+}/password", s.user(MaxBodyBytes, s.resetPassword)).Methods(http.MethodPost)
	r.Handle(v1+"/users/{id:[0-9]+}/groups", s.user(MaxBodyBytes, s.getUserGroups)).Methods(http.MethodGet)
	r.Handle(v1+"/users/{id:[0-9]+}/groups", s.user(MaxBodyBytes, s.putUserGroups)).Methods(http.MethodPut)
}

// validUsername returns what is wrong with a user name, or "".
func validUsername(name string) string {
	switch {
	case name == "":
		return "username is required"
	case len(name) > MaxUsernameChars:
		return fmt.Sprintf("username must be at most %d characters", MaxUsernameChars)
	case !usernamePattern.MatchString(name):
		return "username may hold letters, digits, '.', '_', '@' and '-', starting with a letter or digit"
	}
	return ""
}

// checkGroups records in fields["groups"] the ids that are not groups.
func (s *server) checkGroups(ctx context.Context, fields map[string]string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	got, err := s.store.ExistingGroups(ctx, ids)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range ids {
		if !slices.Contains(got, id) {
			missing = append(missing, strconv.FormatInt(id, 10))
		}
	}
	if len(missing) > 0 {
		fields["groups"] = "no group with id " + strings.Join(missing, ", ")
	}
	return nil
}

func decodeBody(r *http.Request, dst any) error {
	if err := decodeJSON(r, dst, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	return nil
}

// listUsers handles GET /api/v1/users.
func (s *server) listUsers(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	users, total, err := s.store.ListUsers(r.Context(), p)
	if err != nil {
		return err
	}
	out := List[User]{Items: make([]User, 0, len(users)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range users {
		out.Items = append(out.Items, userFromStore(&users[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createUser handles POST /api/v1/users.
func (s *server) createUser(w http.ResponseWriter, r *http.Request) error {
	var req UserCreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	req.Username = strings.TrimSpace(req.Username)
	fields := map[string]string{}
	if msg := validUsername(req.Username); msg != "" {
		fields["username"] = msg
	}
	if msg := auth.ValidatePassword(req.Username, req.Password); msg != "" {
		fields["password"] = msg
	}
	if !authz.ValidRole(req.Role) {
		fields["role"] = fmt.Sprintf("role must be one of %s", strings.Join(authz.Roles, ", "))
	}
	if err := s.checkGroups(ctx, fields, req.Groups); err != nil {
		return err
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid user", Fields: fields}
	}
	hash, err := auth.HashPassword(req.Password)
	if err != nil {
		return err
	}
	u := &store.User{Username: req.Username, PasswordHash: hash, Role: req.Role, Groups: req.Groups}
	if err := s.store.CreateUser(ctx, u); err != nil {
		return public(err, "a user named %q exists", req.Username)
	}
	out := userFromStore(u)
	setAudit(ctx, func(a *auditRecord) { a.objectID, a.diff = strconv.FormatInt(u.ID, 10), out })
	w.Header().Set("Location", "/api/v1/users/"+strconv.FormatInt(u.ID, 10))
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// getUser handles GET /api/v1/users/{id}.
func (s *server) getUser(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	u, err := s.store.GetUser(r.Context(), id)
	if err != nil {
		return public(err, "user %d not found", id)
	}
	writeJSON(w, http.StatusOK, userFromStore(u))
	return nil
}

// patchUser handles PATCH /api/v1/users/{id}: any of username, role,
// groups, disabled. Disabling a user ends its sessions at once.
func (s *server) patchUser(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	var req UserPatchRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	fields := map[string]string{}
	if req.Username != nil {
		*req.Username = strings.TrimSpace(*req.Username)
		if msg := validUsername(*req.Username); msg != "" {
			fields["username"] = msg
		}
	}
	if req.Role != nil && !authz.ValidRole(*req.Role) {
		fields["role"] = fmt.Sprintf("role must be one of %s", strings.Join(authz.Roles, ", "))
	}
	if req.Groups != nil {
		if err := s.checkGroups(ctx, fields, *req.Groups); err != nil {
			return err
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid user", Fields: fields}
	}
	return s.applyUserChange(ctx, w, id, store.UserChange{Username: req.Username, Role: req.Role,
		Disabled: req.Disabled, Groups: req.Groups})
}

// applyUserChange stores ch, audits the diff and answers the user.
func (s *server) applyUserChange(ctx context.Context, w http.ResponseWriter, id int64, ch store.UserChange) error {
	before, after, err := s.store.UpdateUser(ctx, id, ch)
	if errors.Is(err, store.ErrLastAdmin) {
		return public(err, "the last enabled admin cannot be demoted, disabled or deleted")
	}
	if err != nil {
		return public(err, "cannot update user %d (not found, or the name is taken)", id)
	}
	out := userFromStore(after)
	setAudit(ctx, func(a *auditRecord) { a.diff = diffOf(userFromStore(before), out) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteUser handles DELETE /api/v1/users/{id}.
func (s *server) deleteUser(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	u, err := s.store.DeleteUser(r.Context(), id)
	if errors.Is(err, store.ErrLastAdmin) {
		return public(err, "the last enabled admin cannot be demoted, disabled or deleted")
	}
	if err != nil {
		return public(err, "user %d not found", id)
	}
	setAudit(r.Context(), func(a *auditRecord) { a.diff = userFromStore(u) })
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// resetPassword handles POST /api/v1/users/{id}/password (admin reset):
// the user's sessions end.
func (s *server) resetPassword(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	var req PasswordResetRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	u, err := s.store.GetUser(ctx, id)
	if err != nil {
		return public(err, "user %d not found", id)
	}
	if msg := auth.ValidatePassword(u.Username, req.Password); msg != "" {
		return invalidField("password", msg)
	}
	if err := s.setPassword(ctx, id, req.Password); err != nil {
		return err
	}
	setAudit(ctx, func(a *auditRecord) { a.objectType = "user" })
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// getUserGroups handles GET /api/v1/users/{id}/groups.
func (s *server) getUserGroups(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	u, err := s.store.GetUser(r.Context(), id)
	if err != nil {
		return public(err, "user %d not found", id)
	}
	writeJSON(w, http.StatusOK, UserGroups{Groups: userFromStore(u).Groups})
	return nil
}

// putUserGroups handles PUT /api/v1/users/{id}/groups: replaces the grants.
func (s *server) putUserGroups(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "user")
	if err != nil {
		return err
	}
	var req UserGroups
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	fields := map[string]string{}
	if req.Groups == nil {
		fields["groups"] = "groups is required (an array of group ids)"
	} else if err := s.checkGroups(ctx, fields, req.Groups); err != nil {
		return err
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid groups", Fields: fields}
	}
	before, after, err := s.store.UpdateUser(ctx, id, store.UserChange{Groups: &req.Groups})
	if err != nil {
		return public(err, "user %d not found", id)
	}
	setAudit(ctx, func(a *auditRecord) {
		a.objectType, a.action = "user", "update"
		a.diff = diffOf(UserGroups{Groups: userFromStore(before).Groups}, UserGroups{Groups: userFromStore(after).Groups})
	})
	writeJSON(w, http.StatusOK, UserGroups{Groups: userFromStore(after).Groups})
	return nil
}
