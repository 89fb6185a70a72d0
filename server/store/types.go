package store

import (
	"encoding/json"
	"errors"
	"math"
	"time"
)

// Errors callers branch on. Wrapped errors keep them reachable with errors.Is.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint (user name, group appname, ...) was violated.
	ErrConflict = errors.New("conflict")
)

// Roles of a user, from most to least powerful (server/authz says what
// each may do).
const (
	RoleAdmin    = "admin"
	RoleOperator = "operator"
	RoleViewer   = "viewer"
)

// User is a person who logs in.
type User struct {
	ID           int64
	Username     string
	PasswordHash string // bcrypt
	Role         string // RoleAdmin, RoleOperator or RoleViewer
	Disabled     bool
	// Groups are the ids of the groups granted to the user, ascending.
	Groups    []int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Group is an xxl-job "executor": an appname whose nodes run its jobs.
type Group struct {
	ID      int64
	AppName string
	Title   string
	// AddressType is AddressAuto (members are the live nodes registered with
	// this group) or AddressManual (members are Addresses). "" is stored as auto.
	AddressType string
	// Addresses are the node uuids of a manual group, in order.
	Addresses []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Address types of a group (xxl-job addressType 0 and 1).
const (
	AddressAuto   = "auto"
	AddressManual = "manual"
)

// GroupFilter selects groups; empty fields match every group.
type GroupFilter struct {
	// Scope, when non-nil, keeps only the groups whose ids it lists.
	Scope *Scope
	// AppName and Title match groups whose appname/title contain them (case-insensitive).
	AppName string
	Title   string
}

// Job sort orders of JobFilter.Sort.
const (
	SortIDAsc         = "id"
	SortIDDesc        = "-id"
	SortNameAsc       = "name"
	SortNameDesc      = "-name"
	SortUpdatedAtAsc  = "updated_at"
	SortUpdatedAtDesc = "-updated_at"
)

// JobSorts lists every JobFilter.Sort value.
var JobSorts = []string{SortIDAsc, SortIDDesc, SortNameAsc, SortNameDesc, SortUpdatedAtAsc, SortUpdatedAtDesc}

// JobFilter selects jobs; zero fields match every job.
type JobFilter struct {
	// Scope, when non-nil, keeps only the jobs of the groups it lists.
	Scope    *Scope
	Group    string // exact group appname
	Enabled  *bool
	Handler  string // exact handler name
	Author   string // exact author
	NameLike string // name contains it (case-insensitive)
	// Search keeps the jobs whose name or description contains it (case-insensitive).
	Search string
	// ScheduleType: exact schedule type (cron, fixed_rate, fixed_delay, once, none).
	ScheduleType string
	// LastStatus keeps the jobs whose latest run (by scheduled time, then
	// id: the run a job's run list shows first) has this status; LastStatusNone
	// keeps the jobs that have no run.
	LastStatus string
	// Sort is one of JobSorts; "" = SortIDAsc. Ties break by id.
	Sort string
}

// LastStatusNone is the JobFilter.LastStatus of jobs that never ran.
const LastStatusNone = "none"

// RunFilter selects runs; zero fields match every run.
type RunFilter struct {
	// Scope, when non-nil, keeps only the runs of jobs of the groups it lists.
	Scope  *Scope
	JobID  int64
	Status string
	Node   string
	// From (inclusive) and To (exclusive) bound ScheduledAt; zero = open.
	From time.Time
	To   time.Time
}

// Finished is a run an ApplyResultsFinished call moved to a terminal status.
type Finished struct {
	FireID string
	JobID  int64
	Status string
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
	// AlertOnKill: a killed run of this job raises a run.killed alert.
	AlertOnKill bool
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

// Offset is the row offset of the page; one past any table when it would
// overflow.
func (p Page) Offset() int {
	if p.Page < 1 {
		return 0
	}
	if p.PageSize > 0 && p.Page-1 > math.MaxInt/p.PageSize {
		return math.MaxInt
	}
	return (p.Page - 1) * p.PageSize
}
