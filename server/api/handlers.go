package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/handlers"
)

// HandlerItem is one handler in GET /api/v1/handlers.
type HandlerItem struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Description  string          `json:"description"`
	ParamsSchema json.RawMessage `json:"params_schema"`
	// Nodes is how many live nodes offer the handler (of ?group= when
	// given; only nodes of groups the caller may see). 0: the handler is
	// known (built in, or published earlier) but no such node offers it now.
	Nodes int `json:"nodes"`
	// Groups are the groups of those nodes, sorted.
	Groups []string `json:"groups"`
}

// HandlerList is the body of GET /api/v1/handlers.
type HandlerList struct {
	Items []HandlerItem `json:"items"`
}

// handlerRoutes registers the handler catalogue.
func (s *server) handlerRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/handlers", s.user(MaxBodyBytes, s.listHandlers)).Methods(http.MethodGet)
}

// listHandlers handles GET /api/v1/handlers[?group=]: the handler catalog,
// the handlers jobs may name. Every handler a live node publishes (newest
// version's description and params schema), then the ones known from
// earlier (SQL) or built in that no live node offers now. A user limited to
// some groups sees the handlers offered by nodes of those groups and the
// built-in ones; an admin sees every one.
func (s *server) listHandlers(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	group := strings.TrimSpace(r.URL.Query().Get("group"))
	known, err := s.catalog.Handlers(ctx)
	if err != nil {
		return err
	}
	nodes, err := s.liveNodes(ctx)
	if err != nil {
		return err
	}
	visible := map[string]bool{} // group → the caller may see it
	nodeGroup := map[string]string{}
	for _, n := range nodes {
		if group != "" && n.Group != group {
			continue
		}
		if _, seen := visible[n.Group]; !seen {
			if visible[n.Group], err = s.groupVisible(ctx, n.Group); err != nil {
				return err
			}
		}
		if visible[n.Group] {
			nodeGroup[n.UUID] = n.Group
		}
	}
	all := PrincipalFrom(ctx).AllGroups()
	out := HandlerList{Items: make([]HandlerItem, 0, len(known))}
	for _, h := range known {
		item := HandlerItem{Name: h.Name, Version: h.Version, Description: h.Description, ParamsSchema: h.ParamsSchema,
			Groups: []string{}}
		if len(item.ParamsSchema) == 0 {
			item.ParamsSchema = json.RawMessage("{}")
		}
		for _, uuid := range h.Nodes {
			if g, ok := nodeGroup[uuid]; ok {
				item.Nodes++
				if !slices.Contains(item.Groups, g) {
					item.Groups = append(item.Groups, g)
				}
			}
		}
		if item.Nodes == 0 && !all && !s.catalog.Builtin(h.Name) {
			continue // offered only outside the caller's groups, or by no node now
		}
		slices.Sort(item.Groups)
		out.Items = append(out.Items, item)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// checkParamsSchema validates params against the params schema of handler
// as published by the live nodes of group offering it: against every
// distinct schema, since the job may run on any of them. It returns the
// message for fields["params"], or "" when the params match (or no node
// published a schema, e.g. an older node). An error means etcd could not
// be read.
func (s *server) checkParamsSchema(ctx context.Context, nodes []cluster.NodeInfo, group, handler string, params json.RawMessage) (string, error) {
	inGroup := map[string]bool{}
	for _, n := range nodes {
		if n.Group == group && n.HasHandler(handler) {
			inGroup[n.UUID] = true
		}
	}
	descs, err := handlers.Descriptions(ctx, s.etcd, s.keys, s.log)
	if err != nil {
		return "", err
	}
	checked := map[string]bool{}
	for _, d := range descs {
		if d.Name != handler || !inGroup[d.Node] || len(d.ParamsSchema) == 0 || checked[string(d.ParamsSchema)] {
			continue
		}
		checked[string(d.ParamsSchema)] = true
		if msg := s.paramsSchemaMessage(ctx, handler, d.Version, "node "+d.Node, d.ParamsSchema, params); msg != "" {
			return msg, nil
		}
	}
	return "", nil
}

// paramsSchemaMessage validates params against a handler's schema (from
// source, for the log) and returns the message for fields["params"], or ""
// when they match or the schema does not compile (logged: a broken schema
// must not block every save; the handler's own Validate still runs on the
// node).
func (s *server) paramsSchemaMessage(ctx context.Context, handler, version, source string, schema, params json.RawMessage) string {
	err := handlers.ValidateParams(schema, params)
	var pe *handlers.ParamsError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pe):
		msg := pe.Message
		if pe.Path != "" {
			msg = pe.Path + ": " + pe.Message
		}
		return fmt.Sprintf("params do not match the %s handler's schema (version %s): %s", handler, version, msg)
	default:
		s.log.WarnContext(ctx, "handler params schema does not compile; skipping schema validation",
			slog.String("handler", handler), slog.String("source", source), slog.Any("error", err))
		return ""
	}
}
