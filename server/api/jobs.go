package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// Job validation limits.
const (
	MaxJobNameChars     = 200
	MaxGroupChars       = 100
	MaxParamsBytes      = 64 << 10
	MaxTimeoutSeconds   = 86400
	DefaultGroup        = "default"
	DefaultPageSize     = 20
	MaxPageSize         = 500
	defaultScheduleType = schedule.TypeCron
)

// pathID parses the {id} route variable; a number too large for int64 is a
// job or run that cannot exist.
func pathID(r *http.Request, what string) (int64, error) {
	raw := mux.Vars(r)["id"]
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, public(store.ErrNotFound, "%s %s not found", what, raw)
	}
	return id, nil
}

// parsePage reads ?page= and ?page_size=.
func parsePage(r *http.Request) (store.Page, error) {
	p := store.Page{Page: 1, PageSize: DefaultPageSize}
	fields := map[string]string{}
	q := r.URL.Query()
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fields["page"] = "page must be an integer ≥ 1"
		}
		p.Page = n
	}
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			fields["page_size"] = fmt.Sprintf("page_size must be an integer from 1 to %d", MaxPageSize)
		}
		p.PageSize = n
	}
	if len(fields) > 0 {
		return p, &ValidationError{Message: "invalid paging", Fields: fields}
	}
	return p, nil
}

// jobFromRequest validates req and builds the job it describes. Validation
// problems come back as one *ValidationError listing every bad field; any
// other error (etcd unreachable) is internal. It reads etcd and writes nothing.
func (s *server) jobFromRequest(ctx context.Context, req JobRequest) (*store.Job, error) {
	fields := map[string]string{}
	j := &store.Job{
		Name:           strings.TrimSpace(req.Name),
		Group:          strings.TrimSpace(req.Group),
		ScheduleType:   strings.TrimSpace(req.ScheduleType),
		Schedule:       strings.TrimSpace(req.Schedule),
		Timezone:       strings.TrimSpace(req.Timezone),
		Handler:        strings.TrimSpace(req.Handler),
		TimeoutSeconds: req.TimeoutSeconds,
		Enabled:        req.Enabled == nil || *req.Enabled,
		Description:    req.Description,
		Author:         strings.TrimSpace(req.Author),
	}

	switch n := utf8.RuneCountInString(j.Name); {
	case n == 0:
		fields["name"] = "name is required"
	case n > MaxJobNameChars:
		fields["name"] = fmt.Sprintf("name is longer than %d characters", MaxJobNameChars)
	}

	if j.Group == "" {
		j.Group = DefaultGroup
	}
	if utf8.RuneCountInString(j.Group) > MaxGroupChars {
		fields["group"] = fmt.Sprintf("group is longer than %d characters", MaxGroupChars)
	}

	if j.ScheduleType == "" {
		j.ScheduleType = defaultScheduleType
	}
	tz := j.Timezone
	if tz != "" {
		if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
			fields["timezone"] = fmt.Sprintf("unknown time zone %q (use an IANA name such as Europe/Berlin or UTC)", tz)
			tz = "" // still check the schedule itself
		}
	}
	if _, err := schedule.Parse(j.ScheduleType, j.Schedule, tz, s.loc); err != nil {
		fields["schedule"] = err.Error()
	}

	switch {
	case len(req.Params) == 0 || string(bytes.TrimSpace(req.Params)) == "null":
		j.Params = json.RawMessage("{}")
	case bytes.TrimSpace(req.Params)[0] != '{':
		fields["params"] = "params must be a JSON object"
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Params); err != nil {
			fields["params"] = "params is not valid JSON"
		} else if buf.Len() > MaxParamsBytes {
			fields["params"] = fmt.Sprintf("params exceed %d KiB", MaxParamsBytes>>10)
		} else {
			j.Params = json.RawMessage(buf.Bytes())
		}
	}

	if j.TimeoutSeconds < 0 || j.TimeoutSeconds > MaxTimeoutSeconds {
		fields["timeout_seconds"] = fmt.Sprintf("timeout_seconds must be from 0 (no timeout) to %d", MaxTimeoutSeconds)
	}

	if j.Handler == "" {
		fields["handler"] = "handler is required"
	} else if _, bad := fields["group"]; !bad {
		nodes, err := s.liveNodes(ctx)
		if err != nil {
			return nil, err
		}
		if !anyOffers(nodes, j.Group, j.Handler) {
			fields["handler"] = fmt.Sprintf("no live node of group %q offers handler %q", j.Group, j.Handler)
		}
	}

	if len(fields) > 0 {
		return nil, &ValidationError{Message: "invalid job", Fields: fields}
	}
	return j, nil
}

// anyOffers reports whether a node of group offers handler.
func anyOffers(nodes []cluster.NodeInfo, group, handler string) bool {
	for _, n := range nodes {
		if n.Group == group && n.HasHandler(handler) {
			return true
		}
	}
	return false
}

// decodeJob reads and validates a JobRequest body.
func (s *server) decodeJob(r *http.Request) (*store.Job, error) {
	var req JobRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return nil, &ValidationError{Message: "request body is empty"}
		}
		return nil, err
	}
	return s.jobFromRequest(r.Context(), req)
}

// signalJob tells the leader that job j changed: it puts the job's revision
// under its signal key.
func (s *server) signalJob(ctx context.Context, j *store.Job) error {
	if _, err := s.etcd.Put(ctx, s.keys.JobSignal(j.ID), strconv.FormatInt(j.Revision, 10)); err != nil {
		return fmt.Errorf("job %d saved (revision %d) but signalling the scheduler failed: %w", j.ID, j.Revision, err)
	}
	return nil
}

// createJob handles POST /api/v1/jobs.
func (s *server) createJob(w http.ResponseWriter, r *http.Request) error {
	j, err := s.decodeJob(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.store.EnsureGroup(ctx, j.Group, j.Group); err != nil {
		return fmt.Errorf("ensure group %q: %w", j.Group, err)
	}
	if err := s.store.CreateJob(ctx, j); err != nil {
		return public(err, "cannot create job %q", j.Name)
	}
	if err := s.signalJob(ctx, j); err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/jobs/"+strconv.FormatInt(j.ID, 10))
	writeJSON(w, http.StatusCreated, jobFromStore(j))
	return nil
}

// getJob handles GET /api/v1/jobs/{id}.
func (s *server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	j, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		return public(err, "job %d not found", id)
	}
	writeJSON(w, http.StatusOK, jobFromStore(j))
	return nil
}

// updateJob handles PUT /api/v1/jobs/{id}: a full replace of the writable fields.
func (s *server) updateJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	j, err := s.decodeJob(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	old, err := s.store.GetJob(ctx, id)
	if err != nil {
		return public(err, "job %d not found", id)
	}
	if _, err := s.store.EnsureGroup(ctx, j.Group, j.Group); err != nil {
		return fmt.Errorf("ensure group %q: %w", j.Group, err)
	}
	j.ID = id
	j.CreatedAt = old.CreatedAt
	j.Revision = old.Revision
	if err := s.store.UpdateJob(ctx, j); err != nil {
		return public(err, "job %d not found", id)
	}
	if err := s.signalJob(ctx, j); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobFromStore(j))
	return nil
}

// deleteJob handles DELETE /api/v1/jobs/{id}.
func (s *server) deleteJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	ctx := r.Context()
	if err := s.store.DeleteJob(ctx, id); err != nil {
		return public(err, "job %d not found", id)
	}
	if _, err := s.etcd.Delete(ctx, s.keys.JobSignal(id)); err != nil {
		return fmt.Errorf("job %d deleted but removing its signal failed: %w", id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listJobs handles GET /api/v1/jobs.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	jobs, total, err := s.store.ListJobs(r.Context(), p)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	out := List[Job]{Items: make([]Job, 0, len(jobs)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range jobs {
		out.Items = append(out.Items, jobFromStore(&jobs[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// triggerJob handles POST /api/v1/jobs/{id}/trigger: a "run once now" request
// the leader picks up from etcd.
func (s *server) triggerJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	var req TriggerRequest
	if err := decodeJSON(r, &req, true); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	ctx := r.Context()
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return public(err, "job %d not found", id)
	}
	req.Node = strings.TrimSpace(req.Node)
	if req.Node != "" {
		nodes, err := s.liveNodes(ctx)
		if err != nil {
			return err
		}
		if err := checkTarget(nodes, req.Node, j); err != nil {
			return err
		}
	}
	once := cluster.OnceRequest{Node: req.Node, RequestedAt: s.now().UTC()}
	if u := userFrom(ctx); u != nil {
		once.RequestedBy = u.Username
	}
	b, err := json.Marshal(once)
	if err != nil {
		return fmt.Errorf("encode once request: %w", err)
	}
	if _, err := s.etcd.Put(ctx, s.keys.Once(id), string(b)); err != nil {
		return fmt.Errorf("put once request of job %d: %w", id, err)
	}
	writeJSON(w, http.StatusAccepted, StatusResponse{Status: "accepted"})
	return nil
}

// checkTarget verifies that node is live, in the job's group, and offers its handler.
func checkTarget(nodes []cluster.NodeInfo, node string, j *store.Job) error {
	for _, n := range nodes {
		if n.UUID != node {
			continue
		}
		switch {
		case n.Group != j.Group:
			return invalidField("node", fmt.Sprintf("node %q is in group %q, not the job's group %q", node, n.Group, j.Group))
		case !n.HasHandler(j.Handler):
			return invalidField("node", fmt.Sprintf("node %q does not offer handler %q", node, j.Handler))
		}
		return nil
	}
	return invalidField("node", fmt.Sprintf("no live node %q", node))
}
