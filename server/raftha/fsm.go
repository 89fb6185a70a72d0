package raftha

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sync"

	"github.com/hashicorp/raft"
)

// Command types: the first byte of every log entry; the rest is JSON.
const (
	cmdApplyCursors  byte = 1 // body: map[job_id]unix_ms, applied as max
	cmdDeleteCursors byte = 2 // body: []job_id
	cmdSetRoutes     byte = 3 // body: map[key]value; a null value deletes the key
	cmdTick          byte = 4 // body: tickCommand, all of it applied at once
)

// tickCommand is one trigger-loop tick's state change: cursors advanced (as
// max), route state entries set (a null value deletes the key), and cursors
// of deleted jobs forgotten (applied after the advances).
type tickCommand struct {
	Cursors       map[int64]int64   `json:"cursors,omitempty"`
	Routes        map[string][]byte `json:"routes,omitempty"`
	DeleteCursors []int64           `json:"delete_cursors,omitempty"`
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
		f.mu.Lock()
		f.advanceLocked(c.Cursors)
		f.setRoutesLocked(c.Routes)
		f.deleteLocked(c.DeleteCursors)
		f.mu.Unlock()
	default:
		return fmt.Errorf("raftha: unknown command type %d at index %d", typ, l.Index)
	}
	return nil
}

func (f *fsm) advanceLocked(m map[int64]int64) {
	for id, ms := range m {
		if old, ok := f.st.Cursors[id]; !ok || ms > old {
			f.st.Cursors[id] = ms
		}
	}
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
