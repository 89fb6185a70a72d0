package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/store"
)

// auditRoutes registers the audit log (admin only).
func (s *server) auditRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/audit", s.user(MaxBodyBytes, s.listAudit)).Methods(http.MethodGet)
}

// listAudit handles GET /api/v1/audit?user= &object_type= &object_id=
// &from= &to= (RFC 3339) and paging, newest first.
func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.AuditFilter{Username: strings.TrimSpace(q.Get("user")), ObjectType: strings.TrimSpace(q.Get("object_type")),
		ObjectID: strings.TrimSpace(q.Get("object_id"))}
	fields := map[string]string{}
	for _, k := range []string{"from", "to"} {
		v := strings.TrimSpace(q.Get(k))
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			fields[k] = k + " must be an RFC 3339 time"
			continue
		}
		if k == "from" {
			f.From = t
		} else {
			f.To = t
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid audit filter", Fields: fields}
	}
	entries, total, err := s.store.FindAudit(r.Context(), f, p)
	if err != nil {
		return err
	}
	out := List[AuditEntry]{Items: make([]AuditEntry, 0, len(entries)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for _, e := range entries {
		out.Items = append(out.Items, AuditEntry{ID: e.ID, At: Time{e.At}, User: e.Username, Address: e.Address,
			Action: e.Action, ObjectType: e.ObjectType, ObjectID: e.ObjectID, Diff: e.Diff})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
