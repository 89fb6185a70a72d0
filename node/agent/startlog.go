package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cronix/cronix/cluster"
)

// startLogName is the start journal in the spool directory.
const startLogName = "started.log"

// startLogCompactAt is the size past which the journal is rewritten with
// only the fires still running.
const startLogCompactAt = 1 << 20

// startEntry is one line of the start journal: enough of a fire to report
// it after a crash, or (Ended) the mark that a fire's run is over.
type startEntry struct {
	FireID      string    `json:"fire_id"`
	JobID       int64     `json:"job_id,omitempty"`
	Trigger     string    `json:"trigger,omitempty"`
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	// Ended marks a fire whose run key was deleted after its result was
	// stored: its earlier start line no longer means "in progress".
	Ended bool `json:"ended,omitempty"`
}

// startLog records that this node called a handler for a fire, before the
// call. A fire whose start is in the journal but whose result never reached
// the spool was cut off by a crash of the node process (kill -9, OOM kill):
// its run key is still in etcd, and without the journal the restarted node
// would run it a second time. With it, the restarted node reports the fire
// `lost` instead (see interruptedResult).
//
// Once a fire's run key is deleted (its result was stored), an end line
// ({"fire_id":…,"ended":true}) follows its start line, one write for every
// fire of a deletion batch; a fire is in progress for the next process only
// if it has a start line and no end line (and, checked by Start, its run
// key still exists: a crash between the deletion and the end line leaves a
// fire that is over, not in progress).
//
// Entries are written with one write(2) each and not fsynced: they survive
// the death of the process, not of the machine (a machine crash can still
// re-run the fires that were in flight). The journal is rewritten with only
// the running fires when it passes startLogCompactAt.
type startLog struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	size    int64
	running map[string][]byte   // fire id → its journal line
	over    map[string]struct{} // fires whose result is queued; end line due once their key is deleted
}

// openStartLog reads the journal left by the previous process in dir and
// starts a new, empty one. It returns the previous process's entries.
func openStartLog(dir string) (*startLog, []startEntry, error) {
	path := filepath.Join(dir, startLogName)
	prev, err := readStartLog(path)
	if err != nil {
		return nil, nil, err
	}
	l := &startLog{path: path, running: map[string][]byte{}, over: map[string]struct{}{}}
	if err := l.rewrite(); err != nil {
		return nil, nil, err
	}
	return l, prev, nil
}

// readStartLog returns the fires of the journal at path that have a start
// line and no end line, in start order.
func readStartLog(path string) ([]startEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start journal: %w", err)
	}
	defer f.Close()
	var starts []startEntry
	ended := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e startEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.FireID == "" {
			continue // a torn last line is skipped
		}
		if e.Ended {
			ended[e.FireID] = true
			continue
		}
		starts = append(starts, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("start journal: read %s: %w", path, err)
	}
	out := starts[:0]
	for _, e := range starts {
		if !ended[e.FireID] {
			out = append(out, e)
		}
	}
	return out, nil
}

// started records e before its handler is called.
func (l *startLog) started(e startEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running[e.FireID] = line
	if l.size+int64(len(line)) > startLogCompactAt {
		return l.rewrite()
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("start journal: %w", err)
	}
	return nil
}

// ended forgets a fire whose result is queued (and so in the spool); its
// end line is written once its run key is deleted (keysDeleted).
func (l *startLog) ended(fireID string) {
	l.mu.Lock()
	if _, ok := l.running[fireID]; ok {
		delete(l.running, fireID)
		l.over[fireID] = struct{}{}
	}
	l.mu.Unlock()
}

// keysDeleted writes the end lines of the journalled fires among ids, whose
// run keys were just deleted, in one write.
func (l *startLog) keysDeleted(ids []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var buf []byte
	for _, id := range ids {
		if _, ok := l.over[id]; !ok {
			continue
		}
		delete(l.over, id)
		line, err := json.Marshal(startEntry{FireID: id, Ended: true})
		if err != nil {
			return fmt.Errorf("start journal: encode end of %s: %w", id, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if len(buf) == 0 || l.f == nil {
		return nil
	}
	if l.size+int64(len(buf)) > startLogCompactAt {
		return l.rewrite()
	}
	n, err := l.f.Write(buf)
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("start journal: %w", err)
	}
	return nil
}

// rewrite replaces the journal with the running fires' lines. Caller holds mu
// (or has the only reference).
func (l *startLog) rewrite() error {
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start journal: %w", err)
	}
	var size int64
	for _, line := range l.running {
		n, err := f.Write(line)
		size += int64(n)
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("start journal: %w", err)
		}
	}
	if err := os.Rename(tmp, l.path); err != nil {
		_ = f.Close()
		return fmt.Errorf("start journal: %w", err)
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f, l.size = f, size
	return nil
}

// close closes the journal file.
func (l *startLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// interruptedResult is the `lost` report of a fire the previous process
// started but never finished.
func (a *Agent) interruptedResult(e startEntry) cluster.RunResult {
	started := e.StartedAt
	now := time.Now().UTC()
	return cluster.RunResult{
		FireID:      e.FireID,
		JobID:       e.JobID,
		Trigger:     e.Trigger,
		Node:        a.cfg.UUID,
		Status:      cluster.StatusLost,
		ScheduledAt: e.ScheduledAt,
		StartedAt:   &started,
		FinishedAt:  &now,
		Attempt:     1,
		Message:     "the node process stopped while this run was in progress; it is not run again (its outcome is unknown)",
	}
}
