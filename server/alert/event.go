package alert

import (
	"context"
	"time"
)

// Event kinds.
const (
	KindRunFailed       = "run.failed"
	KindRunTimeout      = "run.timeout"
	KindRunLost         = "run.lost"
	KindRunKilled       = "run.killed"
	KindScheduleMissed  = "schedule.missed"
	KindJobRecovered    = "job.recovered"
	KindNodeDown        = "node.down"
	KindClusterNoLeader = "cluster.no_leader"
	KindSecurity        = "security"
	KindTest            = "test"
)

// Kinds lists every event kind.
var Kinds = []string{
	KindRunFailed, KindRunTimeout, KindRunLost, KindRunKilled, KindScheduleMissed, KindJobRecovered,
	KindNodeDown, KindClusterNoLeader, KindSecurity, KindTest,
}

// failureKinds open (or continue) a job's failure episode; job.recovered
// closes it.
var failureKinds = []string{KindRunFailed, KindRunTimeout, KindRunLost}

func isFailure(kind string) bool {
	for _, k := range failureKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Event is an alert event to raise.
type Event struct {
	// Kind is one of the Kind* constants.
	Kind string
	// Key deduplicates the event: raising an event whose key was raised
	// before does nothing. Required; e.g. "run.failed:<fire id>".
	Key string
	// JobID is the job the event is about (0: none, e.g. cluster.no_leader).
	JobID int64
	// JobName, Group: filled from the job when JobID is set and they are empty.
	JobName string
	Group   string
	// RunID and FireID name the run, if any.
	RunID  int64
	FireID string
	// Node is the node uuid, if any.
	Node string
	// RunStatus is the run's status, if any.
	RunStatus string
	// ExitCode of the run's process, if known.
	ExitCode *int
	// Message says what happened, fit for a person.
	Message string
	// OutputTail is the end of the run's output.
	OutputTail string
	// OccurredAt is when it happened (zero = now).
	OccurredAt time.Time
}

// Raiser raises alert events. Raise records the event durably in the
// outbox (a duplicate Key is dropped silently) and returns; channels
// deliver it afterwards. It is what other components call to alert people,
// e.g. a node security event:
//
//	err := raiser.Raise(ctx, alert.Event{Kind: alert.KindSecurity, Key: "security:" + id,
//		Node: nodeUUID, Message: "plugin checksum mismatch: notify"})
type Raiser interface {
	Raise(ctx context.Context, ev Event) error
}
