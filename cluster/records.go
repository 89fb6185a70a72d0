package cluster

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Run statuses, as stored in SQL and shown by the API.
const (
	StatusTriggered = "triggered"
	StatusRunning   = "running"
	StatusSuccess   = "success"
	StatusFailed    = "failed"
	StatusTimeout   = "timeout"
	StatusKilled    = "killed"
	StatusLost      = "lost"
	StatusSkipped   = "skipped"
)

// Terminal reports whether a run status is final.
func Terminal(status string) bool {
	switch status {
	case StatusSuccess, StatusFailed, StatusTimeout, StatusKilled, StatusLost, StatusSkipped:
		return true
	}
	return false
}

// Trigger kinds of a fire.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// FireID is the deterministic id of a scheduled fire: job id and scheduled
// instant in Unix milliseconds, "<job_id>-<unix_ms>". Replays of the same
// fire get the same id.
func FireID(jobID int64, scheduled time.Time) string {
	return strconv.FormatInt(jobID, 10) + "-" + strconv.FormatInt(scheduled.UnixMilli(), 10)
}

// ShardFireID is the id of one shard of a SHARDING_BROADCAST fire:
// FireID(jobID, scheduled) + "-s<index>" (index counts from 0).
func ShardFireID(jobID int64, scheduled time.Time, index int) string {
	return FireID(jobID, scheduled) + "-s" + strconv.Itoa(index)
}

// ManualFireID is the id of a "run once now" fire: "<job_id>-m<etcd mod revision>".
func ManualFireID(jobID int64, modRevision int64) string {
	return strconv.FormatInt(jobID, 10) + "-m" + strconv.FormatInt(modRevision, 10)
}

// JobIDOfFire returns the job id a fire id belongs to.
func JobIDOfFire(fireID string) (int64, error) {
	i := strings.IndexByte(fireID, '-')
	if i <= 0 {
		return 0, fmt.Errorf("cluster: malformed fire id %q", fireID)
	}
	return strconv.ParseInt(fireID[:i], 10, 64)
}

// ScheduledMilliOfFire returns the scheduled instant (Unix ms) a scheduled
// fire's id names (FireID, ShardFireID); ok is false for a manual fire's
// id or a malformed one.
func ScheduledMilliOfFire(fireID string) (ms int64, ok bool) {
	i := strings.IndexByte(fireID, '-')
	if i <= 0 {
		return 0, false
	}
	rest := fireID[i+1:]
	if j := strings.IndexByte(rest, '-'); j >= 0 {
		if !strings.HasPrefix(rest[j:], "-s") {
			return 0, false
		}
		rest = rest[:j]
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	return ms, err == nil
}

// HandlerInfo is the value of /Cronix/handler/<name>/<node_uuid>: a
// handler's description as one node's plugin reported it.
type HandlerInfo struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Description  string          `json:"description,omitempty"`
	ParamsSchema json.RawMessage `json:"params_schema,omitempty"`
	// Node is the uuid of the publishing node.
	Node string `json:"node"`
}

// PluginInfo names one handler a node offers.
type PluginInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// NodeInfo is the value of /Cronix/node/<uuid>.
type NodeInfo struct {
	UUID    string       `json:"uuid"`
	Group   string       `json:"group"`
	IP      string       `json:"ip"`
	Port    int          `json:"port"`
	Version string       `json:"version"`
	Plugins []PluginInfo `json:"plugins"`
	Started time.Time    `json:"started"`
	Status  string       `json:"status"`
	// PluginStatus is the state of every plugin the node was configured
	// with or found in its plugin dir, refused ones included with the
	// reason, so an operator sees why a handler is missing without the
	// node's log.
	PluginStatus []PluginStatus `json:"plugin_status,omitempty"`
	// Scheme is "https" when the node's endpoint serves TLS; "" means http.
	Scheme string `json:"scheme,omitempty"`
	// Features lists what this node's agent understands beyond the base
	// protocol (FeatureStartAt); the leader uses a feature only when every
	// live node offers it, so a cluster being upgraded keeps working.
	Features []string `json:"features,omitempty"`
}

// FeatureStartAt: the node holds a dispatch whose StartAt is in the future
// until that time (dispatch ahead, see Dispatch.StartAt).
const FeatureStartAt = "start_at"

// HasFeature reports whether the node advertises feature f.
func (n NodeInfo) HasFeature(f string) bool {
	for _, x := range n.Features {
		if x == f {
			return true
		}
	}
	return false
}

// Plugin states (PluginStatus.State).
const (
	PluginLoaded  = "loaded"  // serving its handler
	PluginRefused = "refused" // not started, or started and rejected; see Reason
	PluginBackoff = "backoff" // crashed or failed to restart; next start at RetryAt
	PluginStopped = "stopped" // the node stopped it
)

// Reasons a plugin is refused or backing off (PluginStatus.Reason).
const (
	PluginReasonMissingChecksum  = "missing_checksum"   // no pinned checksum for a plugin-dir binary
	PluginReasonChecksumMismatch = "checksum_mismatch"  // the binary's SHA-256 is not the pinned one
	PluginReasonHandlerNotPinned = "handler_not_pinned" // it serves a handler its pinned entry does not name
	PluginReasonConflict         = "conflict"           // another plugin already serves its handler
	PluginReasonHandshakeFailed  = "handshake_failed"   // not a Cronix plugin, or an unsupported protocol version
	PluginReasonDescribeFailed   = "describe_failed"    // no valid answer to Info (Describe) in time
	PluginReasonCrashLoop        = "crash_loop"         // crashed again soon after each restart
)

// PluginStatus is the state of one plugin on a node.
type PluginStatus struct {
	// Name is the plugin's name: its checksum entry / file name without
	// the cronix-plugin- prefix, or a built-in's name.
	Name string `json:"name"`
	// Path is the plugin's executable.
	Path string `json:"path,omitempty"`
	// Handler is the handler it serves (empty when it never answered).
	Handler string `json:"handler,omitempty"`
	// Version is the handler's version.
	Version string `json:"version,omitempty"`
	// Protocol is the negotiated plugin protocol version.
	Protocol int `json:"protocol,omitempty"`
	// State is PluginLoaded, PluginRefused, PluginBackoff or PluginStopped.
	State string `json:"state"`
	// Reason classifies a refusal or backoff (PluginReason*).
	Reason string `json:"reason,omitempty"`
	// Message says what went wrong, for people.
	Message string `json:"message,omitempty"`
	// Restarts counts the restarts after a crash since the node started.
	Restarts int `json:"restarts,omitempty"`
	// RetryAt is when a backing-off plugin is started again at the
	// earliest (UTC).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// Address is "ip:port" of the node.
func (n NodeInfo) Address() string { return n.IP + ":" + strconv.Itoa(n.Port) }

// BaseURL is the node's endpoint URL, e.g. "https://10.0.0.7:41234".
func (n NodeInfo) BaseURL() string {
	scheme := n.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + n.Address()
}

// HasHandler reports whether the node offers the named handler.
func (n NodeInfo) HasHandler(name string) bool {
	for _, p := range n.Plugins {
		if p.Name == name {
			return true
		}
	}
	return false
}

// JobConfig is what a node needs to run a job: the value of
// /Cronix/job/<node>/<job_id>, and embedded in every Dispatch so a fire is
// self-contained.
type JobConfig struct {
	JobID          int64           `json:"job_id"`
	Name           string          `json:"name"`
	Group          string          `json:"group"`
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Revision       int64           `json:"revision"`
	// RetryCount is how many times a failed run is retried on the node.
	RetryCount int `json:"retry_count,omitempty"`
	// RetryIntervalSeconds is the pause between attempts; 0 = growing backoff.
	RetryIntervalSeconds int `json:"retry_interval_seconds,omitempty"`
	// BlockStrategy says what the node does with a fire while the job still
	// runs: BlockSerial (default), BlockDiscardLater or BlockCoverEarly.
	BlockStrategy string `json:"block_strategy,omitempty"`
}

// Block strategies (seed 001): what a node does with a new fire of a job that
// is still running there.
const (
	BlockSerial       = "SERIAL_EXECUTION" // queue it behind the running one
	BlockDiscardLater = "DISCARD_LATER"    // record the new fire as skipped
	BlockCoverEarly   = "COVER_EARLY"      // kill the running one, run the new one
)

// Route strategies (seed 001): how the leader picks the node(s) of a fire
// among the live nodes of the job's group.
const (
	RouteFirst              = "FIRST"
	RouteLast               = "LAST"
	RouteRound              = "ROUND"
	RouteRandom             = "RANDOM"
	RouteConsistentHash     = "CONSISTENT_HASH"
	RouteLeastFrequentlyUse = "LEAST_FREQUENTLY_USED"
	RouteLeastRecentlyUsed  = "LEAST_RECENTLY_USED"
	RouteFailover           = "FAILOVER"
	RouteBusyover           = "BUSYOVER"
	RouteShardingBroadcast  = "SHARDING_BROADCAST"
)

// Misfire policies: what the leader does with fires that fell due while no
// leader ran.
const (
	MisfireDoNothing   = "DO_NOTHING"    // record them as skipped
	MisfireFireOnceNow = "FIRE_ONCE_NOW" // one fire now for the latest missed time (default)
	MisfireCatchUp     = "CATCH_UP"      // every missed fire, bounded per job
)

// Dispatch is the value of /Cronix/run/<node>/<fire_id>: one fire for one node.
type Dispatch struct {
	FireID      string    `json:"fire_id"`
	Trigger     string    `json:"trigger"`
	ScheduledAt time.Time `json:"scheduled_at"`
	// DispatchedAt is when the leader sent it (for lateness accounting).
	DispatchedAt time.Time `json:"dispatched_at"`
	// Term is the raft term of the leader that dispatched it.
	Term uint64    `json:"term"`
	Job  JobConfig `json:"job"`
	// ShardIndex and ShardTotal are set for SHARDING_BROADCAST (index counts from 0).
	ShardIndex int `json:"shard_index,omitempty"`
	ShardTotal int `json:"shard_total,omitempty"`
	// StartAt, when set, is the earliest time the node may start the
	// handler: the leader dispatched the fire ahead of its scheduled time
	// (it is then ScheduledAt) and the node holds it until then. Zero means
	// start at once. Only sent to nodes offering FeatureStartAt.
	StartAt time.Time `json:"start_at,omitzero"`
}

// RunResult is what a node reports about a fire. Reports are idempotent by
// FireID: a terminal status is never overwritten.
type RunResult struct {
	FireID          string     `json:"fire_id"`
	JobID           int64      `json:"job_id"`
	Trigger         string     `json:"trigger"`
	Node            string     `json:"node"`
	Status          string     `json:"status"`
	ScheduledAt     time.Time  `json:"scheduled_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	ExitCode        *int       `json:"exit_code,omitempty"`
	Output          string     `json:"output"`
	OutputTruncated bool       `json:"output_truncated"`
	Message         string     `json:"message,omitempty"`
	// Attempt is the number of attempts made so far (1 = no retry yet).
	Attempt int `json:"attempt,omitempty"`
}

// ResultBatch is the body of POST /api/v1/internal/results (node → server).
type ResultBatch struct {
	Results []RunResult `json:"results"`
}

// ResultAck is the reply to a ResultBatch: every result was stored (or was
// already stored) when the server answers 200.
type ResultAck struct {
	Accepted int `json:"accepted"`
}

// OnceRequest is the value of /Cronix/once/<job_id>.
type OnceRequest struct {
	// Node is the target node uuid, or "" for the job's normal routing.
	Node        string    `json:"node"`
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by,omitempty"`
	// Params, when set, replaces the job's params for this fire only (a JSON
	// object, validated by the API against the handler's schema).
	Params json.RawMessage `json:"params,omitempty"`
}

// ProcInfo is the value of /Cronix/proc/<node>/<job_id>/<pid>.
type ProcInfo struct {
	PID     int       `json:"pid"`
	FireID  string    `json:"fire_id"`
	Started time.Time `json:"started"`
	Killed  bool      `json:"killed"`
}

// ServerRaftStatus is the value of /registry/cronix/server/<ip>:<port>/status:
// a non-voter's own raft progress, refreshed every second under its lease.
type ServerRaftStatus struct {
	ID            string    `json:"id"`
	AppliedIndex  uint64    `json:"applied_index"`
	LastContactMs int64     `json:"last_contact_ms"`
	Updated       time.Time `json:"updated"`
}

// ServerInfo is the value of /registry/cronix/server/<ip>:<port>/data.
type ServerInfo struct {
	ID      string    `json:"id"`
	URL     string    `json:"url"`
	Version string    `json:"version"`
	Started time.Time `json:"started"`
}

// LeaderValue encodes the fence value of a leader: zero-padded term so that
// byte order equals numeric order, then the server id.
func LeaderValue(term uint64, serverID string) string {
	return fmt.Sprintf("%020d/%s", term, serverID)
}

// ParseLeaderValue decodes a LeaderValue.
func ParseLeaderValue(v string) (term uint64, serverID string, err error) {
	t, id, ok := strings.Cut(v, "/")
	if !ok {
		return 0, "", fmt.Errorf("cluster: malformed leader value %q", v)
	}
	term, err = strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("cluster: malformed leader term in %q: %w", v, err)
	}
	return term, id, nil
}

// SystemInfo is the value of /Cronix/system/get/<node>: what a node reports
// about its machine when asked through /Cronix/system/switch/<node>.
type SystemInfo struct {
	Node          string      `json:"node"`
	Hostname      string      `json:"hostname"`
	OS            string      `json:"os"`
	Platform      string      `json:"platform,omitempty"`
	UptimeSeconds uint64      `json:"uptime_seconds"`
	CollectedAt   time.Time   `json:"collected_at"`
	CPUCount      int         `json:"cpu_count"`
	CPUPercent    float64     `json:"cpu_percent"`
	MemoryTotal   uint64      `json:"memory_total"`
	MemoryUsed    uint64      `json:"memory_used"`
	MemoryPercent float64     `json:"memory_percent"`
	Load1         float64     `json:"load1"`
	Load5         float64     `json:"load5"`
	Load15        float64     `json:"load15"`
	Disks         []DiskUsage `json:"disks"`
	Errors        []string    `json:"errors,omitempty"`
}

// DiskUsage is the usage of the file system holding Path.
type DiskUsage struct {
	Path        string  `json:"path"`
	Total       uint64  `json:"total"`
	Used        uint64  `json:"used"`
	Free        uint64  `json:"free"`
	UsedPercent float64 `json:"used_percent"`
}

// DecodeDispatch decodes the body of a run record read from the key of
// fire keyFire, signed under term: the fire id, when present, must be the
// key's, and the dispatch's own term, when present, the signed one.
func DecodeDispatch(body []byte, keyFire string, term uint64) (Dispatch, error) {
	var d Dispatch
	if err := json.Unmarshal(body, &d); err != nil {
		return Dispatch{}, fmt.Errorf("decode dispatch: %w", err)
	}
	if d.FireID == "" {
		d.FireID = keyFire
	}
	if d.FireID != keyFire {
		return Dispatch{}, fmt.Errorf("fire id %q does not match its key", d.FireID)
	}
	if d.Term != 0 && d.Term != term {
		return Dispatch{}, fmt.Errorf("dispatch term %d is not its signed term %d", d.Term, term)
	}
	d.Term = term
	return d, nil
}

// KillRequest is the value of /Cronix/kill/<node>/<fire_id> (signed).
type KillRequest struct {
	FireID      string    `json:"fire_id"`
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by,omitempty"`
	// Cancel, when set, asks the node to drop the fire only if it has not
	// started yet (a fire dispatched ahead whose job was disabled or
	// deleted meanwhile): it is reported skipped with this message. A fire
	// already running is left alone.
	Cancel string `json:"cancel,omitempty"`
}

// SystemRequest is the value of /Cronix/system/switch/<node> (signed).
type SystemRequest struct {
	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"by,omitempty"`
}

// SecurityEvent is a record a node refused to act on (unsigned, mis-signed,
// replayed or of a stale term), as the node reports it.
type SecurityEvent struct {
	// At is when the node refused it.
	At time.Time `json:"at"`
	// Kind: unsigned_record, bad_signature, stale_term or malformed_record.
	Kind string `json:"kind"`
	// Key is the refused record's etcd key.
	Key string `json:"key"`
	// Reason says why, without the record's content.
	Reason string `json:"reason"`
}

// SecurityEventBatch is the body of POST /api/v1/internal/security-events
// (node → server).
type SecurityEventBatch struct {
	Node   string          `json:"node"`
	Events []SecurityEvent `json:"events"`
}
