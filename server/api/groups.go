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
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// groupRoutes registers the groups CRUD: GET/POST /groups, GET/PUT/DELETE /groups/{id}.
func (s *server) groupRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/groups", s.user(MaxBodyBytes, s.listGroups)).Methods(http.MethodGet)
	r.Handle(v1+"/groups", s.user(MaxBodyBytes, s.createGroup)).Methods(http.MethodPost)
	r.Handle(v1+"/groups/{id:[0-9]+}", s.user(MaxBodyBytes, s.getGroup)).Methods(http.MethodGet)
	r.Handle(v1+"/groups/{id:[0-9]+}", s.user(MaxBodyBytes, s.updateGroup)).Methods(http.MethodPut)
	r.Handle(v1+"/groups/{id:[0-9]+}", s.user(MaxBodyBytes, s.deleteGroup)).Methods(http.MethodDelete)
}

// appNamePattern is xxl-job's appname rule: 4 to 64 of [a-zA-Z0-9_-].
var appNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{4,64}$`)

// appNameRule is appNamePattern in words.
const appNameRule = "appname must be 4 to 64 characters of a-z, A-Z, 0-9, _ and -"

// Group limits.
const (
	maxGroupTitleChars = 255
	maxGroupAddresses  = 100
)

// GroupRequest is the body of POST /api/v1/groups and PUT /api/v1/groups/{id}.
type GroupRequest struct {
	AppName string `json:"appname"`
	Title   string `json:"title"` // default: the appname
	// AddressType is "auto" (default: members are the live nodes of the
	// group) or "manual" (members are Addresses).
	AddressType string   `json:"address_type"`
	Addresses   []string `json:"addresses"` // node uuids, manual groups only
}

// Group is a group as the API shows it.
type Group struct {
	ID          int64    `json:"id"`
	AppName     string   `json:"appname"`
	Title       string   `json:"title"`
	AddressType string   `json:"address_type"`
	Addresses   []string `json:"addresses"`
	// Nodes are the live members: for auto, the registered nodes of the
	// group; for manual, the listed addresses that are registered.
	Nodes     []Node `json:"nodes"`
	CreatedAt Time   `json:"created_at"`
	UpdatedAt Time   `json:"updated_at"`
}

// groupFromRequest validates req and builds the group it describes.
// Problems come back as one *ValidationError. current is the appname of the
// group it changes ("" for a new group): keeping that appname is allowed
// even where it breaks the appname rule, as the group a node created by
// registering with its --group may ("web"), so that such a group's title
// and addresses can be edited.
func groupFromRequest(req GroupRequest, current string) (*store.Group, error) {
	fields := map[string]string{}
	g := &store.Group{
		AppName:     strings.TrimSpace(req.AppName),
		Title:       strings.TrimSpace(req.Title),
		AddressType: strings.TrimSpace(req.AddressType),
	}
	if !appNamePattern.MatchString(g.AppName) && (current == "" || g.AppName != current) {
		fields["appname"] = appNameRule
	}
	if g.Title == "" {
		g.Title = g.AppName
	}
	if utf8.RuneCountInString(g.Title) > maxGroupTitleChars {
		fields["title"] = fmt.Sprintf("title is longer than %d characters", maxGroupTitleChars)
	}
	switch g.AddressType {
	case "":
		g.AddressType = store.AddressAuto
	case store.AddressAuto, store.AddressManual:
	default:
		fields["address_type"] = fmt.Sprintf("unknown address type %q (one of auto, manual)", g.AddressType)
	}
	for _, a := range req.Addresses {
		a = strings.TrimSpace(a)
		if a == "" || strings.Contains(a, ",") || utf8.RuneCountInString(a) > maxNodeUUIDChars {
			fields["addresses"] = fmt.Sprintf("%q is not a node uuid", a)
			break
		}
		if !slices.Contains(g.Addresses, a) {
			g.Addresses = append(g.Addresses, a)
		}
	}
	if len(g.Addresses) > maxGroupAddresses {
		fields["addresses"] = fmt.Sprintf("at most %d addresses", maxGroupAddresses)
	}
	if g.AddressType == store.AddressManual && len(g.Addresses) == 0 && fields["addresses"] == "" {
		fields["addresses"] = "a manual group needs at least one address"
	}
	if g.AddressType == store.AddressAuto && len(g.Addresses) > 0 {
		fields["addresses"] = "addresses are only for address_type manual"
	}
	if len(fields) > 0 {
		return nil, &ValidationError{Message: "invalid group", Fields: fields}
	}
	return g, nil
}

// GroupMembers returns the live members of g among nodes: for auto, the
// nodes registered with its appname; for manual, the listed addresses that
// are registered, in list order.
func GroupMembers(g *store.Group, nodes []cluster.NodeInfo) []cluster.NodeInfo {
	var out []cluster.NodeInfo
	if g.AddressType == store.AddressManual {
		for _, a := range g.Addresses {
			for _, n := range nodes {
				if n.UUID == a {
					out = append(out, n)
				}
			}
		}
		return out
	}
	for _, n := range nodes {
		if n.Group == g.AppName {
			out = append(out, n)
		}
	}
	return out
}

func groupFromStore(g *store.Group, nodes []cluster.NodeInfo) Group {
	out := Group{
		ID:          g.ID,
		AppName:     g.AppName,
		Title:       g.Title,
		AddressType: g.AddressType,
		Addresses:   nonNil(g.Addresses),
		Nodes:       []Node{},
		CreatedAt:   Time{g.CreatedAt},
		UpdatedAt:   Time{g.UpdatedAt},
	}
	if out.AddressType == "" {
		out.AddressType = store.AddressAuto
	}
	for _, n := range GroupMembers(g, nodes) {
		out.Nodes = append(out.Nodes, nodeFromCluster(n))
	}
	return out
}

// decodeGroup reads and validates a GroupRequest body; current is the
// appname of the group it changes ("" for a new one).
func decodeGroup(r *http.Request, current string) (*store.Group, error) {
	var req GroupRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return nil, &ValidationError{Message: "request body is empty"}
		}
		return nil, err
	}
	return groupFromRequest(req, current)
}

// writeGroup writes g with its live members.
func (s *server) writeGroup(ctx context.Context, w http.ResponseWriter, status int, g *store.Group) error {
	nodes, err := s.liveNodes(ctx)
	if err != nil {
		return err
	}
	writeJSON(w, status, groupFromStore(g, nodes))
	return nil
}

// listGroups handles GET /api/v1/groups?appname= &title= (contains) and paging.
func (s *server) listGroups(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	ctx := r.Context()
	f := store.GroupFilter{AppName: strings.TrimSpace(q.Get("appname")), Title: strings.TrimSpace(q.Get("title")),
		Scope: PrincipalFrom(ctx).Scope()}
	groups, total, err := s.store.FindGroups(ctx, f, p)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	nodes, err := s.liveNodes(ctx)
	if err != nil {
		return err
	}
	out := List[Group]{Items: make([]Group, 0, len(groups)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range groups {
		out.Items = append(out.Items, groupFromStore(&groups[i], nodes))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// signalGroup tells the leader that group appName changed (created,
// updated or deleted): it puts the write time under the group's signal
// key, so the scheduler reloads the groups (manual address lists). The
// scheduler also relists groups periodically, which covers a lost signal.
func (s *server) signalGroup(ctx context.Context, appName string) error {
	if _, err := s.etcd.Put(ctx, s.keys.GroupSignal(appName), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("group %q saved but signalling the scheduler failed: %w", appName, err)
	}
	return nil
}

// createGroup handles POST /api/v1/groups.
func (s *server) createGroup(w http.ResponseWriter, r *http.Request) error {
	g, err := decodeGroup(r, "")
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := s.store.CreateGroup(ctx, g); err != nil {
		return public(err, "a group with appname %q exists", g.AppName)
	}
	setAudit(ctx, func(a *auditRecord) { a.objectID, a.diff = strconv.FormatInt(g.ID, 10), groupFromStore(g, nil) })
	if err := s.signalGroup(ctx, g.AppName); err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/groups/"+strconv.FormatInt(g.ID, 10))
	return s.writeGroup(ctx, w, http.StatusCreated, g)
}

// getGroup handles GET /api/v1/groups/{id}.
func (s *server) getGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "group")
	if err != nil {
		return err
	}
	g, err := s.store.GetGroup(r.Context(), id)
	if err != nil {
		return public(err, "group %d not found", id)
	}
	return s.writeGroup(r.Context(), w, http.StatusOK, g)
}

// updateGroup handles PUT /api/v1/groups/{id}: a full replace.
func (s *server) updateGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "group")
	if err != nil {
		return err
	}
	ctx := r.Context()
	old, err := s.store.GetGroup(ctx, id)
	if err != nil {
		return public(err, "group %d not found", id)
	}
	g, err := decodeGroup(r, old.AppName)
	if err != nil {
		return err
	}
	g.ID = id
	if err := s.store.UpdateGroup(ctx, g); err != nil {
		return s.groupChangeError(ctx, err, old, g)
	}
	setAudit(ctx, func(a *auditRecord) { a.diff = diffOf(groupFromStore(old, nil), groupFromStore(g, nil)) })
	if err := s.signalGroup(ctx, g.AppName); err != nil {
		return err
	}
	return s.writeGroup(ctx, w, http.StatusOK, g)
}

// deleteGroup handles DELETE /api/v1/groups/{id}; 409 while jobs use it.
func (s *server) deleteGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "group")
	if err != nil {
		return err
	}
	ctx := r.Context()
	old, err := s.store.GetGroup(ctx, id)
	if err != nil {
		return public(err, "group %d not found", id)
	}
	if err := s.store.DeleteGroup(ctx, id); err != nil {
		return s.groupChangeError(ctx, err, old, nil)
	}
	setAudit(ctx, func(a *auditRecord) { a.diff = groupFromStore(old, nil) })
	if err := s.signalGroup(ctx, old.AppName); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// groupChangeError says why the store refused to update group old (to
// next) or, with a nil next, to delete it: 404 when it is gone, 409 naming
// the conflict (the appname another group has, or the jobs that name the
// group by its appname).
func (s *server) groupChangeError(ctx context.Context, err error, old, next *store.Group) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return public(err, "group %d not found", old.ID)
	case !errors.Is(err, store.ErrConflict):
		return err
	}
	if next != nil && next.AppName != old.AppName {
		other, gerr := s.store.GroupByName(ctx, next.AppName)
		if gerr != nil && !errors.Is(gerr, store.ErrNotFound) {
			return errors.Join(err, gerr)
		}
		if other != nil && other.ID != old.ID {
			return public(err, "appname %q is taken by group %d", next.AppName, other.ID)
		}
	}
	_, jobs, jerr := s.store.FindJobs(ctx, store.JobFilter{Group: old.AppName}, store.Page{Page: 1, PageSize: 1})
	if jerr != nil {
		return errors.Join(err, jerr)
	}
	what := "deleted"
	if next != nil {
		what = "renamed"
	}
	if jobs > 0 {
		return public(err, "group %d (%s) has %d %s: it cannot be %s while jobs use it (move or delete them first)",
			old.ID, old.AppName, jobs, plural(jobs, "job", "jobs"), what)
	}
	return public(err, "group %d (%s) cannot be %s: it changed meanwhile, retry", old.ID, old.AppName, what)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
