package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/store"
)

// KindForeignResult is the security event kind of a result a node reported
// for a fire that was not dispatched to it.
const KindForeignResult = "foreign_result"

// nodeSecurityKinds are the kinds of security event a node reports (see
// node/trust): the records it refused. foreign_result is the server's own.
var nodeSecurityKinds = []string{"unsigned_record", "bad_signature", "stale_term", "malformed_record"}

// maxSecurityEvents bounds one POST /internal/security-events batch.
const maxSecurityEvents = 1000

// securityStore is what the security routes need from the SQL record.
type securityStore interface {
	InsertSecurityEvents(ctx context.Context, node string, events []cluster.SecurityEvent) error
	ListSecurityEvents(ctx context.Context, p store.Page) ([]store.SecurityEvent, int, error)
	RunNodes(ctx context.Context, fireIDs []string) (map[string]string, error)
}

// SecurityEvent is one security event as the API shows it.
type SecurityEvent struct {
	ID int64 `json:"id"`
	// At is when the record (or result) was refused (TimeLayout, like every
	// instant of the API).
	At Time `json:"at"`
	// Node is the node that refused the record (or reported the result).
	Node string `json:"node"`
	// Kind: unsigned_record, bad_signature, stale_term, malformed_record, foreign_result.
	Kind string `json:"kind"`
	// Key is the refused record's etcd key, or the refused result's fire id.
	Key string `json:"key"`
	// Reason says why.
	Reason string `json:"reason"`
}

// securityRoutes registers the security event routes under v1.
func (s *server) securityRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/internal/security-events", s.body(MaxBodyBytes, s.node(s.postSecurityEvents))).Methods(http.MethodPost)
	r.Handle(v1+"/security/events", s.admin(MaxBodyBytes, s.listSecurityEvents)).Methods(http.MethodGet)
}

// postSecurityEvents handles POST /api/v1/internal/security-events: a
// node's batch of records it refused to act on.
func (s *server) postSecurityEvents(w http.ResponseWriter, r *http.Request) error {
	var batch cluster.SecurityEventBatch
	if err := decodeJSON(r, &batch, false); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	fields := map[string]string{}
	if batch.Node == "" {
		fields["node"] = "node is required"
	}
	if len(batch.Events) > maxSecurityEvents {
		fields["events"] = fmt.Sprintf("at most %d events per batch", maxSecurityEvents)
	}
	for i, e := range batch.Events {
		switch {
		case e.Kind == "":
			fields[fmt.Sprintf("events[%d].kind", i)] = "kind is required"
		case !slices.Contains(nodeSecurityKinds, e.Kind):
			fields[fmt.Sprintf("events[%d].kind", i)] = fmt.Sprintf("unknown kind %q (one of %s)", e.Kind,
				strings.Join(nodeSecurityKinds, ", "))
		}
		if e.At.IsZero() {
			batch.Events[i].At = s.now().UTC() // an event without one counts as refused now
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid security event batch", Fields: fields}
	}
	for _, e := range batch.Events {
		s.log.WarnContext(r.Context(), "security event reported by a node", "node", batch.Node, "kind", e.Kind,
			"key", e.Key, "reason", e.Reason)
	}
	if err := s.store.InsertSecurityEvents(r.Context(), batch.Node, batch.Events); err != nil {
		return fmt.Errorf("store %d security events of node %s: %w", len(batch.Events), batch.Node, err)
	}
	s.raiseSecurity(r.Context(), batch.Node, batch.Events)
	writeJSON(w, http.StatusOK, map[string]int{"accepted": len(batch.Events)})
	return nil
}

// listSecurityEvents handles GET /api/v1/security/events (admins only):
// newest first, paged.
func (s *server) listSecurityEvents(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	events, total, err := s.store.ListSecurityEvents(r.Context(), p)
	if err != nil {
		return fmt.Errorf("list security events: %w", err)
	}
	out := List[SecurityEvent]{Items: make([]SecurityEvent, 0, len(events)), Total: total, Page: p.Page,
		PageSize: p.PageSize}
	for _, e := range events {
		out.Items = append(out.Items, SecurityEvent{ID: e.ID, At: Time{e.At}, Node: e.Node, Kind: e.Kind, Key: e.Key,
			Reason: e.Reason})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// foreignResults splits a node's results into those for fires dispatched
// to the reporting node (kept) and the others (refused: no such run, or a
// run of another node), and records a security event for each refused one.
func (s *server) foreignResults(ctx context.Context, results []cluster.RunResult) ([]cluster.RunResult, error) {
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.FireID
	}
	nodes, err := s.store.RunNodes(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("check the nodes of %d results: %w", len(results), err)
	}
	kept := results[:0:0]
	refused := map[string][]cluster.SecurityEvent{}
	now := s.now().UTC()
	for _, res := range results {
		node, ok := nodes[res.FireID]
		if ok && node != "" && node == res.Node {
			kept = append(kept, res)
			continue
		}
		reason := fmt.Sprintf("result for fire %s refused: no run was dispatched for it", res.FireID)
		if ok {
			reason = fmt.Sprintf("result for fire %s refused: it was dispatched to node %q, not %q", res.FireID, node, res.Node)
		}
		s.log.WarnContext(ctx, "refused a result for a fire not dispatched to its node", "fire_id", res.FireID,
			"node", res.Node, "run_node", node)
		refused[res.Node] = append(refused[res.Node], cluster.SecurityEvent{At: now, Kind: KindForeignResult,
			Key: res.FireID, Reason: reason})
	}
	for node, evs := range refused {
		if err := s.store.InsertSecurityEvents(ctx, node, evs); err != nil {
			return nil, fmt.Errorf("store %d refused results as security events: %w", len(evs), err)
		}
		s.raiseSecurity(ctx, node, evs)
	}
	return kept, nil
}

// raiseSecurity raises one `security` alert per stored security event
// (deduplicated by node, key and time). A failure is logged: the events
// are stored already.
func (s *server) raiseSecurity(ctx context.Context, node string, events []cluster.SecurityEvent) {
	if s.security == nil {
		return
	}
	for _, e := range events {
		ev := alert.Event{Kind: alert.KindSecurity,
			Key:  fmt.Sprintf("security:%s:%s:%d", node, e.Key, e.At.UnixNano()),
			Node: node, OccurredAt: e.At,
			Message: fmt.Sprintf("node %s: %s: %s (%s)", node, e.Kind, e.Key, e.Reason)}
		if id, err := cluster.JobIDOfFire(cluster.LastSegment(e.Key)); err == nil && e.Kind == KindForeignResult {
			ev.FireID, ev.JobID = e.Key, id
		}
		if err := s.security.Raise(ctx, ev); err != nil {
			s.log.WarnContext(ctx, "raising a security alert", "node", node, "key", e.Key, "error", err)
		}
	}
}
