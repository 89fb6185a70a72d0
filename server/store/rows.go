package store

import (
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// Bun row structs: the storage layer's own types, mapped explicitly to the
// domain types in types.go. Columns the domain types do not carry yet
// (jobs.route_strategy, ...) keep their SQL defaults.

type userRow struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID           int64     `bun:"id,pk,autoincrement"`
	Username     string    `bun:"username,notnull"`
	PasswordHash string    `bun:"password_hash,notnull"`
	Role         string    `bun:"role,notnull"`
	CreatedAt    time.Time `bun:"created_at,notnull"`
	UpdatedAt    time.Time `bun:"updated_at,notnull"`
}

type tokenRow struct {
	bun.BaseModel `bun:"table:api_tokens,alias:t"`

	TokenHash string    `bun:"token_hash,pk"`
	UserID    int64     `bun:"user_id,notnull"`
	ExpiresAt time.Time `bun:"expires_at,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

type groupRow struct {
	bun.BaseModel `bun:"table:job_groups,alias:g"`

	ID        int64     `bun:"id,pk,autoincrement"`
	AppName   string    `bun:"appname,notnull"`
	Title     string    `bun:"title,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
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
	Revision       int64     `bun:"revision,notnull"`
	CreatedAt      time.Time `bun:"created_at,notnull"`
	UpdatedAt      time.Time `bun:"updated_at,notnull"`
}

// jobWriteColumns are the columns CreateJob writes and UpdateJob overwrites
// (UpdateJob also sets revision and updated_at).
var jobWriteColumns = []string{
	"name", "group_name", "schedule_type", "schedule", "timezone", "handler", "params",
	"timeout_seconds", "enabled", "description", "author",
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
	CreatedAt       time.Time  `bun:"created_at,notnull"`
	UpdatedAt       time.Time  `bun:"updated_at,notnull"`
}

// runInsertColumns are the columns InsertRuns and ApplyResults write (every
// column but id; MySQL's InsertRuns adds insert_token).
var runInsertColumns = []string{
	"fire_id", "job_id", "trigger", "status", "node", "scheduled_at", "dispatched_at",
	"started_at", "finished_at", "exit_code", "output", "output_truncated", "message",
	"created_at", "updated_at",
}

func (r *userRow) domain() *User {
	return &User{
		ID:           r.ID,
		Username:     r.Username,
		PasswordHash: r.PasswordHash,
		Role:         r.Role,
		CreatedAt:    r.CreatedAt.UTC(),
		UpdatedAt:    r.UpdatedAt.UTC(),
	}
}

func (r *groupRow) domain() Group {
	return Group{
		ID:        r.ID,
		AppName:   r.AppName,
		Title:     r.Title,
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
	}
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
		ID:             r.ID,
		Name:           r.Name,
		Group:          r.GroupName,
		ScheduleType:   r.ScheduleType,
		Schedule:       r.Schedule,
		Timezone:       r.Timezone,
		Handler:        r.Handler,
		Params:         json.RawMessage(params),
		TimeoutSeconds: r.TimeoutSeconds,
		Enabled:        r.Enabled,
		Description:    r.Description,
		Author:         r.Author,
		Revision:       r.Revision,
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
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
