package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// authorize is the one place requests are authorized: it looks up the
// matched route in authz.Routes, authenticates the caller the rule asks
// for, checks the role's action, the CSRF token of cookie sessions, and the
// {id} object against the caller's groups, then audits every successful
// state-changing call. A route without a rule is refused (500) and logged.
func (s *server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := mux.CurrentRoute(r)
		var tmpl string
		if route != nil {
			tmpl, _ = route.GetPathTemplate()
		}
		rule, ok := authz.Lookup(r.Method, tmpl)
		if !ok {
			s.log.ErrorContext(r.Context(), "route has no authorization rule", slog.String("route", authz.Key(r.Method, tmpl)))
			s.deny(w, r, &statusError{http.StatusInternalServerError, "route has no authorization rule"})
			return
		}
		switch rule.Action {
		case authz.Public:
			next.ServeHTTP(w, r)
			return
		case authz.Node:
			if !s.nodeAuthorized(r) {
				s.deny(w, r, errUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.deny(w, r, err)
			return
		}
		if err := checkCSRF(r, p); err != nil {
			s.deny(w, r, err)
			return
		}
		if !p.Allows(rule.Action) {
			s.deny(w, r, errForbidden)
			return
		}
		ctx := withPrincipal(r.Context(), p)
		if err := s.checkObject(ctx, rule.Object, mux.Vars(r)["id"]); err != nil {
			s.deny(w, r, err)
			return
		}
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		rec := defaultAudit(r, tmpl, rule)
		ctx = context.WithValue(ctx, auditKey{}, rec)
		sr := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(sr, r.WithContext(ctx))
		if sr.status >= http.StatusBadRequest || rec.skip {
			return
		}
		e := &store.AuditEntry{UserID: p.UserID, Username: p.Username, Address: clientAddress(r),
			Action: rec.action, ObjectType: rec.objectType, ObjectID: rec.objectID}
		if rec.diff != nil {
			b, err := redactJSON(rec.diff)
			if err == nil {
				e.Diff = b
			}
		}
		s.audit(context.WithoutCancel(r.Context()), e)
	})
}

// deny answers an authorization failure, in xxl-job's envelope on the compat API.
func (s *server) deny(w http.ResponseWriter, r *http.Request, err error) {
	if !isCompatPath(r.URL.Path) {
		s.writeError(w, r, err)
		return
	}
	var se *statusError
	if !errors.As(err, &se) {
		s.log.ErrorContext(r.Context(), "authorization failed", slog.String("path", r.URL.Path), slog.Any("error", err))
		se = &statusError{http.StatusInternalServerError, "internal error"}
	}
	writeJSON(w, se.status, map[string]any{"code": se.status, "msg": se.msg, "content": nil})
}

// checkObject answers 404 when the job, run or group named by the route's
// {id} lies outside the caller's groups. An id that does not exist passes:
// the handler answers its own 404.
func (s *server) checkObject(ctx context.Context, kind authz.Object, rawID string) error {
	p := PrincipalFrom(ctx)
	if kind == authz.NoObject || p.AllGroups() {
		return nil
	}
	id, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil {
		return nil //nolint:nilerr // no such object: the handler answers its own 404
	}
	switch kind {
	case authz.GroupObject:
		if !p.InGroup(id) {
			return public(store.ErrNotFound, "group %d not found", id)
		}
		return nil
	case authz.JobObject:
		j, err := s.store.GetJob(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if ok, err := s.groupVisible(ctx, j.Group); err != nil || !ok {
			return errors.Join(err, public(store.ErrNotFound, "job %d not found", id))
		}
		return nil
	case authz.RunObject:
		run, err := s.store.GetRun(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		j, err := s.store.GetJob(ctx, run.JobID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if j == nil {
			return public(store.ErrNotFound, "run %d not found", id)
		}
		if ok, err := s.groupVisible(ctx, j.Group); err != nil || !ok {
			return errors.Join(err, public(store.ErrNotFound, "run %d not found", id))
		}
		return nil
	}
	return fmt.Errorf("authorize: unknown object kind %q", kind)
}

// groupVisible reports whether the caller may see group appName.
func (s *server) groupVisible(ctx context.Context, appName string) (bool, error) {
	p := PrincipalFrom(ctx)
	if p == nil || p.AllGroups() {
		return true, nil
	}
	g, err := s.store.GroupByName(ctx, appName)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return p.InGroup(g.ID), nil
}

// visibleJob returns job id if the caller may see it, else ErrNotFound.
func (s *server) visibleJob(ctx context.Context, id int64) (*store.Job, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, public(err, "job %d not found", id)
	}
	ok, err := s.groupVisible(ctx, j.Group)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, public(store.ErrNotFound, "job %d not found", id)
	}
	return j, nil
}

// checkJobGroup refuses (403) saving a job into a group the caller has no grant for.
func (s *server) checkJobGroup(ctx context.Context, appName string) error {
	ok, err := s.groupVisible(ctx, appName)
	if err != nil {
		return err
	}
	if !ok {
		return &statusError{http.StatusForbidden, fmt.Sprintf("no permission for group %q", appName)}
	}
	return nil
}

// --- audit

type auditKey struct{}

// auditRecord is what the audit entry of the current request will say;
// handlers refine the defaults with setAudit.
type auditRecord struct {
	action     string
	objectType string
	objectID   string
	diff       any
	skip       bool
}

// setAudit lets a handler refine the audit entry of its request (no-op
// outside an audited request).
func setAudit(ctx context.Context, fn func(a *auditRecord)) {
	if a, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		fn(a)
	}
}

// SetAuditObject names the object the current request acts on, for front
// doors (server/compat) whose ids are not in the path.
func SetAuditObject(ctx context.Context, objectType, objectID string) {
	setAudit(ctx, func(a *auditRecord) { a.objectType, a.objectID = objectType, objectID })
}

// SkipAudit drops the audit entry of the current request, for front doors
// (server/compat) that answer a failure with HTTP 200: the call changed
// nothing. A no-op outside an audited request.
func SkipAudit(ctx context.Context) {
	setAudit(ctx, func(a *auditRecord) { a.skip = true })
}

// compatActions names the audit action of an xxl-job API path; a path
// without one (a list, even as POST) is a read and is not audited.
var compatActions = map[string]string{
	"add": "create", "update": "update", "remove": "delete", "start": "enable", "stop": "disable", "trigger": "trigger",
}

// defaultAudit derives the audit entry of a request from its route:
// object type from the first path segment after /api/v1 (singular),
// object id from {id} or {uuid}, and the action from the method (POST
// create, PUT/PATCH update, DELETE delete) or from a trailing verb
// ("/jobs/{id}/trigger" is "trigger").
func defaultAudit(r *http.Request, tmpl string, rule authz.Rule) *auditRecord {
	vars := mux.Vars(r)
	rec := &auditRecord{objectID: vars["id"]}
	if rec.objectID == "" {
		rec.objectID = vars["uuid"]
	}
	if isCompatPath(tmpl) {
		rec.objectType = "job"
		if strings.HasPrefix(tmpl, "/jobgroup/") {
			rec.objectType = "group"
		}
		rec.action = compatActions[tmpl[strings.LastIndexByte(tmpl, '/')+1:]]
		rec.skip = rec.action == ""
		return rec
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(tmpl, "/api/v1"), "/"), "/")
	rec.objectType = strings.TrimSuffix(segs[0], "s")
	if segs[0] == "auth" {
		rec.objectType = "session"
	}
	if rule.Object != authz.NoObject {
		rec.objectType = string(rule.Object)
	}
	switch r.Method {
	case http.MethodPut, http.MethodPatch:
		rec.action = "update"
	case http.MethodDelete:
		rec.action = "delete"
	default:
		rec.action = "create"
	}
	if last := segs[len(segs)-1]; len(segs) > 1 && !strings.HasPrefix(last, "{") {
		rec.action = last
	}
	return rec
}

// audit writes an audit entry; a failure is logged, never returned (the
// request it records has already been answered).
func (s *server) audit(ctx context.Context, e *store.AuditEntry) {
	if e.At.IsZero() {
		e.At = s.now()
	}
	if err := s.store.InsertAudit(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit entry not written", slog.String("action", e.Action), slog.Any("error", err))
	}
}

// diffOf is the audit diff of an edit: {"field": {"from": old, "to": new}}
// for every top-level JSON field that changed.
func diffOf(before, after any) map[string]any {
	b, a := jsonFields(before), jsonFields(after)
	out := map[string]any{}
	for k, av := range a {
		if bv, ok := b[k]; !ok || !reflect.DeepEqual(bv, av) {
			out[k] = map[string]any{"from": b[k], "to": av}
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			out[k] = map[string]any{"from": bv, "to": nil}
		}
	}
	return out
}

func jsonFields(v any) map[string]any {
	m := map[string]any{}
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}
