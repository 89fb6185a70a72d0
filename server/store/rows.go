package store

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Bun row structs: the storage layer's own types, mapped explicitly to the
// domain types in types.go. Lists (alarm e-mails, child job ids, manual
// group addresses) are stored comma-separated.

type groupRow struct {
	bun.BaseModel `bun:"table:job_groups,alias:g"`

	ID          int64     `bun:"id,pk,autoincrement"`
	AppName     string    `bun:"appname,notnull"`
	Title       string    `bun:"title,notnull"`
	AddressType string    `bun:"address_type,notnull"`
	Addresses   string    `bun:"addresses,notnull"` // comma-separated node uuids
	CreatedAt   time.Time `bun:"created_at,notnull"`
	UpdatedAt   time.Time `bun:"updated_at,notnull"`
}

type jobRow struct {
	bun.BaseModel `bun:"table:jobs,alias:j"`

	ID             int64     `bun:"id,pk,autoincrement"`
	Name           string    `bun:"name,notnull"`
	GroupName      string    `bun:"group_name,notnull"`
	ScheduleType   string    `bun:"schedule_type,notnull"`
	Schedule       string    `bun:"schedule,notnull"`
	Timezone       string    `bun:"timezone,notnull"`
	Handler        string    `bun:"handler,notnull"`
	Params         string    `bun:"params,notnull"`
	TimeoutSeconds int       `bun:"timeout_seconds,notnull"`
	Enabled        bool      `bun:"enabled,notnull"`
	Description    string    `bun:"description,notnull"`
	Author         string    `bun:"author,notnull"`
	RouteStrategy  string    `bun:"route_strategy,notnull"`
	BlockStrategy  string    `bun:"block_strategy,notnull"`
	MisfirePolicy  string    `bun:"misfire_policy,notnull"`
	MisfireCatchUp int       `bun:"misfire_max_catch_up,notnull"`
	RetryCount     int       `bun:"retry_count,notnull"`
	RetryInterval  int       `bun:"retry_interval_seconds,notnull"`
	AlarmEmails    string    `bun:"alarm_emails,notnull"`  // comma-separated
	ChildJobIDs    string    `bun:"child_job_ids,notnull"` // comma-separated ids
	NodeUUID       string    `bun:"node_uuid,notnull"`
	AlertOnKill    bool      `bun:"alert_on_kill,notnull"`
	Revision       int64     `bun:"revision,notnull"`
	CreatedAt      time.Time `bun:"created_at,notnull"`
	UpdatedAt      time.Time `bun:"updated_at,notnull"`
}

// jobWriteColumns are the columns CreateJob writes and UpdateJob overwrites
// (UpdateJob also sets revision and updated_at).
var jobWriteColumns = []string{
	"name", "group_name", "schedule_type", "schedule", "timezone", "handler", "params",
	"timeout_seconds", "enabled", "description", "author",
	"route_strategy", "block_strategy", "misfire_policy", "misfire_max_catch_up",
	"retry_count", "retry_interval_seconds", "alarm_emails", "child_job_ids", "node_uuid",
	"alert_on_kill",
}

type runRow struct {
	bun.BaseModel `bun:"table:runs,alias:r"`

	ID              int64      `bun:"id,pk,autoincrement"`
	FireID          string     `bun:"fire_id,notnull"`
	JobID           int64      `bun:"job_id,notnull"`
	Trigger         string     `bun:"trigger,notnull"`
	Status          string     `bun:"status,notnull"`
	Node            string     `bun:"node,notnull"`
	ScheduledAt     time.Time  `bun:"scheduled_at,notnull"`
	DispatchedAt    *time.Time `bun:"dispatched_at"`
	StartedAt       *time.Time `bun:"started_at"`
	FinishedAt      *time.Time `bun:"finished_at"`
	ExitCode        *int       `bun:"exit_code"`
	Output          string     `bun:"output,notnull"`
	OutputTruncated bool       `bun:"output_truncated,notnull"`
	Message         string     `bun:"message,notnull"`
	Attempt         int        `bun:"attempt,notnull"`
	ShardIndex      int        `bun:"shard_index,notnull"`
	ShardTotal      int        `bun:"shard_total,notnull"`
	CreatedAt       time.Time  `bun:"created_at,notnull"`
	UpdatedAt       time.Time  `bun:"updated_at,notnull"`
}

// runInsertColumns are the columns InsertRuns and ApplyResults write (every
// column but id; MySQL's InsertRuns adds insert_token).
var runInsertColumns = []string{
	"fire_id", "job_id", "trigger", "status", "node", "scheduled_at", "dispatched_at",
	"started_at", "finished_at", "exit_code", "output", "output_truncated", "message",
	"attempt", "shard_index", "shard_total", "created_at", "updated_at",
}

func (r *groupRow) domain() Group {
	return Group{
		ID:          r.ID,
		AppName:     r.AppName,
		Title:       r.Title,
		AddressType: r.AddressType,
		Addresses:   splitList(r.Addresses),
		CreatedAt:   r.CreatedAt.UTC(),
		UpdatedAt:   r.UpdatedAt.UTC(),
	}
}

func groupRowOf(g *Group) groupRow {
	at := g.AddressType
	if at == "" {
		at = AddressAuto
	}
	return groupRow{
		ID:          g.ID,
		AppName:     g.AppName,
		Title:       g.Title,
		AddressType: at,
		Addresses:   strings.Join(g.Addresses, ","),
	}
}

// splitList reads a comma-separated column; "" is nil.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// joinIDs writes ids as a comma-separated column.
func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

// splitIDs reads a comma-separated id column, skipping what is not an id.
func splitIDs(s string) []int64 {
	var ids []int64
	for _, p := range splitList(s) {
		if id, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func jobRowOf(j *Job) jobRow {
	params := string(j.Params)
	if len(j.Params) == 0 || string(j.Params) == "null" {
		params = "{}"
	}
	return jobRow{
		ID:             j.ID,
		Name:           j.Name,
		GroupName:      j.Group,
		ScheduleType:   j.ScheduleType,
		Schedule:       j.Schedule,
		Timezone:       j.Timezone,
		Handler:        j.Handler,
		Params:         params,
		TimeoutSeconds: j.TimeoutSeconds,
		Enabled:        j.Enabled,
		Description:    j.Description,
		Author:         j.Author,
		RouteStrategy:  j.RouteStrategy,
		BlockStrategy:  j.BlockStrategy,
		MisfirePolicy:  j.MisfirePolicy,
		MisfireCatchUp: j.MisfireMaxCatchUp,
		RetryCount:     j.RetryCount,
		RetryInterval:  j.RetryIntervalSeconds,
		AlarmEmails:    strings.Join(j.AlarmEmails, ","),
		ChildJobIDs:    joinIDs(j.ChildJobIDs),
		NodeUUID:       j.NodeUUID,
		AlertOnKill:    j.AlertOnKill,
		Revision:       j.Revision,
		CreatedAt:      j.CreatedAt,
		UpdatedAt:      j.UpdatedAt,
	}
}

func (r *jobRow) domain() Job {
	params := r.Params
	if params == "" {
		params = "{}"
	}
	return Job{
		ID:                   r.ID,
		Name:                 r.Name,
		Group:                r.GroupName,
		ScheduleType:         r.ScheduleType,
		Schedule:             r.Schedule,
		Timezone:             r.Timezone,
		Handler:              r.Handler,
		Params:               json.RawMessage(params),
		TimeoutSeconds:       r.TimeoutSeconds,
		Enabled:              r.Enabled,
		Description:          r.Description,
		Author:               r.Author,
		RouteStrategy:        r.RouteStrategy,
		BlockStrategy:        r.BlockStrategy,
		MisfirePolicy:        r.MisfirePolicy,
		MisfireMaxCatchUp:    r.MisfireCatchUp,
		RetryCount:           r.RetryCount,
		RetryIntervalSeconds: r.RetryInterval,
		AlarmEmails:          splitList(r.AlarmEmails),
		ChildJobIDs:          splitIDs(r.ChildJobIDs),
		NodeUUID:             r.NodeUUID,
		AlertOnKill:          r.AlertOnKill,
		Revision:             r.Revision,
		CreatedAt:            r.CreatedAt.UTC(),
		UpdatedAt:            r.UpdatedAt.UTC(),
	}
}

func (r *runRow) domain() Run {
	return Run{
		ID:              r.ID,
		FireID:          r.FireID,
		JobID:           r.JobID,
		Trigger:         r.Trigger,
		Status:          r.Status,
		Node:            r.Node,
		ScheduledAt:     r.ScheduledAt.UTC(),
		DispatchedAt:    utcPtr(r.DispatchedAt),
		StartedAt:       utcPtr(r.StartedAt),
		FinishedAt:      utcPtr(r.FinishedAt),
		ExitCode:        r.ExitCode,
		Output:          r.Output,
		OutputTruncated: r.OutputTruncated,
		Message:         r.Message,
		Attempt:         r.Attempt,
		ShardIndex:      r.ShardIndex,
		ShardTotal:      r.ShardTotal,
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
}

// utc normalizes a time for storage: UTC, no monotonic reading, microsecond
// precision (what every dialect keeps), so a value written back into a
// domain struct equals what a later read returns.
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// utcPtr is utc for optional times; nil and the zero time stay NULL.
func utcPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := utc(*t)
	return &u
}
