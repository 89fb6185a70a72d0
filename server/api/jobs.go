package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/catalog"
	"github.com/cronix/cronix/server/handlers"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// Job validation limits.
const (
	MaxJobNameChars   = 200
	MaxGroupChars     = 100
	MaxParamsBytes    = 64 << 10
	MaxTimeoutSeconds = 86400
	DefaultGroup      = "default"
	DefaultPageSize   = 20
	MaxPageSize       = 500
	// MaxPage bounds ?page= so the row offset cannot overflow; a page past
	// the last one is simply empty.
	MaxPage             = 1_000_000_000
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
		if err != nil || n < 1 || n > MaxPage {
			fields["page"] = fmt.Sprintf("page must be an integer from 1 to %d", MaxPage)
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

// jobFromRequest validates req as a new job (old nil) or the new content of
// job old, and builds the job it describes. Validation problems come back
// as one *ValidationError listing every bad field; any other error (etcd
// unreachable) is internal. It reads etcd and writes nothing.
func (s *server) jobFromRequest(ctx context.Context, req JobRequest, old *store.Job) (*store.Job, []string, error) {
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
	} else if err := s.checkNewGroup(ctx, j.Group, fields); err != nil {
		return nil, nil, err
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
	if sched, err := schedule.Parse(j.ScheduleType, j.Schedule, tz, s.loc); errors.Is(err, schedule.ErrUnknownType) {
		fields["schedule_type"] = err.Error()
	} else if err != nil {
		fields["schedule"] = err.Error()
	} else if err := schedule.CheckFuture(sched, s.now()); err != nil {
		fields["schedule"] = err.Error()
	} else if j.ScheduleType == schedule.TypeNone && j.Schedule != "" {
		if old != nil && old.ScheduleType == schedule.TypeNone && old.Schedule == j.Schedule {
			// A none job stored with a schedule before one was refused,
			// sent back as read (GET then PUT, /jobinfo/start): not new
			// input, so it is dropped rather than refused.
			j.Schedule = ""
		} else {
			fields["schedule"] = "schedule must be empty for schedule_type none (a none job fires only when triggered or as a child job)"
		}
	}
	checkNUL(fields, map[string]string{"name": req.Name, "group": req.Group, "schedule_type": req.ScheduleType,
		"schedule": req.Schedule, "timezone": req.Timezone, "handler": req.Handler, "description": req.Description,
		"author": req.Author, "node_uuid": req.NodeUUID, "route_strategy": req.RouteStrategy,
		"block_strategy": req.BlockStrategy, "misfire_policy": req.MisfirePolicy})
	for _, e := range req.AlarmEmails {
		checkNUL(fields, map[string]string{"alarm_emails": e})
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

	if err := s.validateJobModel(ctx, req, j, fields); err != nil {
		return nil, nil, err
	}

	var warnings []string
	if j.Handler == "" {
		fields["handler"] = "handler is required"
	} else if _, bad := fields["group"]; !bad {
		nodes, err := s.validationNodes(ctx)
		if err != nil {
			return nil, nil, err
		}
		if anyOffers(nodes, j.Group, j.Handler) {
			if _, bad := fields["params"]; !bad {
				// The handler's schema, then, when every other field is
				// valid, the plugin's own Validate on one node
				// (pluginvalidate.go).
				msg, err := s.paramsVerdict(ctx, nodes, j, len(fields) == 0)
				if err != nil {
					return nil, nil, err
				}
				if msg != "" {
					fields["params"] = msg
				}
			}
		} else {
			// No live node of the group offers it now: the catalog decides.
			w, err := s.checkCatalog(ctx, j, fields)
			if err != nil {
				return nil, nil, err
			}
			warnings = append(warnings, w...)
		}
	}

	if len(fields) > 0 {
		return nil, nil, &ValidationError{Message: "invalid job", Fields: fields}
	}
	return j, warnings, nil
}

// checkNewGroup records under fields["group"] a group name that would
// create a group (no group has it, no live node registers it, and the
// caller may create groups) but breaks the appname rule of POST
// /api/v1/groups, under which such a group could not be edited afterwards.
// An existing group keeps working whatever its name (older ones, or one a
// node registered: its group is created as the node is seen, so a live
// node's group counts as existing). A caller restricted to its groups is
// not told here: saving into a group it has no grant for is its 403, the
// same for a group that exists and one that does not.
func (s *server) checkNewGroup(ctx context.Context, name string, fields map[string]string) error {
	if appNamePattern.MatchString(name) || strings.ContainsRune(name, 0) {
		return nil // a NUL is checkNUL's, and no database can look it up
	}
	if p := PrincipalFrom(ctx); p != nil && !p.AllGroups() {
		return nil
	}
	_, err := s.store.GroupByName(ctx, name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read group %q: %w", name, err)
	}
	nodes, err := s.validationNodes(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(nodes, func(n cluster.NodeInfo) bool { return n.Group == name }) {
		return nil
	}
	fields["group"] = fmt.Sprintf("group %q does not exist, and a new group's %s", name, appNameRule)
	return nil
}

// checkCatalog validates job j, whose handler no live node of its group
// offers now, against the handler catalog: an unknown handler is a field
// error listing the known ones; a known one is checked against its
// catalog params schema and gives a warning that the job waits for a node.
func (s *server) checkCatalog(ctx context.Context, j *store.Job, fields map[string]string) ([]string, error) {
	known, err := s.catalog.Handlers(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(known, func(h handlers.Handler) bool { return h.Name == j.Handler })
	if i < 0 {
		names := "none yet"
		if len(known) > 0 {
			names = strings.Join(catalog.Names(known), ", ")
		}
		fields["handler"] = fmt.Sprintf("unknown handler %q: no node has ever offered it (known: %s)", j.Handler, names)
		return nil, nil
	}
	h := known[i]
	if _, bad := fields["params"]; !bad && len(h.ParamsSchema) > 0 {
		if msg := s.paramsSchemaMessage(ctx, h.Name, h.Version, "catalog", h.ParamsSchema, j.Params); msg != "" {
			fields["params"] = msg
		}
	}
	return []string{fmt.Sprintf("no live node of group %q offers handler %q now: the job is saved and fires once one does",
		j.Group, j.Handler)}, nil
}

// checkNUL records every field whose value holds a NUL character: no
// database stores one in text, and no name or schedule needs it. It
// overrides any other message about the field.
func checkNUL(fields, values map[string]string) {
	for f, v := range values {
		if strings.ContainsRune(v, 0) {
			fields[f] = f + " must not contain a NUL character (\\u0000)"
		}
	}
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

// decodeJob reads a JobRequest body.
func decodeJob(r *http.Request) (JobRequest, error) {
	var req JobRequest
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return req, &ValidationError{Message: "request body is empty"}
		}
		return req, err
	}
	return req, nil
}

// validJob validates req as a new job (old nil) or the new content of the
// stored job old: every field (jobFromRequest) and the child jobs
// (checkChildren), one *ValidationError listing every bad field.
func (s *server) validJob(ctx context.Context, old *store.Job, req JobRequest) (*store.Job, []string, error) {
	j, warnings, err := s.jobFromRequest(ctx, req, old)
	var ve *ValidationError
	if err != nil && !errors.As(err, &ve) {
		return nil, nil, err
	}
	var id int64
	var kept []int64
	if old != nil {
		id, kept = old.ID, old.ChildJobIDs
	}
	msg, cerr := s.checkChildren(ctx, id, kept, req.ChildJobIDs)
	if cerr != nil {
		return nil, nil, cerr
	}
	if msg != "" {
		if ve == nil {
			ve = &ValidationError{Message: "invalid job", Fields: map[string]string{}}
		}
		if ve.Fields == nil {
			ve.Fields = map[string]string{}
		}
		ve.Fields["child_job_ids"] = msg
	}
	if ve != nil {
		return nil, nil, ve
	}
	return j, warnings, nil
}

// signalJob tells the leader that job j changed: it puts the job's revision
// under its signal key.
func (s *server) signalJob(ctx context.Context, j *store.Job) error {
	return s.signalJobs(ctx, []*store.Job{j})
}

// createJob handles POST /api/v1/jobs.
func (s *server) createJob(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeJob(r)
	if err != nil {
		return err
	}
	j, warnings, err := s.saveNewJob(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/jobs/"+strconv.FormatInt(j.ID, 10))
	writeJSON(w, http.StatusCreated, SavedJob{Job: jobFromStore(j), Warnings: warnings})
	return nil
}

// saveNewJob validates req, stores the job (and its group, when new, in the
// same transaction) and signals the leader. The warnings are about a valid
// job that cannot fire yet.
func (s *server) saveNewJob(ctx context.Context, req JobRequest) (*store.Job, []string, error) {
	j, warnings, err := s.validJob(ctx, nil, req)
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkJobGroup(ctx, j.Group); err != nil {
		return nil, nil, err
	}
	if err := s.storeNewJob(ctx, j); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, public(err, "a job named %q already exists in group %q", j.Name, j.Group)
		}
		return nil, nil, public(err, "cannot create job %q", j.Name)
	}
	setAudit(ctx, func(a *auditRecord) {
		a.objectType, a.objectID, a.diff = "job", strconv.FormatInt(j.ID, 10), jobFromStore(j)
	})
	if err := s.signalJob(ctx, j); err != nil {
		return nil, nil, err
	}
	return j, warnings, nil
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
	req, err := decodeJob(r)
	if err != nil {
		return err
	}
	j, warnings, err := s.saveJob(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SavedJob{Job: jobFromStore(j), Warnings: warnings})
	return nil
}

// saveJob validates req as the new content of job id, stores it (and its
// group, when new, in the same transaction) and signals the leader.
func (s *server) saveJob(ctx context.Context, id int64, req JobRequest) (*store.Job, []string, error) {
	old, err := s.visibleJob(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	j, warnings, err := s.validJob(ctx, old, req)
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkJobGroup(ctx, j.Group); err != nil {
		return nil, nil, err
	}
	j.ID = id
	j.CreatedAt = old.CreatedAt
	j.Revision = old.Revision
	if err := s.storeJobUpdate(ctx, j); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, public(err, "a job named %q already exists in group %q", j.Name, j.Group)
		}
		return nil, nil, public(err, "job %d not found", id)
	}
	setAudit(ctx, func(a *auditRecord) {
		a.objectType, a.objectID, a.diff = "job", strconv.FormatInt(id, 10), diffOf(jobFromStore(old), jobFromStore(j))
	})
	if err := s.signalJob(ctx, j); err != nil {
		return nil, nil, err
	}
	return j, warnings, nil
}

// deleteJob handles DELETE /api/v1/jobs/{id}.
func (s *server) deleteJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	if err := s.removeJob(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeJob deletes job id and its signal key.
func (s *server) removeJob(ctx context.Context, id int64) error {
	old, err := s.visibleJob(ctx, id)
	if err != nil {
		return err
	}
	if err := s.store.DeleteJob(ctx, id); err != nil {
		return public(err, "job %d not found", id)
	}
	setAudit(ctx, func(a *auditRecord) {
		a.objectType, a.objectID, a.diff = "job", strconv.FormatInt(id, 10), jobFromStore(old)
	})
	if _, err := s.etcd.Delete(ctx, s.keys.JobSignal(id)); err != nil {
		return fmt.Errorf("job %d deleted but removing its signal failed: %w", id, err)
	}
	return nil
}

// lastStatuses are the values of GET /api/v1/jobs?last_status=: a run
// status, or "none" for jobs that never ran.
var lastStatuses = []string{cluster.StatusTriggered, cluster.StatusRunning, cluster.StatusSuccess, cluster.StatusFailed,
	cluster.StatusTimeout, cluster.StatusKilled, cluster.StatusLost, cluster.StatusSkipped, store.LastStatusNone}

// listJobs handles GET /api/v1/jobs: ?group= &enabled= &handler= &author=
// &q= (name or description contains, case-insensitive) &schedule_type= &last_status= (the
// status of the job's latest run, or none) &sort= (id, -id, name, -name,
// updated_at, -updated_at) and paging.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.JobFilter{
		Scope:   PrincipalFrom(r.Context()).Scope(),
		Group:   strings.TrimSpace(q.Get("group")),
		Handler: strings.TrimSpace(q.Get("handler")),
		Author:  strings.TrimSpace(q.Get("author")),
		Search:  strings.TrimSpace(q.Get("q")),
		Sort:    strings.TrimSpace(q.Get("sort")),

		ScheduleType: strings.TrimSpace(q.Get("schedule_type")),
		LastStatus:   strings.TrimSpace(q.Get("last_status")),
	}
	fields := map[string]string{}
	if f.ScheduleType != "" && !slices.Contains(schedule.Types, f.ScheduleType) {
		fields["schedule_type"] = fmt.Sprintf("unknown schedule type %q (one of %s)", f.ScheduleType,
			strings.Join(schedule.Types, ", "))
	}
	if f.LastStatus != "" && !slices.Contains(lastStatuses, f.LastStatus) {
		fields["last_status"] = fmt.Sprintf("unknown last status %q (one of %s)", f.LastStatus,
			strings.Join(lastStatuses, ", "))
	}
	if v := q.Get("enabled"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fields["enabled"] = "enabled must be true or false"
		}
		f.Enabled = &b
	}
	if f.Sort != "" && !slices.Contains(store.JobSorts, f.Sort) {
		fields["sort"] = fmt.Sprintf("unknown sort %q (one of %s)", f.Sort, strings.Join(store.JobSorts, ", "))
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid job filter", Fields: fields}
	}
	jobs, total, err := s.store.FindJobs(r.Context(), f, p)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	items, err := s.jobListItems(r.Context(), jobs)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	writeJSON(w, http.StatusOK, List[JobListItem]{Items: items, Total: total, Page: p.Page, PageSize: p.PageSize})
	return nil
}

// triggerJob handles POST /api/v1/jobs/{id}/trigger: a "run once now" request
// the leader picks up from etcd. The reply carries the fire id the leader
// will use and, when the leader records the run within the server's
// TriggerRunWait, its run id.
func (s *server) triggerJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	var req TriggerRequest
	if err := decodeJSON(r, &req, true); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	res, err := s.trigger(r.Context(), id, req, userName(r.Context()))
	if err != nil {
		return err
	}
	// The audit entry says which fire the request made, and what it ran
	// with when that was not the job's own params or routing (the override
	// is otherwise recorded nowhere but in the run's output). Secrets in it
	// are redacted like a job's.
	setAudit(r.Context(), func(a *auditRecord) {
		a.diff = triggerAudit{FireID: res.FireID, Node: strings.TrimSpace(req.Node), Params: req.Params}
	})
	res.RunID = s.waitRun(r.Context(), res.FireID)
	writeJSON(w, http.StatusAccepted, res)
	return nil
}

// triggerAudit is the diff of a trigger's audit entry.
type triggerAudit struct {
	FireID string          `json:"fire_id"`
	Node   string          `json:"node,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// trigger validates a run-once-now request of job id and puts its once key.
func (s *server) trigger(ctx context.Context, id int64, req TriggerRequest, requestedBy string) (TriggerResponse, error) {
	j, err := s.visibleJob(ctx, id)
	if err != nil {
		return TriggerResponse{}, err
	}
	req.Node = strings.TrimSpace(req.Node)
	var nodes []cluster.NodeInfo
	if req.Node != "" || len(req.Params) > 0 {
		if nodes, err = s.liveNodes(ctx); err != nil {
			return TriggerResponse{}, err
		}
	}
	if req.Node != "" {
		if err := checkTarget(nodes, req.Node, j); err != nil {
			return TriggerResponse{}, err
		}
	}
	params, err := s.triggerParams(ctx, nodes, j, req.Params)
	if err != nil {
		return TriggerResponse{}, err
	}
	once := cluster.OnceRequest{Node: req.Node, RequestedAt: s.now().UTC(), Params: params, RequestedBy: requestedBy}
	rev, err := s.putOnce(ctx, id, once)
	if err != nil {
		return TriggerResponse{}, err
	}
	return TriggerResponse{Status: "accepted", FireID: cluster.ManualFireID(id, rev)}, nil
}

// triggerRunPoll is how often waitRun looks for the run of a fire.
const triggerRunPoll = 20 * time.Millisecond

// waitRun returns the id of the run the leader records for fireID, waiting
// at most s.triggerWait; nil when there is none by then (no wait
// configured, no leader yet, or a broadcast fire whose runs have shard
// suffixes).
func (s *server) waitRun(ctx context.Context, fireID string) *int64 {
	if s.triggerWait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.triggerWait)
	defer cancel()
	t := time.NewTicker(triggerRunPoll)
	defer t.Stop()
	for {
		run, err := s.store.RunByFireID(ctx, fireID)
		if err == nil {
			return &run.ID
		}
		if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			s.log.WarnContext(ctx, "looking up a triggered run", slog.String("fire_id", fireID), slog.Any("error", err))
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// triggerParams checks a trigger's params override like a job's params: a
// JSON object of at most MaxParamsBytes matching the handler's schema. It
// returns the compacted params, or nil when there is no override.
func (s *server) triggerParams(ctx context.Context, nodes []cluster.NodeInfo, j *store.Job, raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	invalid := func(msg string) error {
		return &ValidationError{Message: "invalid trigger", Fields: map[string]string{"params": msg}}
	}
	if trimmed[0] != '{' {
		return nil, invalid("params must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, invalid("params is not valid JSON")
	}
	if buf.Len() > MaxParamsBytes {
		return nil, invalid(fmt.Sprintf("params exceed %d KiB", MaxParamsBytes>>10))
	}
	msg, err := s.checkParamsSchema(ctx, nodes, j.Group, j.Handler, buf.Bytes())
	if err != nil {
		return nil, err
	}
	if msg != "" {
		return nil, invalid(msg)
	}
	return buf.Bytes(), nil
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

// putOnce asks the leader to fire job id once: it puts the once key and
// returns its mod revision (the leader's fire id is cluster.ManualFireID
// of it).
func (s *server) putOnce(ctx context.Context, id int64, once cluster.OnceRequest) (int64, error) {
	b, err := json.Marshal(once)
	if err != nil {
		return 0, fmt.Errorf("encode once request: %w", err)
	}
	resp, err := s.etcd.Put(ctx, s.keys.Once(id), string(b))
	if err != nil {
		return 0, fmt.Errorf("put once request of job %d: %w", id, err)
	}
	return resp.Header.Revision, nil
}

// Defaults and limits of the job model fields.
const (
	DefaultRouteStrategy     = cluster.RouteFirst
	DefaultBlockStrategy     = cluster.BlockSerial
	DefaultMisfirePolicy     = cluster.MisfireFireOnceNow
	DefaultMisfireMaxCatchUp = 100
	MaxMisfireMaxCatchUp     = 10000
	MaxRetryCount            = 10
	MaxRetryIntervalSeconds  = 86400
	MaxAlarmEmails           = 20
	MaxChildJobs             = 50
	maxNodeUUIDChars         = 128
	maxAuthorChars           = 100
)

// RouteStrategies, BlockStrategies and MisfirePolicies list the values the
// API accepts (seed 001's names).
var (
	RouteStrategies = []string{
		cluster.RouteFirst, cluster.RouteLast, cluster.RouteRound, cluster.RouteRandom,
		cluster.RouteConsistentHash, cluster.RouteLeastFrequentlyUse, cluster.RouteLeastRecentlyUsed,
		cluster.RouteFailover, cluster.RouteBusyover, cluster.RouteShardingBroadcast,
	}
	BlockStrategies = []string{cluster.BlockSerial, cluster.BlockDiscardLater, cluster.BlockCoverEarly}
	MisfirePolicies = []string{cluster.MisfireDoNothing, cluster.MisfireFireOnceNow, cluster.MisfireCatchUp}
)

// enumField sets *dst to v (trimmed, or def when blank) if it is one of
// allowed, else records the problem under field.
func enumField(fields map[string]string, field, v, def string, allowed []string, dst *string) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = def
	}
	if !slices.Contains(allowed, v) {
		fields[field] = fmt.Sprintf("unknown %s %q (one of %s)", strings.ReplaceAll(field, "_", " "), v, strings.Join(allowed, ", "))
		return
	}
	*dst = v
}

// validateJobModel checks and copies the routing, blocking, misfire, retry,
// alarm and pin fields of req into j, recording problems in fields. It
// reads etcd only for a node pin; other errors are internal.
func (s *server) validateJobModel(ctx context.Context, req JobRequest, j *store.Job, fields map[string]string) error {
	enumField(fields, "route_strategy", req.RouteStrategy, DefaultRouteStrategy, RouteStrategies, &j.RouteStrategy)
	enumField(fields, "block_strategy", req.BlockStrategy, DefaultBlockStrategy, BlockStrategies, &j.BlockStrategy)
	enumField(fields, "misfire_policy", req.MisfirePolicy, DefaultMisfirePolicy, MisfirePolicies, &j.MisfirePolicy)

	j.MisfireMaxCatchUp = DefaultMisfireMaxCatchUp
	if req.MisfireMaxCatchUp != nil {
		j.MisfireMaxCatchUp = *req.MisfireMaxCatchUp
		if j.MisfireMaxCatchUp < 1 || j.MisfireMaxCatchUp > MaxMisfireMaxCatchUp {
			fields["misfire_max_catch_up"] = fmt.Sprintf("misfire_max_catch_up must be from 1 to %d", MaxMisfireMaxCatchUp)
		}
	}
	j.RetryCount = req.RetryCount
	if j.RetryCount < 0 || j.RetryCount > MaxRetryCount {
		fields["retry_count"] = fmt.Sprintf("retry_count must be from 0 to %d", MaxRetryCount)
	}
	j.RetryIntervalSeconds = req.RetryIntervalSeconds
	if j.RetryIntervalSeconds < 0 || j.RetryIntervalSeconds > MaxRetryIntervalSeconds {
		fields["retry_interval_seconds"] = fmt.Sprintf("retry_interval_seconds must be from 0 to %d", MaxRetryIntervalSeconds)
	}
	if utf8.RuneCountInString(j.Author) > maxAuthorChars {
		fields["author"] = fmt.Sprintf("author is longer than %d characters", maxAuthorChars)
	}

	j.AlarmEmails = nil
	if len(req.AlarmEmails) > MaxAlarmEmails {
		fields["alarm_emails"] = fmt.Sprintf("at most %d alarm e-mail addresses", MaxAlarmEmails)
	}
	for _, e := range req.AlarmEmails {
		e = strings.TrimSpace(e)
		if a, err := mail.ParseAddress(e); err != nil || a.Address != e || a.Name != "" || strings.ContainsAny(e, ", ") {
			fields["alarm_emails"] = fmt.Sprintf("%q is not a valid e-mail address (give bare addresses like ops@example.com)", e)
			break
		}
		if !slices.Contains(j.AlarmEmails, e) {
			j.AlarmEmails = append(j.AlarmEmails, e)
		}
	}

	j.AlertOnKill = req.AlertOnKill

	j.ChildJobIDs = nil
	for _, id := range req.ChildJobIDs {
		if !slices.Contains(j.ChildJobIDs, id) {
			j.ChildJobIDs = append(j.ChildJobIDs, id)
		}
	}

	j.NodeUUID = strings.TrimSpace(req.NodeUUID)
	if j.NodeUUID == "" {
		return nil
	}
	if utf8.RuneCountInString(j.NodeUUID) > maxNodeUUIDChars {
		fields["node_uuid"] = fmt.Sprintf("node_uuid is longer than %d characters", maxNodeUUIDChars)
		return nil
	}
	if _, bad := fields["group"]; bad || j.Handler == "" {
		return nil
	}
	nodes, err := s.validationNodes(ctx)
	if err != nil {
		return err
	}
	var ve *ValidationError
	if err := checkTarget(nodes, j.NodeUUID, j); errors.As(err, &ve) {
		fields["node_uuid"] = ve.Fields["node"]
	}
	return nil
}

// childInfo is what checkChildren knows of a job: whether it exists, whether
// the caller may see it, and its children as stored.
type childInfo struct {
	found, visible bool
	kids           []int64
}

// checkChildren checks the child job ids of job id (0 = a new job), whose
// stored children are kept: each child must exist in one of the caller's
// groups, and following children from id must never lead back to it. A
// child outside the caller's groups is answered exactly as one that does
// not exist ("job N does not exist"), so ids do not leak and a parent
// cannot fire a job its author may not. A kept child (one the job already
// has, put there by someone who could see it) that the caller cannot see
// stays unchecked, whether it still exists or not, so the answer tells
// nothing about it; a caller who sees every group is told when a kept
// child no longer exists. A cycle names only the jobs the caller may see,
// each run of other jobs on it being "…". It returns the problem for
// fields["child_job_ids"] ("" = fine), or an internal error.
func (s *server) checkChildren(ctx context.Context, id int64, kept, children []int64) (string, error) {
	if len(children) == 0 {
		return "", nil
	}
	if len(children) > MaxChildJobs {
		return fmt.Sprintf("at most %d child jobs", MaxChildJobs), nil
	}
	p := PrincipalFrom(ctx)
	seesAll := p == nil || p.AllGroups()
	cache := map[int64]*childInfo{}
	groups := map[string]bool{}
	// info reads job jid once, with id's children replaced by the new list.
	info := func(jid int64) (*childInfo, error) {
		if jid == id && id != 0 {
			return &childInfo{found: true, visible: true, kids: children}, nil
		}
		if in, ok := cache[jid]; ok {
			return in, nil
		}
		in := &childInfo{}
		j, err := s.store.GetJob(ctx, jid)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("read child job %d: %w", jid, err)
		default:
			in.found, in.kids = true, j.ChildJobIDs
			visible, ok := groups[j.Group]
			if !ok {
				if visible, err = s.groupVisible(ctx, j.Group); err != nil {
					return nil, fmt.Errorf("read the group of child job %d: %w", jid, err)
				}
				groups[j.Group] = visible
			}
			in.visible = visible
		}
		cache[jid] = in
		return in, nil
	}
	for _, c := range children {
		if c <= 0 {
			return fmt.Sprintf("%d is not a job id", c), nil
		}
		if c == id {
			return fmt.Sprintf("cycle %d → %d", id, id), nil
		}
		in, err := info(c)
		if err != nil {
			return "", err
		}
		if in.found && in.visible {
			continue
		}
		if !seesAll && slices.Contains(kept, c) {
			continue
		}
		return fmt.Sprintf("job %d does not exist", c), nil
	}
	if id == 0 {
		return "", nil // nothing refers to a new job yet: no cycle can pass through it
	}
	// Depth-first search from id for a path back to id.
	var path []int64
	done := map[int64]bool{}
	var visit func(jid int64) (bool, error)
	visit = func(jid int64) (bool, error) {
		path = append(path, jid)
		in, err := info(jid)
		if err != nil {
			return false, err
		}
		// A stale child id of another job (not found) has no children: it leads nowhere.
		for _, k := range in.kids {
			if k == id {
				path = append(path, k)
				return true, nil
			}
			if done[k] {
				continue
			}
			done[k] = true
			if found, err := visit(k); found || err != nil {
				return found, err
			}
		}
		path = path[:len(path)-1]
		return false, nil
	}
	found, err := visit(id)
	if err != nil || !found {
		return "", err
	}
	parts := make([]string, 0, len(path))
	for i, jid := range path {
		// Every job on the path was read (id itself is the caller's).
		if jid == id || cache[jid].visible {
			parts = append(parts, strconv.FormatInt(jid, 10))
		} else if i > 0 && parts[len(parts)-1] != "…" {
			parts = append(parts, "…")
		}
	}
	return "cycle " + strings.Join(parts, " → "), nil
}

// Jobs saves jobs exactly as the REST API does (validation, group
// creation, the leader's signal key, once keys), for other front doors such
// as the xxl-job-compatible API in server/compat. Its errors are the API's:
// *ValidationError, store.ErrNotFound / ErrConflict (wrapped), or internal.
type Jobs struct{ s *server }

// NewJobs returns a Jobs over cfg's Store, Etcd, Keys, Location, Logger and
// Now (other fields are unused). It panics if cfg.Validate fails.
func NewJobs(cfg Config) *Jobs {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &server{store: cfg.Store, etcd: cfg.Etcd, keys: cfg.Keys, loc: cfg.Location, log: cfg.Logger, now: cfg.Now,
		nodeToken: cfg.NodeToken, catalog: cfg.catalog(), nodeTLS: cfg.NodeTLS}
	s.validateClient = newValidateClient(s.nodeTLS)
	if s.loc == nil {
		s.loc = time.Local
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return &Jobs{s: s}
}

// Create validates req, stores the new job and signals the leader. The
// warnings are about a valid job that cannot fire yet (no live node offers
// its handler).
func (j *Jobs) Create(ctx context.Context, req JobRequest) (*store.Job, []string, error) {
	return j.s.saveNewJob(ctx, req)
}

// Update replaces job id's writable fields with req and signals the leader.
func (j *Jobs) Update(ctx context.Context, id int64, req JobRequest) (*store.Job, []string, error) {
	return j.s.saveJob(ctx, id, req)
}

// Delete deletes job id and its signal key.
func (j *Jobs) Delete(ctx context.Context, id int64) error { return j.s.removeJob(ctx, id) }

// Trigger asks the leader to fire job id once: on req.Node, or the job's
// routing when it is ""; with req.Params instead of the job's params when
// set (checked like POST /api/v1/jobs/{id}/trigger checks them).
func (j *Jobs) Trigger(ctx context.Context, id int64, req TriggerRequest, requestedBy string) (TriggerResponse, error) {
	setAudit(ctx, func(a *auditRecord) { a.objectType, a.objectID = "job", strconv.FormatInt(id, 10) })
	return j.s.trigger(ctx, id, req, requestedBy)
}

// Get returns job id when the caller may see it (else a not-found error).
func (j *Jobs) Get(ctx context.Context, id int64) (*store.Job, error) { return j.s.visibleJob(ctx, id) }

// LiveNodes returns the registered nodes.
func (j *Jobs) LiveNodes(ctx context.Context) ([]cluster.NodeInfo, error) { return j.s.liveNodes(ctx) }

// RequestOf is the JobRequest that saves j unchanged (for partial updates).
func RequestOf(j *store.Job) JobRequest {
	enabled := j.Enabled
	catchUp := j.MisfireMaxCatchUp
	var catchUpPtr *int
	if catchUp > 0 {
		catchUpPtr = &catchUp
	}
	return JobRequest{
		Name: j.Name, Group: j.Group, ScheduleType: j.ScheduleType, Schedule: j.Schedule,
		Timezone: j.Timezone, Handler: j.Handler, Params: j.Params, TimeoutSeconds: j.TimeoutSeconds,
		Enabled: &enabled, Description: j.Description, Author: j.Author,
		RouteStrategy: j.RouteStrategy, BlockStrategy: j.BlockStrategy, MisfirePolicy: j.MisfirePolicy,
		MisfireMaxCatchUp: catchUpPtr, RetryCount: j.RetryCount, RetryIntervalSeconds: j.RetryIntervalSeconds,
		AlarmEmails: j.AlarmEmails, AlertOnKill: j.AlertOnKill, ChildJobIDs: j.ChildJobIDs, NodeUUID: j.NodeUUID,
	}
}
