package compat

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

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// Group is an executor of /jobgroup/list.
type Group struct {
	ID           int64    `json:"id"`
	AppName      string   `json:"appname"`
	Title        string   `json:"title"`
	AddressType  int      `json:"addressType"`  // 0 auto, 1 manual
	AddressList  string   `json:"addressList"`  // comma-separated node uuids
	RegistryList []string `json:"registryList"` // live member node uuids; null when none
}

// JobInfo is a job of /jobinfo/list (xxl_job_info).
type JobInfo struct {
	ID                     int64  `json:"id"`
	JobGroup               int64  `json:"jobGroup"`
	JobCron                string `json:"jobCron"`
	JobDesc                string `json:"jobDesc"`
	AddTime                string `json:"addTime"`
	UpdateTime             string `json:"updateTime"`
	Author                 string `json:"author"`
	AlarmEmail             string `json:"alarmEmail"`
	ScheduleType           string `json:"scheduleType"`
	ScheduleConf           string `json:"scheduleConf"`
	MisfireStrategy        string `json:"misfireStrategy"`
	ExecutorRouteStrategy  string `json:"executorRouteStrategy"`
	ExecutorHandler        string `json:"executorHandler"`
	ExecutorParam          string `json:"executorParam"`
	ExecutorBlockStrategy  string `json:"executorBlockStrategy"`
	ExecutorTimeout        int    `json:"executorTimeout"`
	ExecutorFailRetryCount int    `json:"executorFailRetryCount"`
	GlueType               string `json:"glueType"`
	GlueSource             string `json:"glueSource"`
	ChildJobID             string `json:"childJobId"`
	TriggerStatus          int    `json:"triggerStatus"`
}

// groupList serves /jobgroup/list?appname=&title=&pageNum=&pageSize=.
func (h *handler) groupList(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	win, err := page(p)
	if err != nil {
		return err
	}
	f := store.GroupFilter{AppName: p.str("appname"), Title: p.str("title"), Scope: u.Scope()}
	groups, total, err := readRows(win, func(pg store.Page) ([]store.Group, int, error) {
		return h.store.FindGroups(ctx, f, pg)
	})
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	nodes, err := h.jobs.LiveNodes(ctx)
	if err != nil {
		return err
	}
	out := PageList[Group]{RecordsFiltered: total, RecordsTotal: total, Data: []Group{}}
	for _, g := range groups {
		x := Group{ID: g.ID, AppName: g.AppName, Title: g.Title, AddressList: strings.Join(g.Addresses, ",")}
		if g.AddressType == store.AddressManual {
			x.AddressType = 1
		}
		for _, n := range api.GroupMembers(&g, nodes) {
			x.RegistryList = append(x.RegistryList, n.UUID)
		}
		out.Data = append(out.Data, x)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobList serves /jobinfo/list?jobGroup=&triggerStatus=&jobDesc=&executorHandler=&author=&pageNum=&pageSize=.
func (h *handler) jobList(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	win, err := page(p)
	if err != nil {
		return err
	}
	f := store.JobFilter{NameLike: p.str("jobDesc"), Handler: p.str("executorHandler"), Author: p.str("author"),
		Scope: u.Scope()}
	groupID, err := p.int("jobGroup", 0)
	if err != nil {
		return err
	}
	if groupID < -1 {
		// 0 and -1 are every group, as xxl-job reads any jobGroup <= 0 and
		// its clients send either; another negative is a mistake.
		return invalid("jobGroup must be a group id, or 0 or -1 for every group, not %d", groupID)
	}
	groups := map[string]int64{}
	if groupID > 0 {
		// A group outside the caller's groups (or an unknown one) has no
		// jobs: the list envelope with no rows, as xxl-job answers.
		if !u.InGroup(groupID) {
			writeJSON(w, http.StatusOK, PageList[JobInfo]{Data: []JobInfo{}})
			return nil
		}
		g, err := h.store.GetGroup(ctx, groupID)
		if errors.Is(err, store.ErrNotFound) {
			writeJSON(w, http.StatusOK, PageList[JobInfo]{Data: []JobInfo{}})
			return nil
		}
		if err != nil {
			return fmt.Errorf("read group %d: %w", groupID, err)
		}
		f.Group = g.AppName
		groups[g.AppName] = g.ID
	}
	status, err := p.int("triggerStatus", -1)
	if err != nil {
		return err
	}
	switch status {
	case -1:
	case 0, 1:
		enabled := status == 1
		f.Enabled = &enabled
	default:
		return invalid("triggerStatus must be -1 (all), 0 (stopped) or 1 (running)")
	}
	jobs, total, err := readRows(win, func(pg store.Page) ([]store.Job, int, error) {
		return h.store.FindJobs(ctx, f, pg)
	})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	out := PageList[JobInfo]{RecordsFiltered: total, RecordsTotal: total, Data: []JobInfo{}}
	for _, j := range jobs {
		gid, ok := groups[j.Group]
		if !ok {
			// The id of each group on the page, once (0 for a job whose
			// group row is missing).
			g, err := h.store.GroupByName(ctx, j.Group)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("read group %q: %w", j.Group, err)
			}
			if g != nil {
				gid = g.ID
			}
			groups[j.Group] = gid
		}
		out.Data = append(out.Data, jobInfoOf(&j, gid))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func jobInfoOf(j *store.Job, groupID int64) JobInfo {
	x := JobInfo{
		ID:                     j.ID,
		JobGroup:               groupID,
		JobDesc:                j.Name,
		AddTime:                j.CreatedAt.UTC().Format(TimeLayout),
		UpdateTime:             j.UpdatedAt.UTC().Format(TimeLayout),
		Author:                 j.Author,
		AlarmEmail:             strings.Join(j.AlarmEmails, ","),
		MisfireStrategy:        j.MisfirePolicy,
		ExecutorRouteStrategy:  j.RouteStrategy,
		ExecutorBlockStrategy:  j.BlockStrategy,
		ExecutorTimeout:        j.TimeoutSeconds,
		ExecutorFailRetryCount: j.RetryCount,
		ChildJobID:             joinIDs(j.ChildJobIDs),
	}
	if j.Enabled {
		x.TriggerStatus = 1
	}
	x.ScheduleType, x.ScheduleConf, x.JobCron = listedSchedule(j)
	x.GlueType, x.GlueSource, x.ExecutorHandler, x.ExecutorParam = listedHandler(j.Handler, j.Params)
	return x
}

// listedSchedule is how /jobinfo/list shows a job's schedule: scheduleType,
// scheduleConf and jobCron. A cron expression (Quartz, standard 5/6-field
// or a macro) is CRON; fixed_rate and "@every" are FIX_RATE in seconds, as
// xxl-job; fixed_delay is FIX_DELAY in seconds; once is ONCE; none is NONE.
// jobRequest reads every one of them back, and keeps the stored schedule
// when it gets back what this shows.
func listedSchedule(j *store.Job) (typ, conf, jobCron string) {
	switch j.ScheduleType {
	case schedule.TypeCron, "":
		if d, ok := everySeconds(j.Schedule); ok {
			return "FIX_RATE", d, ""
		}
		return "CRON", j.Schedule, j.Schedule
	case schedule.TypeFixedRate:
		return "FIX_RATE", seconds(j.ScheduleType, j.Schedule), ""
	case schedule.TypeFixedDelay:
		return "FIX_DELAY", seconds(j.ScheduleType, j.Schedule), ""
	case schedule.TypeNone:
		return "NONE", "", ""
	default:
		return strings.ToUpper(j.ScheduleType), j.Schedule, ""
	}
}

// everySeconds reads "@every <interval>" as whole seconds.
func everySeconds(expr string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "@every")
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return "", false
	}
	s := seconds(schedule.TypeFixedRate, rest)
	return s, s != ""
}

// seconds writes an interval (a duration or a number of seconds) as whole
// seconds; an interval that does not parse is returned as it is.
func seconds(typ, interval string) string {
	interval = strings.TrimSpace(interval)
	if _, err := strconv.ParseInt(interval, 10, 64); err == nil {
		return interval
	}
	s, err := schedule.Parse(typ, interval, "UTC", time.UTC)
	if err != nil {
		return interval
	}
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	next := s.Next(now)
	if next.IsZero() {
		return interval
	}
	return strconv.FormatInt(int64(next.Sub(now)/time.Second), 10)
}

// listedHandler is how /jobinfo/list shows a job's handler and params:
// glueType, glueSource, executorHandler and executorParam. A shell job is
// GLUE_SHELL with its script as glueSource and its other params
// (interpreter, env) as a JSON object in executorParam ("" when none);
// every other job is BEAN, with executorParam in its handler's text form
// when that reads back to the same params, else the params' JSON.
func listedHandler(handler string, params json.RawMessage) (glue, source, name, param string) {
	if handler == "shell" {
		var m map[string]json.RawMessage
		var script string
		if json.Unmarshal(params, &m) == nil && json.Unmarshal(m["script"], &script) == nil && script != "" {
			delete(m, "script")
			if len(m) > 0 {
				b, _ := json.Marshal(m)
				param = string(b)
			}
			return "GLUE_SHELL", script, handler, param
		}
	}
	return "BEAN", "", handler, executorParamOf(handler, params)
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

// jobRequest maps xxl-job's add/update parameters onto an API job request.
// base is the stored job for an update (fields xxl-job does not send keep
// their value), nil for an add; u is the caller, whose groups jobGroup must
// be among.
func (h *handler) jobRequest(ctx context.Context, p params, base *store.Job, u *authz.Principal) (api.JobRequest, error) {
	var req api.JobRequest
	if base != nil {
		req = api.RequestOf(base)
	} else {
		disabled := false
		req.Enabled = &disabled // xxl-job adds jobs stopped (triggerStatus 0)
	}
	groupID, err := p.id("jobGroup")
	if err != nil {
		return req, err
	}
	if groupID == 0 {
		return req, invalid("jobGroup is required")
	}
	// A group outside the caller's groups is refused before it is looked
	// up, like one that does not exist: its appname must not leak.
	if !u.InGroup(groupID) {
		return req, &denied{fmt.Sprintf("no permission for jobGroup %d", groupID)}
	}
	g, err := h.store.GetGroup(ctx, groupID)
	if errors.Is(err, store.ErrNotFound) {
		return req, invalid("jobGroup %d does not exist", groupID)
	}
	if err != nil {
		return req, fmt.Errorf("read group %d: %w", groupID, err)
	}
	req.Group = g.AppName
	req.Name = p.str("jobDesc")
	if req.Name == "" {
		return req, invalid("jobDesc is required")
	}
	req.Author = p.str("author")
	req.AlarmEmails = splitList(p.str("alarmEmail"))
	req.RouteStrategy = p.str("executorRouteStrategy")
	req.BlockStrategy = p.str("executorBlockStrategy")
	if p.has("misfireStrategy") {
		req.MisfirePolicy = p.str("misfireStrategy")
	}
	if req.TimeoutSeconds, err = intParam(p, "executorTimeout"); err != nil {
		return req, err
	}
	if req.RetryCount, err = intParam(p, "executorFailRetryCount"); err != nil {
		return req, err
	}
	req.ChildJobIDs = nil
	for _, s := range splitList(p.str("childJobId")) {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return req, invalid("childJobId %q is not a job id", s)
		}
		req.ChildJobIDs = append(req.ChildJobIDs, id)
	}
	if p.has("triggerStatus") {
		st, err := p.int("triggerStatus", 0)
		if err != nil || (st != 0 && st != 1) {
			return req, invalid("triggerStatus must be 0 (stopped) or 1 (running)")
		}
		enabled := st == 1
		req.Enabled = &enabled
	}

	if err := h.requestSchedule(p, base, &req); err != nil {
		return req, err
	}
	if err := requestHandler(p, base, &req); err != nil {
		return req, err
	}
	return req, nil
}

// requestSchedule sets req's schedule from scheduleType + scheduleConf
// (xxl-job 2.3) or jobCron (2.2). A schedule sent back as /jobinfo/list
// shows base's keeps base's schedule as it is.
func (h *handler) requestSchedule(p params, base *store.Job, req *api.JobRequest) error {
	typ := strings.ToUpper(p.str("scheduleType"))
	conf := p.str("scheduleConf")
	if typ == "" || typ == "CRON" {
		if conf == "" {
			conf = p.str("jobCron")
		}
	}
	if base != nil {
		bt, bc, _ := listedSchedule(base)
		if (typ == bt || (typ == "" && bt == "CRON")) && strings.Join(strings.Fields(conf), " ") == strings.Join(strings.Fields(bc), " ") {
			req.ScheduleType, req.Schedule = base.ScheduleType, base.Schedule
			return nil
		}
	}
	switch typ {
	case "", "CRON":
		if conf == "" {
			return invalid("jobCron is required")
		}
		if n := len(strings.Fields(conf)); n == 6 || n == 7 {
			// xxl-job's cron is Quartz's.
			if _, err := schedule.ParseQuartz(conf, h.loc); err != nil {
				return invalid("jobCron %q is not a valid Quartz cron expression: %v", conf, err)
			}
			req.ScheduleType, req.Schedule = schedule.TypeCron, quartzForm(conf)
			return nil
		}
		// Cronix's other cron forms: 5-field standard cron and macros.
		if _, err := schedule.Parse(schedule.TypeCron, conf, "", h.loc); err != nil {
			return invalid("jobCron %q is not a valid cron expression: %v", conf, err)
		}
		req.ScheduleType, req.Schedule = schedule.TypeCron, conf
	case "FIX_RATE":
		req.ScheduleType, req.Schedule = schedule.TypeFixedRate, conf
	case "FIX_DELAY", "FIXED_DELAY":
		req.ScheduleType, req.Schedule = schedule.TypeFixedDelay, conf
	case "ONCE":
		req.ScheduleType, req.Schedule = schedule.TypeOnce, conf
	case "NONE":
		req.ScheduleType, req.Schedule = schedule.TypeNone, ""
	default:
		return invalid("unknown scheduleType %q (one of CRON, FIX_RATE, FIX_DELAY, ONCE, NONE)", typ)
	}
	return nil
}

// requestHandler sets req's handler and params from glueType,
// executorHandler, executorParam and glueSource. A handler sent back as
// /jobinfo/list shows base's keeps base's params as they are.
func requestHandler(p params, base *store.Job, req *api.JobRequest) error {
	glue := strings.ToUpper(p.str("glueType"))
	if base != nil {
		bg, bs, bh, bp := listedHandler(base.Handler, base.Params)
		if (glue == bg || (glue == "" && bg == "BEAN")) && p["executorParam"] == bp &&
			(bg == "BEAN" && p.str("executorHandler") == bh || bg == "GLUE_SHELL" && p["glueSource"] == bs) {
			req.Handler, req.Params = base.Handler, base.Params
			return nil
		}
	}
	switch glue {
	case "", "BEAN":
		req.Handler = p.str("executorHandler")
		if req.Handler == "" {
			return invalid("executorHandler is required")
		}
		params, err := paramsOf(req.Handler, p["executorParam"])
		if err != nil {
			return err
		}
		req.Params = params
	case "GLUE_SHELL":
		params, err := glueShellParams(p["glueSource"], p["executorParam"])
		if err != nil {
			return err
		}
		req.Handler, req.Params = "shell", params
	default:
		return invalid("glueType %q is not supported (BEAN or GLUE_SHELL)", glue)
	}
	return nil
}

// glueShellParams are the shell handler's params of a GLUE_SHELL job:
// {"script": source} plus the JSON object of executorParam (interpreter,
// env), as /jobinfo/list shows them.
func glueShellParams(source, executorParam string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if t := strings.TrimSpace(executorParam); t != "" {
		if !strings.HasPrefix(t, "{") || json.Unmarshal([]byte(t), &m) != nil {
			return nil, invalid("executorParam of a GLUE_SHELL job must be empty or a JSON object of the shell handler's params (interpreter, env)")
		}
	}
	script, err := json.Marshal(source)
	if err != nil {
		return nil, fmt.Errorf("encode glueSource: %w", err)
	}
	m["script"] = script
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode shell params: %w", err)
	}
	return b, nil
}

// quartzForm makes a Quartz expression unambiguous for schedule.Parse: a
// 6-field expression without "?", "L", "W" or "#" would be read as standard
// cron there (day-of-week 0 = Sunday), so it gets the year field "*".
func quartzForm(expr string) string {
	f := strings.Fields(expr)
	if len(f) == 6 && !strings.ContainsAny(f[3]+f[5], "?LW#") {
		return strings.Join(f, " ") + " *"
	}
	return strings.Join(f, " ")
}

func intParam(p params, k string) (int, error) {
	n, err := p.int(k, 0)
	return int(n), err
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// jobAdd serves /jobinfo/add: content is the new job id as a string.
func (h *handler) jobAdd(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	req, err := h.jobRequest(ctx, p, nil, u)
	if err != nil {
		return err
	}
	j, _, err := h.jobs.Create(ctx, req) // warnings do not fit ReturnT: msg stays null on success
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200, Content: strconv.FormatInt(j.ID, 10)})
	return nil
}

// jobID reads the required id parameter.
func jobID(p params) (int64, error) {
	id, err := p.id("id")
	if err != nil {
		return 0, err
	}
	if id == 0 {
		return 0, invalid("id is required")
	}
	return id, nil
}

// jobUpdate serves /jobinfo/update.
func (h *handler) jobUpdate(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	old, err := h.jobs.Get(ctx, id) // outside the caller's groups: not found, before the body is read
	if err != nil {
		return err
	}
	req, err := h.jobRequest(ctx, p, old, u)
	if err != nil {
		return err
	}
	if sameRequest(req, api.RequestOf(old)) {
		// The listed job sent back unchanged: nothing to save (no new
		// revision); audited as an update of it, like an unchanged PUT.
		api.SetAuditObject(ctx, "job", strconv.FormatInt(id, 10))
		writeJSON(w, http.StatusOK, ReturnT{Code: 200})
		return nil
	}
	if _, _, err := h.jobs.Update(ctx, id, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200})
	return nil
}

// sameRequest reports whether a and b save the same job: empty and nil
// lists are the same, params compare as JSON values.
func sameRequest(a, b api.JobRequest) bool {
	if !jsonEqual(a.Params, b.Params) {
		return false
	}
	a.Params, b.Params = nil, nil
	for _, r := range []*api.JobRequest{&a, &b} {
		if len(r.AlarmEmails) == 0 {
			r.AlarmEmails = nil
		}
		if len(r.ChildJobIDs) == 0 {
			r.ChildJobIDs = nil
		}
	}
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// jsonEqual compares two JSON texts as values ("" is {}).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if len(bytes.TrimSpace(a)) == 0 {
		a = json.RawMessage("{}")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = json.RawMessage("{}")
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// setEnabled serves /jobinfo/start and /jobinfo/stop.
func (h *handler) setEnabled(ctx context.Context, w http.ResponseWriter, p params, enabled bool) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	j, err := h.jobs.Get(ctx, id)
	if err != nil {
		return err
	}
	req := api.RequestOf(j)
	req.Enabled = &enabled
	if _, _, err := h.jobs.Update(ctx, id, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200})
	return nil
}

func (h *handler) jobStart(ctx context.Context, w http.ResponseWriter, p params, _ *authz.Principal) error {
	return h.setEnabled(ctx, w, p, true)
}

func (h *handler) jobStop(ctx context.Context, w http.ResponseWriter, p params, _ *authz.Principal) error {
	return h.setEnabled(ctx, w, p, false)
}

// jobTrigger serves /jobinfo/trigger: one fire now on the job's routing,
// or on the node of addressList when it names one. A non-empty
// executorParam replaces the job's params for that fire only, read as
// /jobinfo/update reads it for this job (for a GLUE_SHELL job: a JSON
// object of interpreter/env beside the stored script); the stored job is
// unchanged.
func (h *handler) jobTrigger(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	j, err := h.jobs.Get(ctx, id)
	if err != nil {
		return err
	}
	var req api.TriggerRequest
	if param := p["executorParam"]; strings.TrimSpace(param) != "" {
		glue, _, _, listed := listedHandler(j.Handler, j.Params)
		if param != listed {
			if glue == "GLUE_SHELL" {
				var script struct {
					Script string `json:"script"`
				}
				_ = json.Unmarshal(j.Params, &script) // listed as GLUE_SHELL: it has one
				req.Params, err = glueShellParams(script.Script, param)
			} else {
				req.Params, err = paramsOf(j.Handler, param)
			}
			if err != nil {
				return err
			}
		}
	}
	switch addrs := splitList(p.str("addressList")); len(addrs) {
	case 0:
	case 1:
		req.Node = addrs[0]
	default:
		return invalid("addressList names %d nodes; give one node uuid, or none for the job's routing", len(addrs))
	}
	by := "xxl-job-api"
	if u != nil && u.Username != "" {
		by = u.Username
	}
	if _, err := h.jobs.Trigger(ctx, id, req, by); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200})
	return nil
}

// jobRemove serves /jobinfo/remove.
func (h *handler) jobRemove(ctx context.Context, w http.ResponseWriter, p params, _ *authz.Principal) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	if err := h.jobs.Delete(ctx, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200})
	return nil
}
