package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// TimeLayout is how the API writes instants: RFC 3339 in UTC with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is an instant in API JSON: TimeLayout, or null when unset (zero).
type Time struct{ time.Time }

// MarshalJSON writes TimeLayout in UTC, or null for the zero time.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 string or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("time must be an RFC 3339 string: %w", err)
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

func timeOf(p *time.Time) Time {
	if p == nil {
		return Time{}
	}
	return Time{*p}
}

// LoginRequest is the body of POST /api/v1/auth/login.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// LoginResponse is the reply to a successful login.
type LoginResponse struct {
	// Token is the session token: also set as the cronix_session cookie,
	// and usable as a bearer token.
	Token string `json:"token"`
	// ExpiresAt is when the session ends at the latest (it ends earlier
	// when unused for the idle timeout).
	ExpiresAt Time `json:"expires_at"`
	// CSRFToken must be sent as X-CSRF-Token with unsafe cookie-authenticated requests.
	CSRFToken string `json:"csrf_token"`
	// User is who logged in.
	User User `json:"user"`
}

// MeResponse is the reply of GET /api/v1/auth/me.
type MeResponse struct {
	ID       int64   `json:"id"`
	Username string  `json:"username"`
	Role     string  `json:"role"`
	Groups   []int64 `json:"groups"`
	Disabled bool    `json:"disabled"`
	// CSRFToken is the session's CSRF token when the caller authenticated with
	// the session cookie (so a reloaded page gets it back); "" for a bearer
	// token (a session or API token), which CSRF does not apply to.
	CSRFToken string `json:"csrf_token"`
}

// PasswordChangeRequest is the body of POST /api/v1/auth/password.
type PasswordChangeRequest struct {
	OldPassword string `json:"old_password"`
	NewPassword string `json:"new_password"`
}

// PasswordResetRequest is the body of POST /api/v1/users/{id}/password.
type PasswordResetRequest struct {
	Password string `json:"password"`
}

// User is a user of the users API (never its password).
type User struct {
	ID        int64   `json:"id"`
	Username  string  `json:"username"`
	Role      string  `json:"role"`
	Groups    []int64 `json:"groups"`
	Disabled  bool    `json:"disabled"`
	CreatedAt Time    `json:"created_at"`
	UpdatedAt Time    `json:"updated_at"`
}

func userFromStore(u *store.User) User {
	groups := u.Groups
	if groups == nil {
		groups = []int64{}
	}
	return User{ID: u.ID, Username: u.Username, Role: u.Role, Groups: groups, Disabled: u.Disabled,
		CreatedAt: Time{u.CreatedAt}, UpdatedAt: Time{u.UpdatedAt}}
}

// UserCreateRequest is the body of POST /api/v1/users.
type UserCreateRequest struct {
	Username string  `json:"username"`
	Password string  `json:"password"`
	Role     string  `json:"role"`
	Groups   []int64 `json:"groups"`
}

// UserPatchRequest is the body of PATCH /api/v1/users/{id}: absent fields stay.
type UserPatchRequest struct {
	Username *string  `json:"username"`
	Role     *string  `json:"role"`
	Groups   *[]int64 `json:"groups"`
	Disabled *bool    `json:"disabled"`
}

// UserGroups is the body and reply of GET/PUT /api/v1/users/{id}/groups.
type UserGroups struct {
	Groups []int64 `json:"groups"`
}

// TokenRequest is the body of POST /api/v1/tokens.
type TokenRequest struct {
	Name      string  `json:"name"`
	ExpiresAt *Time   `json:"expires_at"`
	Role      string  `json:"role"`
	Groups    []int64 `json:"groups"`
}

// Token is an API token as listed (never its secret).
type Token struct {
	ID        int64   `json:"id"`
	Name      string  `json:"name"`
	User      string  `json:"user"`
	Role      string  `json:"role"`
	Groups    []int64 `json:"groups"`
	ExpiresAt Time    `json:"expires_at"`
	CreatedAt Time    `json:"created_at"`
	// LastUsedAt is when a request last authenticated with it, to within
	// a minute; null = never.
	LastUsedAt Time `json:"last_used_at"`
}

// TokenCreated is the reply of POST /api/v1/tokens: the only time the
// secret is shown.
type TokenCreated struct {
	Token
	Secret string `json:"secret"`
}

func tokenFromStore(t *store.AccessToken) Token {
	groups := t.Groups
	if groups == nil {
		groups = []int64{}
	}
	return Token{ID: t.ID, Name: t.Name, User: t.Username, Role: t.Role, Groups: groups,
		ExpiresAt: timeOf(t.ExpiresAt), CreatedAt: Time{t.CreatedAt}, LastUsedAt: timeOf(t.LastUsedAt)}
}

// AuditEntry is an entry of GET /api/v1/audit.
type AuditEntry struct {
	ID         int64           `json:"id"`
	At         Time            `json:"at"`
	User       string          `json:"user"`
	Address    string          `json:"address"`
	Action     string          `json:"action"`
	ObjectType string          `json:"object_type"`
	ObjectID   string          `json:"object_id"`
	Diff       json.RawMessage `json:"diff"`
}

// JobRequest is the body of POST /api/v1/jobs and PUT /api/v1/jobs/{id}:
// every writable field of a job (PUT replaces them all).
type JobRequest struct {
	Name           string          `json:"name"`
	Group          string          `json:"group"`         // default "default"
	ScheduleType   string          `json:"schedule_type"` // default "cron"
	Schedule       string          `json:"schedule"`
	Timezone       string          `json:"timezone"` // IANA name; "" = server default
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params"`          // JSON object; default {}
	TimeoutSeconds int             `json:"timeout_seconds"` // 0 = none, max 86400
	Enabled        *bool           `json:"enabled"`         // default true
	Description    string          `json:"description"`
	Author         string          `json:"author"`
	// RouteStrategy is a seed 001 route name; default FIRST.
	RouteStrategy string `json:"route_strategy"`
	// BlockStrategy is SERIAL_EXECUTION (default), DISCARD_LATER or COVER_EARLY.
	BlockStrategy string `json:"block_strategy"`
	// MisfirePolicy is FIRE_ONCE_NOW (default), DO_NOTHING or CATCH_UP.
	MisfirePolicy string `json:"misfire_policy"`
	// MisfireMaxCatchUp bounds CATCH_UP fires; default 100, 1 to 10000.
	MisfireMaxCatchUp *int `json:"misfire_max_catch_up"`
	// RetryCount (0-10) and RetryIntervalSeconds (0-86400; 0 = growing backoff).
	RetryCount           int `json:"retry_count"`
	RetryIntervalSeconds int `json:"retry_interval_seconds"`
	// AlarmEmails are bare e-mail addresses alerted on failure.
	AlarmEmails []string `json:"alarm_emails"`
	// AlertOnKill: a killed run raises a run.killed alert (default false).
	AlertOnKill bool `json:"alert_on_kill"`
	// ChildJobIDs are existing jobs fired when a run of this job succeeds.
	ChildJobIDs []int64 `json:"child_job_ids"`
	// NodeUUID pins the job to one live node of its group; "" = routed.
	NodeUUID string `json:"node_uuid"`
}

// SavedJob is the reply to a create or update: the job, and warnings
// about a valid job that cannot fire yet (no live node of its group offers
// its handler now), omitted when there are none.
type SavedJob struct {
	Job
	Warnings []string `json:"warnings,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	ID                   int64           `json:"id"`
	Name                 string          `json:"name"`
	Group                string          `json:"group"`
	ScheduleType         string          `json:"schedule_type"`
	Schedule             string          `json:"schedule"`
	Timezone             string          `json:"timezone"`
	Handler              string          `json:"handler"`
	Params               json.RawMessage `json:"params"`
	TimeoutSeconds       int             `json:"timeout_seconds"`
	Enabled              bool            `json:"enabled"`
	Description          string          `json:"description"`
	Author               string          `json:"author"`
	RouteStrategy        string          `json:"route_strategy"`
	BlockStrategy        string          `json:"block_strategy"`
	MisfirePolicy        string          `json:"misfire_policy"`
	MisfireMaxCatchUp    int             `json:"misfire_max_catch_up"`
	RetryCount           int             `json:"retry_count"`
	RetryIntervalSeconds int             `json:"retry_interval_seconds"`
	AlarmEmails          []string        `json:"alarm_emails"`
	AlertOnKill          bool            `json:"alert_on_kill"`
	ChildJobIDs          []int64         `json:"child_job_ids"`
	NodeUUID             string          `json:"node_uuid"`
	Revision             int64           `json:"revision"`
	CreatedAt            Time            `json:"created_at"`
	UpdatedAt            Time            `json:"updated_at"`
}

func jobFromStore(j *store.Job) Job {
	params := j.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return Job{
		ID:                   j.ID,
		Name:                 j.Name,
		Group:                j.Group,
		ScheduleType:         j.ScheduleType,
		Schedule:             j.Schedule,
		Timezone:             j.Timezone,
		Handler:              j.Handler,
		Params:               params,
		TimeoutSeconds:       j.TimeoutSeconds,
		Enabled:              j.Enabled,
		Description:          j.Description,
		Author:               j.Author,
		RouteStrategy:        j.RouteStrategy,
		BlockStrategy:        j.BlockStrategy,
		MisfirePolicy:        j.MisfirePolicy,
		MisfireMaxCatchUp:    j.MisfireMaxCatchUp,
		RetryCount:           j.RetryCount,
		RetryIntervalSeconds: j.RetryIntervalSeconds,
		AlarmEmails:          nonNil(j.AlarmEmails),
		AlertOnKill:          j.AlertOnKill,
		ChildJobIDs:          nonNil(j.ChildJobIDs),
		NodeUUID:             j.NodeUUID,
		Revision:             j.Revision,
		CreatedAt:            Time{j.CreatedAt},
		UpdatedAt:            Time{j.UpdatedAt},
	}
}

// nonNil makes a nil list encode as [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Run is one fire of a job on one target as the API shows it.
type Run struct {
	ID     int64  `json:"id"`
	FireID string `json:"fire_id"`
	JobID  int64  `json:"job_id"`
	// JobName is the job's name now ("" once the job is deleted).
	JobName         string `json:"job_name"`
	Trigger         string `json:"trigger"`
	Status          string `json:"status"`
	ScheduledAt     Time   `json:"scheduled_at"`
	DispatchedAt    Time   `json:"dispatched_at"`
	StartedAt       Time   `json:"started_at"`
	FinishedAt      Time   `json:"finished_at"`
	ExitCode        *int   `json:"exit_code"`
	Node            string `json:"node"`
	Output          string `json:"output"`
	OutputTruncated bool   `json:"output_truncated"`
	Message         string `json:"message"`
	// Attempt is the number of attempts made (1 = no retry; 0 = not reported).
	Attempt int `json:"attempt"`
	// ShardIndex and ShardTotal place a SHARDING_BROADCAST run (index from 0).
	ShardIndex int `json:"shard_index"`
	ShardTotal int `json:"shard_total"`
}

func runFromStore(r *store.Run) Run {
	return Run{
		ID:              r.ID,
		FireID:          r.FireID,
		JobID:           r.JobID,
		Trigger:         r.Trigger,
		Status:          r.Status,
		ScheduledAt:     Time{r.ScheduledAt},
		DispatchedAt:    timeOf(r.DispatchedAt),
		StartedAt:       timeOf(r.StartedAt),
		FinishedAt:      timeOf(r.FinishedAt),
		ExitCode:        r.ExitCode,
		Node:            r.Node,
		Output:          r.Output,
		OutputTruncated: r.OutputTruncated,
		Message:         r.Message,
		Attempt:         r.Attempt,
		ShardIndex:      r.ShardIndex,
		ShardTotal:      r.ShardTotal,
	}
}

// List is a page of items with the total count.
type List[T any] struct {
	Items    []T `json:"items"`
	Total    int `json:"total"`
	Page     int `json:"page"`
	PageSize int `json:"page_size"`
}

// TriggerRequest is the optional body of POST /api/v1/jobs/{id}/trigger.
type TriggerRequest struct {
	// Node is the uuid of the node to run on; "" uses the job's routing.
	Node string `json:"node"`
	// Params replaces the job's params for this run only: a JSON object,
	// checked like a job's params (size, the handler's schema).
	Params json.RawMessage `json:"params,omitempty"`
}

// TriggerResponse is the reply to POST /api/v1/jobs/{id}/trigger.
type TriggerResponse struct {
	// Status is always "accepted": the leader will fire it.
	Status string `json:"status"`
	// FireID is the id the leader fires it with ("<job_id>-m<etcd
	// revision>"; a SHARDING_BROADCAST job's runs add "-s<shard index>").
	FireID string `json:"fire_id"`
	// RunID is the run the leader recorded for FireID, when it did so
	// before the reply (the server waits up to its TriggerRunWait); omitted
	// otherwise.
	RunID *int64 `json:"run_id,omitempty"`
}

// StatusResponse is a bare {"status": "..."} reply.
type StatusResponse struct {
	Status string `json:"status"`
}

// Plugin is a handler a node offers.
type Plugin struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Node is a live node as the API shows it.
type Node struct {
	UUID    string   `json:"uuid"`
	Group   string   `json:"group"`
	Address string   `json:"address"`
	Status  string   `json:"status"`
	Plugins []Plugin `json:"plugins"`
	Version string   `json:"version"`
	Started Time     `json:"started"`
	// PluginStatus is every plugin the node saw, refused ones with the
	// reason.
	PluginStatus []PluginStatus `json:"plugin_status"`
}

// PluginStatus is the state of one plugin on a node (cluster.PluginStatus).
type PluginStatus struct {
	Name     string `json:"name"`
	Path     string `json:"path,omitempty"`
	Handler  string `json:"handler,omitempty"`
	Version  string `json:"version,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Restarts int    `json:"restarts"`
	RetryAt  *Time  `json:"retry_at,omitempty"`
}

func nodeFromCluster(n cluster.NodeInfo) Node {
	plugins := make([]Plugin, 0, len(n.Plugins))
	for _, p := range n.Plugins {
		plugins = append(plugins, Plugin{Name: p.Name, Version: p.Version})
	}
	status := make([]PluginStatus, 0, len(n.PluginStatus))
	for _, p := range n.PluginStatus {
		st := PluginStatus{Name: p.Name, Path: p.Path, Handler: p.Handler, Version: p.Version, Protocol: p.Protocol,
			State: p.State, Reason: p.Reason, Message: p.Message, Restarts: p.Restarts}
		if p.RetryAt != nil {
			st.RetryAt = &Time{*p.RetryAt}
		}
		status = append(status, st)
	}
	return Node{
		PluginStatus: status,
		UUID:         n.UUID,
		Group:        n.Group,
		Address:      n.Address(),
		Status:       n.Status,
		Plugins:      plugins,
		Version:      n.Version,
		Started:      Time{n.Started},
	}
}

// NodeList is the reply of GET /api/v1/nodes.
type NodeList struct {
	Items []Node `json:"items"`
}
