package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

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
	pg, skip, err := page(p)
	if err != nil {
		return err
	}
	groups, total, err := h.store.FindGroups(ctx, store.GroupFilter{AppName: p.str("appname"), Title: p.str("title"),
		Scope: u.Scope()}, pg)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	nodes, err := h.jobs.LiveNodes(ctx)
	if err != nil {
		return err
	}
	out := PageList[Group]{RecordsFiltered: total, RecordsTotal: total, Data: []Group{}}
	for _, g := range window(groups, skip) {
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
	pg, skip, err := page(p)
	if err != nil {
		return err
	}
	f := store.JobFilter{NameLike: p.str("jobDesc"), Handler: p.str("executorHandler"), Author: p.str("author"),
		Scope: u.Scope()}
	groupID, err := p.int("jobGroup", 0)
	if err != nil {
		return err
	}
	groups := map[string]int64{}
	if groupID > 0 {
		if !u.InGroup(groupID) {
			return fmt.Errorf("group %d not found: %w", groupID, store.ErrNotFound)
		}
		g, err := h.store.GetGroup(ctx, groupID)
		if err != nil {
			return err
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
	jobs, total, err := h.store.FindJobs(ctx, f, pg)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	out := PageList[JobInfo]{RecordsFiltered: total, RecordsTotal: total, Data: []JobInfo{}}
	for _, j := range window(jobs, skip) {
		gid, ok := groups[j.Group]
		if !ok {
			all, _, err := h.store.FindGroups(ctx, store.GroupFilter{}, store.Page{})
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			for _, g := range all {
				groups[g.AppName] = g.ID
			}
			gid = groups[j.Group]
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
		ExecutorHandler:        j.Handler,
		ExecutorBlockStrategy:  j.BlockStrategy,
		ExecutorTimeout:        j.TimeoutSeconds,
		ExecutorFailRetryCount: j.RetryCount,
		GlueType:               "BEAN",
		ChildJobID:             joinIDs(j.ChildJobIDs),
	}
	if j.Enabled {
		x.TriggerStatus = 1
	}
	switch j.ScheduleType {
	case schedule.TypeCron, "":
		x.ScheduleType, x.ScheduleConf, x.JobCron = "CRON", j.Schedule, j.Schedule
	case schedule.TypeFixedRate:
		x.ScheduleType, x.ScheduleConf = "FIX_RATE", j.Schedule
	case schedule.TypeNone:
		x.ScheduleType = "NONE"
	default:
		x.ScheduleType, x.ScheduleConf = strings.ToUpper(j.ScheduleType), j.Schedule
	}
	x.ExecutorParam = executorParamOf(j.Handler, j.Params)
	return x
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
// their value), nil for an add.
func (h *handler) jobRequest(ctx context.Context, p params, base *store.Job) (api.JobRequest, error) {
	var req api.JobRequest
	if base != nil {
		req = api.RequestOf(base)
	} else {
		disabled := false
		req.Enabled = &disabled // xxl-job adds jobs stopped (triggerStatus 0)
	}
	groupID, err := p.int("jobGroup", 0)
	if err != nil {
		return req, err
	}
	if groupID <= 0 {
		return req, invalid("jobGroup is required")
	}
	g, err := h.store.GetGroup(ctx, groupID)
	if err != nil {
		return req, invalid("jobGroup %d does not exist", groupID)
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

	// Schedule: scheduleType + scheduleConf (xxl-job 2.3) or jobCron (2.2).
	switch typ := strings.ToUpper(p.str("scheduleType")); typ {
	case "", "CRON":
		expr := p.str("scheduleConf")
		if expr == "" {
			expr = p.str("jobCron")
		}
		if expr == "" {
			return req, invalid("jobCron is required")
		}
		if _, err := schedule.ParseQuartz(expr, h.loc); err != nil {
			return req, invalid("jobCron %q is not a valid Quartz cron expression: %v", expr, err)
		}
		req.ScheduleType, req.Schedule = schedule.TypeCron, quartzForm(expr)
	case "FIX_RATE":
		req.ScheduleType, req.Schedule = schedule.TypeFixedRate, p.str("scheduleConf")
	case "NONE":
		req.ScheduleType, req.Schedule = schedule.TypeNone, ""
	default:
		return req, invalid("unknown scheduleType %q (one of CRON, FIX_RATE, NONE)", typ)
	}

	// Handler and params.
	switch glue := strings.ToUpper(p.str("glueType")); glue {
	case "", "BEAN":
		req.Handler = p.str("executorHandler")
		if req.Handler == "" {
			return req, invalid("executorHandler is required")
		}
		params, err := paramsOf(req.Handler, p["executorParam"])
		if err != nil {
			return req, err
		}
		req.Params = params
	case "GLUE_SHELL":
		req.Handler = "shell"
		b, _ := json.Marshal(map[string]string{"script": p["glueSource"]})
		req.Params = b
	default:
		return req, invalid("glueType %q is not supported (BEAN or GLUE_SHELL)", glue)
	}
	return req, nil
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
func (h *handler) jobAdd(ctx context.Context, w http.ResponseWriter, p params, _ *authz.Principal) error {
	req, err := h.jobRequest(ctx, p, nil)
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
	id, err := p.int("id", 0)
	if err != nil {
		return 0, err
	}
	if id <= 0 {
		return 0, invalid("id is required")
	}
	return id, nil
}

// getJob reads job id, answering xxl-job's message when it is missing.
func (h *handler) getJob(ctx context.Context, id int64) (*store.Job, error) {
	j, err := h.store.GetJob(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("job %d not found: %w", id, err)
	}
	return j, nil
}

// jobUpdate serves /jobinfo/update.
func (h *handler) jobUpdate(ctx context.Context, w http.ResponseWriter, p params, _ *authz.Principal) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	old, err := h.getJob(ctx, id)
	if err != nil {
		return err
	}
	req, err := h.jobRequest(ctx, p, old)
	if err != nil {
		return err
	}
	if _, _, err := h.jobs.Update(ctx, id, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ReturnT{Code: 200})
	return nil
}

// setEnabled serves /jobinfo/start and /jobinfo/stop.
func (h *handler) setEnabled(ctx context.Context, w http.ResponseWriter, p params, enabled bool) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	j, err := h.getJob(ctx, id)
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

// jobTrigger serves /jobinfo/trigger: one fire now on the job's routing.
// executorParam is accepted but a one-off parameter override is not
// supported yet: the fire runs with the job's stored params.
func (h *handler) jobTrigger(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error {
	id, err := jobID(p)
	if err != nil {
		return err
	}
	if _, err := h.getJob(ctx, id); err != nil {
		return err
	}
	by := "xxl-job-api"
	if u != nil {
		by = u.Username
	}
	if err := h.jobs.Trigger(ctx, id, by); err != nil {
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
