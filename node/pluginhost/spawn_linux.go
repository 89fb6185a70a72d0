//go:build linux

package pluginhost

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Plugin processes get SIGKILL when the node dies (so a crashed node leaves
// no plugin, and through the plugins' own parent-death signal no script,
// running). Linux sends the parent-death signal when the *thread* that
// forked the child exits, so every plugin is forked from one OS thread that
// stays locked until the host stops.
//
// Each plugin also leads a process group of its own, which the host tracks
// (internal/procgroup): whatever a plugin leaves in its group is killed
// when the plugin exits, and by the node's guard when the node dies.

func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
}

// spawner runs functions (plugin starts) on one locked OS thread.
type spawner struct {
	reqs chan func()
	done chan struct{}

	mu     sync.RWMutex // held for reading while a function runs
	closed bool
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// Never unlocked: when this goroutine ends, the thread ends with it.
		runtime.LockOSThread()
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// do runs f on the spawner's thread and waits for it; after close it runs
// f on the calling goroutine.
func (s *spawner) do(f func()) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		f()
		return
	}
	ran := make(chan struct{})
	s.reqs <- func() {
		defer close(ran)
		f()
	}
	<-ran
}

// close ends the spawner (and its thread) once no function runs on it.
// Call it after the plugins it started were killed.
func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.reqs)
	<-s.done
}
