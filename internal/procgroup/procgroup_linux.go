//go:build linux

package procgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

func init() {
	if os.Getenv(envGuard) != "1" {
		return
	}
	// This process is a guard: its life is its stdin's.
	os.Exit(runGuard(os.Stdin, os.Getenv(EnvDir)))
}

// Start starts cmd in a process group of its own with SIGKILL as its
// parent-death signal, forked from the plugin's spawn thread, and
// registers the group with the guard and the journal. Call Done with
// cmd.Process.Pid once the run is over.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var err error
	onSpawnThread(func() { err = cmd.Start() })
	if err != nil {
		return err
	}
	pgid := cmd.Process.Pid
	start, serr := StartTime(pgid)
	if serr != nil {
		// Gone already (a zombie still has its stat): nothing to guard.
		return nil //nolint:nilerr // the process started; only its group is not guarded
	}
	groups.add(pgid, start)
	return nil
}

// Done unregisters the group pgid: its run is over.
func Done(pgid int) { groups.remove(pgid) }

// Track guards and journals the group of pid, a process already started
// as the leader of a process group of its own (the node's plugins: a child
// a plugin leaves in its group dies with the node too).
func Track(pid int) {
	if start, err := StartTime(pid); err == nil {
		groups.add(pid, start)
	}
}

// Release kills what is left of the tracked group pgid (its leader has
// exited) and unregisters it; an untracked pgid is left alone.
func Release(pgid int) {
	groups.mu.Lock()
	start, ok := groups.live[pgid]
	groups.mu.Unlock()
	if !ok {
		return
	}
	KillGroup(pgid, start)
	groups.remove(pgid)
}

// SetJournalDir sets this process's journal directory, instead of the
// EnvDir its parent gave it (the node's own, for its plugins' groups).
func SetJournalDir(dir string) {
	groups.mu.Lock()
	defer groups.mu.Unlock()
	groups.dir, groups.dirSet, groups.dirMade = dir, true, false
}

// --- the spawn thread

var spawn struct {
	once sync.Once
	reqs chan func()
}

// onSpawnThread runs f on one OS thread that stays locked for the life of
// the process: the parent-death signal of the processes it forks fires
// when the process dies, never earlier. Its goroutine lives as long as the
// process, like the children whose parent it is.
func onSpawnThread(f func()) {
	spawn.once.Do(func() {
		spawn.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the process
			for f := range spawn.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawn.reqs <- func() {
		defer close(done)
		f()
	}
	<-done
}

// --- registry of live groups (the plugin side)

type registry struct {
	mu      sync.Mutex
	live    map[int]uint64 // pgid → its leader's start time
	guard   io.WriteCloser // the guard's stdin; nil until started or after it failed
	noGuard bool           // a guard could not be started: not tried again (warned once)
	dir     string         // the journal, when dirSet; else EnvDir
	dirSet  bool
	dirMade bool
}

// journalLocked is the journal directory ("" for none).
func (r *registry) journalLocked() string {
	if r.dirSet {
		return r.dir
	}
	return os.Getenv(EnvDir)
}

var groups = &registry{live: map[int]uint64{}}

func (r *registry) add(pgid int, start uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[pgid] = start
	if dir := r.journalLocked(); dir != "" {
		if !r.dirMade {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				warnf("journal: %v", err)
			}
			r.dirMade = true
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(pgid)), []byte(strconv.FormatUint(start, 10)+"\n"), 0o600); err != nil {
			warnf("journal: %v", err)
		}
	}
	if r.guard == nil {
		if !r.noGuard {
			r.startGuardLocked() // tells it every live group, this one included
		}
		return
	}
	r.sendLocked(fmt.Sprintf("+ %d %d\n", pgid, start))
}

func (r *registry) remove(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.live[pgid]; !ok {
		return
	}
	delete(r.live, pgid)
	if dir := r.journalLocked(); dir != "" {
		if err := os.Remove(filepath.Join(dir, strconv.Itoa(pgid))); err != nil && !errors.Is(err, os.ErrNotExist) {
			warnf("journal: %v", err)
		}
	}
	if r.guard != nil {
		r.sendLocked(fmt.Sprintf("- %d\n", pgid))
	}
}

// sendLocked writes one line to the guard; a guard that is gone is
// dropped, and the next add starts a new one.
func (r *registry) sendLocked(line string) {
	if _, err := io.WriteString(r.guard, line); err != nil {
		warnf("guard gone (%v); a new one starts with the next run", err)
		_ = r.guard.Close()
		r.guard = nil
	}
}

// startGuardLocked starts the guard and lists every live group to it.
func (r *registry) startGuardLocked() {
	exe, err := os.Executable()
	if err != nil {
		r.noGuard = true
		warnf("no guard: %v", err)
		return
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envGuard+"=1", EnvDir+"="+r.journalLocked())
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	// Its own group: a signal to the plugin's group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		warnf("no guard for now: %v", err) // out of fds: tried again with the next run
		return
	}
	if err := cmd.Start(); err != nil {
		// A missing or unrunnable executable stays so; anything else
		// (out of processes, memory) is tried again with the next run.
		r.noGuard = errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
		warnf("no guard: starting %s: %v", exe, err)
		return
	}
	// Reap it whenever it exits (normally never before this process).
	go func() { _ = cmd.Wait() }()
	r.guard = w
	for pgid, start := range r.live {
		r.sendLocked(fmt.Sprintf("+ %d %d\n", pgid, start))
		if r.guard == nil {
			return
		}
	}
}

// --- the guard process

// runGuard reads "+ pgid start" and "- pgid" lines until in ends, then
// kills every group still listed and removes its journal file in dir.
func runGuard(in io.Reader, dir string) int {
	// Its life is the plugin's: a terminal's ^C or a TERM meant for the
	// plugin's group must not take it away first.
	// Its stderr is the plugin's, read by the node: once the node is gone,
	// a write there must fail, not kill the guard (SIGPIPE on fd 2).
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE)
	live := map[int]uint64{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(f[1])
		if err != nil || pgid <= 1 {
			continue
		}
		switch {
		case f[0] == "+" && len(f) == 3:
			start, err := strconv.ParseUint(f[2], 10, 64)
			if err == nil {
				live[pgid] = start
			}
		case f[0] == "-":
			delete(live, pgid)
		}
	}
	var killed []int
	for pgid, start := range live { // every kill first, then the words
		if KillGroup(pgid, start) {
			killed = append(killed, pgid)
		}
		if dir != "" {
			_ = os.Remove(filepath.Join(dir, strconv.Itoa(pgid)))
		}
	}
	if len(killed) > 0 {
		warnf("guard: the plugin died; killed the process groups %v it had started", killed)
	}
	return 0
}

// --- the journal (the node side)

// Sweep kills every process group the journal in dir lists that is still
// alive (see KillGroup), and empties the journal. The node calls it before
// it starts its plugins, so no group of this node's plugins is listed yet.
// It returns how many groups it killed.
func Sweep(dir string, log *slog.Logger) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("procgroup: reading the journal %s: %w", dir, err)
	}
	killed := 0
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		pgid, perr := strconv.Atoi(e.Name())
		b, rerr := os.ReadFile(path)
		if perr == nil && rerr == nil && pgid > 1 {
			if start, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && KillGroup(pgid, start) {
				killed++
				if log != nil {
					log.Warn("killed a process group a previous run of this node had started", "pgid", pgid)
				}
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return killed, fmt.Errorf("procgroup: journal: %w", err)
		}
	}
	return killed, nil
}

// KillGroup sends SIGKILL to the process group pgid when it is still the
// group whose leader started at start (clock ticks since boot, field 22 of
// /proc/<pid>/stat): its leader is that process, or, the leader being gone,
// some process of the group started no earlier than it. It reports whether
// it sent the signal.
func KillGroup(pgid int, start uint64) bool {
	if st, err := StartTime(pgid); err == nil {
		if st != start {
			return false // the pid is another process's now
		}
	} else if !hasMembers(pgid, start) {
		return false
	}
	return syscall.Kill(-pgid, syscall.SIGKILL) == nil
}

// hasMembers reports whether a process of group pgid started at or after start.
func hasMembers(pgid int, start uint64) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err == nil && st.pgrp == pgid && st.start >= start {
			return true
		}
	}
	return false
}

type procStat struct {
	pgrp  int
	start uint64
}

// startTime is the start time of process pid in clock ticks since boot.
func StartTime(pid int) (uint64, error) {
	st, err := readStat(pid)
	return st.start, err
}

// readStat reads the process group and start time of pid from /proc.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("procgroup: %w", err)
	}
	// "pid (comm) state ppid pgrp ... starttime(22) ...": comm may hold
	// spaces and parentheses, so fields are counted after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat: %d fields", pid, len(f))
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat pgrp: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat starttime: %w", pid, err)
	}
	return procStat{pgrp: pgrp, start: start}, nil
}
