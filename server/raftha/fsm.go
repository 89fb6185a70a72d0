package raftha

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// Command types: the first byte of every log entry; the rest is JSON.
const (
	cmdApplyCursors  byte = 1 // body: map[job_id]unix_ms, applied as max
	cmdDeleteCursors byte = 2 // body: []job_id
	cmdSetRoutes     byte = 3 // body: map[key]value; a null value deletes the key
	cmdTick          byte = 4 // body: tickCommand, all of it applied at once (written before groupedTick)
	// cmdGroupedTick is what ApplyTick writes: tickCommand with the cursors
	// grouped by their time. A tick's cursors share few times (every job
	// firing at second S advances to S), so a job costs its id in the entry
	// (~6 bytes) instead of an "id":ms pair (~22), and encoding sorts no map
	// keys. A binary older than this type refuses such an entry, which is why
	// upgrades go followers first and the leader last (docs/deployment.md).
	cmdGroupedTick byte = 5 // body: groupedTick
)

// tickCommand is one trigger-loop tick's state change: cursors advanced (as
// max), route state entries set (a null value deletes the key), and cursors
// of deleted jobs forgotten (applied after the advances).
type tickCommand struct {
	Cursors       map[int64]int64   `json:"cursors,omitempty"`
	Routes        map[string][]byte `json:"routes,omitempty"`
	DeleteCursors []int64           `json:"delete_cursors,omitempty"`
}

// groupedTick is tickCommand with the cursors as groups of jobs advanced to
// one time.
type groupedTick struct {
	Cursors       []cursorGroup     `json:"cursor_groups,omitempty"`
	Routes        map[string][]byte `json:"routes,omitempty"`
	DeleteCursors []int64           `json:"delete_cursors,omitempty"`
}

// cursorGroup is the jobs whose cursors advance to At (Unix ms).
type cursorGroup struct {
	At   int64   `json:"at"`
	Jobs []int64 `json:"jobs"`
}

// groupCursors groups cursors (job id → Unix ms) by time, in order of time
// and, within a group, of job id, so one tick always encodes the same way.
func groupCursors(cursors map[int64]int64) []cursorGroup {
	if len(cursors) == 0 {
		return nil
	}
	byAt := map[int64][]int64{}
	for id, at := range cursors {
		byAt[at] = append(byAt[at], id)
	}
	out := make([]cursorGroup, 0, len(byAt))
	for at, ids := range byAt {
		slices.Sort(ids)
		out = append(out, cursorGroup{At: at, Jobs: ids})
	}
	slices.SortFunc(out, func(a, b cursorGroup) int { return cmp.Compare(a.At, b.At) })
	return out
}

// state is the replicated state, also the snapshot format.
type state struct {
	Cursors map[int64]int64   `json:"cursors"`
	Routes  map[string][]byte `json:"routes"`
}

// fsm applies commands to state. Reads take the read lock; raft applies
// entries from one goroutine.
type fsm struct {
	mu sync.RWMutex
	st state
}

var _ raft.FSM = (*fsm)(nil)

func newFSM() *fsm {
	return &fsm{st: state{Cursors: map[int64]int64{}, Routes: map[string][]byte{}}}
}

func encodeCommand(typ byte, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("raftha: encode command %d: %w", typ, err)
	}
	return append([]byte{typ}, b...), nil
}

// Apply applies one committed entry. It returns an error value (the future's
// Response) when the entry cannot be decoded; the state is then unchanged.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Data) == 0 {
		return fmt.Errorf("raftha: empty command at index %d", l.Index)
	}
	typ, body := l.Data[0], l.Data[1:]
	switch typ {
	case cmdApplyCursors:
		var m map[int64]int64
		if err := json.Unmarshal(body, &m); err != nil {
			return fmt.Errorf("raftha: decode cursors at index %d: %w", l.Index, err)
		}
		f.mu.Lock()
		f.advanceLocked(m)
		f.mu.Unlock()
	case cmdDeleteCursors:
		var ids []int64
		if err := json.Unmarshal(body, &ids); err != nil {
			return fmt.Errorf("raftha: decode cursor deletion at index %d: %w", l.Index, err)
		}
		f.mu.Lock()
		f.deleteLocked(ids)
		f.mu.Unlock()
	case cmdSetRoutes:
		var m map[string][]byte
		if err := json.Unmarshal(body, &m); err != nil {
			return fmt.Errorf("raftha: decode route state at index %d: %w", l.Index, err)
		}
		f.mu.Lock()
		f.setRoutesLocked(m)
		f.mu.Unlock()
	case cmdTick:
		var c tickCommand
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("raftha: decode tick at index %d: %w", l.Index, err)
		}
		f.applyTick(groupedTick{Cursors: groupCursors(c.Cursors), Routes: c.Routes, DeleteCursors: c.DeleteCursors})
	case cmdGroupedTick:
		var c groupedTick
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("raftha: decode tick at index %d: %w", l.Index, err)
		}
		f.applyTick(c)
	default:
		return fmt.Errorf("raftha: unknown command type %d at index %d", typ, l.Index)
	}
	return nil
}

func (f *fsm) advanceLocked(m map[int64]int64) {
	for id, ms := range m {
		f.advanceOneLocked(id, ms)
	}
}

// advanceOneLocked advances the cursor of job id to ms, kept as max.
func (f *fsm) advanceOneLocked(id, ms int64) {
	if old, ok := f.st.Cursors[id]; !ok || ms > old {
		f.st.Cursors[id] = ms
	}
}

// applyTick applies one tick at once: the cursor advances, then the route
// state, then the deletion of cursors.
func (f *fsm) applyTick(c groupedTick) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range c.Cursors {
		for _, id := range g.Jobs {
			f.advanceOneLocked(id, g.At)
		}
	}
	f.setRoutesLocked(c.Routes)
	f.deleteLocked(c.DeleteCursors)
}

func (f *fsm) deleteLocked(ids []int64) {
	for _, id := range ids {
		delete(f.st.Cursors, id)
	}
}

func (f *fsm) setRoutesLocked(m map[string][]byte) {
	for k, v := range m {
		if v == nil {
			delete(f.st.Routes, k)
		} else {
			f.st.Routes[k] = v
		}
	}
}

func (f *fsm) cursor(jobID int64) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ms, ok := f.st.Cursors[jobID]
	return ms, ok
}

func (f *fsm) cursors() map[int64]int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Cursors)
}

func (f *fsm) route(key string) ([]byte, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v, ok := f.st.Routes[key]
	return append([]byte(nil), v...), ok
}

func (f *fsm) routes() map[string][]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string][]byte, len(f.st.Routes))
	for k, v := range f.st.Routes {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// Snapshot copies the state; Persist encodes the copy outside the lock.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{st: state{Cursors: f.cursors(), Routes: f.routes()}}, nil
}

// Restore replaces the state with a snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st state
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("raftha: decode snapshot: %w", err)
	}
	if st.Cursors == nil {
		st.Cursors = map[int64]int64{}
	}
	if st.Routes == nil {
		st.Routes = map[string][]byte{}
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

type snapshot struct{ st state }

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.st); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftha: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftha: close snapshot: %w", err)
	}
	return nil
}

func (s *snapshot) Release() {}
