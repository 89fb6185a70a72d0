package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
// Writes are group-committed: lines are appended to a pending buffer under
// mu (a map update and a copy, never I/O), and one caller at a time — the
// writer — hands the whole buffer to the file with one write(2), outside
// mu. started returns only once the write(2) holding its line has
// returned, so a start is in the file (the kernel's page cache) before its
// handler is called; the starts of one dispatch batch share a few writes
// instead of queueing for one lock each. ended only touches the maps and
// never waits for the file; keysDeleted queues its end lines and does not
// wait either (the writer that is active, or keysDeleted itself, writes
// them). Entries are not fsynced: they survive the death of the process,
// not of the machine (a machine crash can still re-run the fires that were
// in flight). The journal is rewritten with only the running fires when it
// passes startLogCompactAt.
type startLog struct {
	path string

	mu   sync.Mutex
	cond *sync.Cond // signalled when a buffer was written or the writer role is free
	// f and size belong to the writer (writing true), or to whoever holds
	// mu while writing is false.
	f       *os.File
	size    int64
	running map[string][]byte   // fire id → its journal line
	over    map[string]struct{} // fires whose result is queued; end line due once their key is deleted
	pending []byte              // lines queued for the next write, in order
	spare   []byte              // a written buffer kept for reuse
	gen     uint64              // generation of pending: the number of buffers taken so far + 1
	written uint64              // the last generation whose write(2) returned
	waiters int                 // started calls waiting for their generation
	writing bool                // a caller is writing outside mu
	errGen  uint64              // generation of the last failed write
	err     error               // its error
}

// openStartLog reads the journal left by the previous process in dir and
// starts a new, empty one. It returns the previous process's entries.
func openStartLog(dir string) (*startLog, []startEntry, error) {
	path := filepath.Join(dir, startLogName)
	prev, err := readStartLog(path)
	if err != nil {
		return nil, nil, err
	}
	l := &startLog{path: path, running: map[string][]byte{}, over: map[string]struct{}{}, gen: 1}
	l.cond = sync.NewCond(&l.mu)
	f, size, err := l.rewriteFile(nil)
	if err != nil {
		return nil, nil, err
	}
	l.f, l.size = f, size
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

// appendStartLine appends e's journal line, newline included, to b: what
// json.Marshal writes, built by hand for the usual plain ASCII fire ids
// and triggers (one fewer reflection pass per start).
func appendStartLine(b []byte, e startEntry) ([]byte, error) {
	if !plainJSON(e.FireID) || !plainJSON(e.Trigger) {
		line, err := json.Marshal(e)
		if err != nil {
			return b, err
		}
		return append(append(b, line...), '\n'), nil
	}
	b = append(append(append(b, `{"fire_id":"`...), e.FireID...), '"')
	if e.JobID != 0 {
		b = strconv.AppendInt(append(b, `,"job_id":`...), e.JobID, 10)
	}
	if e.Trigger != "" {
		b = append(append(append(b, `,"trigger":"`...), e.Trigger...), '"')
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"scheduled_at", e.ScheduledAt}, {"started_at", e.StartedAt}} {
		if f.t.IsZero() {
			continue
		}
		v, err := f.t.MarshalJSON()
		if err != nil {
			return b, err
		}
		b = append(append(append(append(b, `,"`...), f.name...), `":`...), v...)
	}
	if e.Ended {
		b = append(b, `,"ended":true`...)
	}
	return append(b, "}\n"...), nil
}

// plainJSON reports whether json.Marshal writes s as it is between quotes.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// started records e before its handler is called: it returns once the
// write(2) that holds e's line has returned (startedBatch of one).
func (l *startLog) started(e startEntry) error {
	return l.startedBatch([]startEntry{e})
}

// startedBatch records the starts of es together (one buffer, usually
// one write(2)): it returns once the write holding their lines returned.
func (l *startLog) startedBatch(es []startEntry) error {
	buf := make([]byte, 0, 160*len(es))
	ends := make([]int, len(es))
	for i, e := range es {
		var err error
		if buf, err = appendStartLine(buf, e); err != nil {
			return fmt.Errorf("start journal: encode start of %s: %w", e.FireID, err)
		}
		ends[i] = len(buf)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	from := 0
	for i, e := range es {
		l.running[e.FireID] = buf[from:ends[i]:ends[i]]
		from = ends[i]
	}
	l.pending = append(l.pending, buf...)
	my := l.gen
	l.waiters++
	for l.written < my && l.writing {
		l.cond.Wait()
	}
	l.waiters--
	if l.written < my {
		l.writeLocked(my)
	}
	if l.errGen == my {
		return l.err
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

// keysDeleted queues the end lines of the journalled fires among ids, whose
// run keys were just deleted; they go to the file in the next write, made
// now unless a writer is active (which then writes them). It does not wait
// for a write made by another caller and reports only its own write's error.
func (l *startLog) keysDeleted(ids []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.pending)
	for _, id := range ids {
		if _, ok := l.over[id]; !ok {
			continue
		}
		delete(l.over, id)
		var err error
		if l.pending, err = appendStartLine(l.pending, startEntry{FireID: id, Ended: true}); err != nil {
			return fmt.Errorf("start journal: encode end of %s: %w", id, err)
		}
	}
	if len(l.pending) == n || l.writing || l.f == nil {
		return nil
	}
	my := l.gen
	l.writeLocked(my)
	if l.errGen == my {
		return l.err
	}
	return nil
}

// writeLocked takes the writer role and writes pending buffers until
// generation my is written; it keeps writing while lines are left and no
// started call waits to take over (end lines have no one else to write
// them). Caller holds mu and writing is false; mu is released during I/O.
func (l *startLog) writeLocked(my uint64) {
	l.writing = true
	defer func() {
		l.writing = false
		l.cond.Broadcast()
	}()
	for len(l.pending) > 0 && (l.written < my || l.waiters == 0) {
		buf, g := l.pending, l.gen
		l.pending, l.spare = l.spare[:0], nil
		l.gen++
		var err error
		if l.f == nil {
			err = errors.New("start journal: closed")
		} else if l.size+int64(len(buf)) > startLogCompactAt {
			err = l.compactLocked()
		} else {
			f := l.f
			l.mu.Unlock()
			var n int
			n, err = f.Write(buf)
			l.mu.Lock()
			l.size += int64(n)
			if err != nil {
				err = fmt.Errorf("start journal: %w", err)
			}
		}
		if err != nil {
			l.errGen, l.err = g, err
		}
		l.written = g
		l.spare = buf[:0]
		l.cond.Broadcast()
	}
}

// compactLocked replaces the journal with the running fires' lines (which
// include every start line of the buffer just taken that is still
// running; end lines are moot in a file without their start lines). Caller
// holds mu and the writer role; mu is released during I/O.
func (l *startLog) compactLocked() error {
	lines := make([][]byte, 0, len(l.running))
	for _, line := range l.running {
		lines = append(lines, line)
	}
	l.mu.Unlock()
	f, size, err := l.rewriteFile(lines)
	l.mu.Lock()
	if err != nil {
		return err
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f, l.size = f, size
	return nil
}

// rewriteFile writes lines to a new journal file that atomically replaces
// the old one and returns it open for appending.
func (l *startLog) rewriteFile(lines [][]byte) (*os.File, int64, error) {
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("start journal: %w", err)
	}
	var size int64
	for _, line := range lines {
		n, err := f.Write(line)
		size += int64(n)
		if err != nil {
			_ = f.Close()
			return nil, 0, fmt.Errorf("start journal: %w", err)
		}
	}
	if err := os.Rename(tmp, l.path); err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("start journal: %w", err)
	}
	return f, size, nil
}

// close writes what is queued and closes the journal file.
func (l *startLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writing {
		l.cond.Wait()
	}
	if len(l.pending) > 0 && l.f != nil {
		l.writeLocked(l.gen)
	}
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
