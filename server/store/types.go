package store

import (
	"encoding/json"
	"errors"
	"time"
)

// Errors callers branch on. Wrapped errors keep them reachable with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint (user name, group appname, ...) was violated.
	ErrConflict = errors.New("conflict")
)

// Roles of a user.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// User is a person who logs in.
type User struct {
	ID           int64
	Username     string
	PasswordHash string // bcrypt
	Role         string // RoleAdmin or RoleUser
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Group is an xxl-job "executor": an appname whose nodes run its jobs.
type Group struct {
	ID        int64
	AppName   string
	Title     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Job is a job definition.
type Job struct {
	ID             int64
	Name           string
	Group          string // group appname
	ScheduleType   string // "cron" (more types later)
	Schedule       string
	Timezone       string // IANA name, "" = server default
	Handler        string
	Params         json.RawMessage // JSON object, never nil when stored ("{}")
	TimeoutSeconds int
	Enabled        bool
	Description    string
	Author         string
	// RouteStrategy is a cluster.Route* name ("" = FIRST... see the API default).
	RouteStrategy string
	// BlockStrategy is a cluster.Block* name.
	BlockStrategy string
	// MisfirePolicy is a cluster.Misfire* name.
	MisfirePolicy string
	// MisfireMaxCatchUp bounds CATCH_UP fires per job (0 = the server default).
	MisfireMaxCatchUp int
	// RetryCount and RetryIntervalSeconds: node-side retries of a failed run.
	RetryCount           int
	RetryIntervalSeconds int
	// AlarmEmails receive failure alerts.
	AlarmEmails []string
	// ChildJobIDs fire when a run of this job succeeds.
	ChildJobIDs []int64
	// NodeUUID pins the job to one node (seed 002 "single node" scope); "" = route in the group.
	NodeUUID  string
	Revision  int64 // starts at 1, bumped by every update
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Run is one fire of a job on one target, unique by FireID.
type Run struct {
	ID              int64
	FireID          string
	JobID           int64
	Trigger         string // cluster.TriggerSchedule or cluster.TriggerManual
	Status          string // cluster.Status*
	Node            string // node uuid, "" until known
	ScheduledAt     time.Time
	DispatchedAt    *time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	ExitCode        *int
	Output          string
	OutputTruncated bool
	Message         string
	Attempt         int // attempts made (1 = no retry)
	ShardIndex      int
	ShardTotal      int
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Page selects a page of a list: Page counts from 1.
type Page struct {
	Page     int
	PageSize int
}

// Offset is the row offset of the page.
func (p Page) Offset() int {
	if p.Page < 1 {
		return 0
	}
	return (p.Page - 1) * p.PageSize
}
