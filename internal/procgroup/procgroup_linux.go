//go:build linux

package procgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
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
	os.Exit(runGuard(os.Stdin))
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
	groups.dir, groups.dirSet = dir, true
}

// --- the spawn threads

// spawnThreads is how many locked OS threads fork the groups: one would
// make every start of a burst (a second's hundreds of fires) wait for the
// previous fork+exec, the machine's other cores idle; one per core starts
// them in parallel, as a plain program's pool of starters would (at most
// 8 threads: forks beyond that contend in the kernel for the same memory
// map).
var spawnThreads = min(8, max(2, runtime.GOMAXPROCS(0)))

var spawn struct {
	once sync.Once
	reqs chan func()
}

// onSpawnThread runs f on one of spawnThreads OS threads that stay locked
// for the life of the process: the parent-death signal of the processes
// they fork fires when the process dies, never earlier. Their goroutines
// live as long as the process, like the children whose parent they are.
func onSpawnThread(f func()) {
	spawn.once.Do(func() {
		spawn.reqs = make(chan func())
		for range spawnThreads {
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends with the process
				for f := range spawn.reqs {
					f()
				}
			}()
		}
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
	dir     string         // the journal directory, when dirSet; else EnvDir
	dirSet  bool
	journal journal // this process's journal file in that directory
}

// journalDirLocked is the journal directory ("" for none).
func (r *registry) journalDirLocked() string {
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
	line := fmt.Sprintf("+ %d %d\n", pgid, start)
	journaled := r.journalLocked(line)
	if r.guard == nil {
		if !r.noGuard {
			r.startGuardLocked() // tells it the journal or every live group, this one included
		}
		return
	}
	if !journaled {
		r.sendLocked(line)
	}
}

func (r *registry) remove(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.live[pgid]; !ok {
		return
	}
	delete(r.live, pgid)
	line := fmt.Sprintf("- %d\n", pgid)
	if !r.journalLocked(line) && r.guard != nil {
		r.sendLocked(line)
	}
}

// journalLocked appends line (live already changed) to the journal and
// reports whether the journal now lists every live group. The journal is
// complete or absent: when there is none yet, it moved to another
// directory or a write failed, a new one listing every live group
// replaces it (the old file is removed once the new one is written). A new
// journal is told to the guard, which from then on reads the groups from
// that file when the plugin dies, so a line in the journal is not also
// sent to the guard. When no journal can be written any more, the guard
// is sent every live group instead.
func (r *registry) journalLocked(line string) bool {
	dir := r.journalDirLocked()
	if r.journal.dir == dir && r.journal.f != nil && r.journal.append(line, r.live) {
		return true
	}
	old := r.journal
	r.journal = journal{}
	defer old.close()
	if dir != "" {
		err := r.journal.open(dir, r.live)
		if err == nil {
			if r.guard != nil {
				r.sendLocked("j " + r.journal.path + "\n")
			}
			return true
		}
		warnf("journal: %v", err)
	}
	if old.f == nil || r.guard == nil {
		return false
	}
	// The guard's journal is gone: it gets the list itself again.
	r.sendLocked("j \n")
	r.sendLiveLocked()
	return true
}

// sendLiveLocked sends every live group to the guard.
func (r *registry) sendLiveLocked() {
	for pgid, start := range r.live {
		if r.guard == nil {
			return
		}
		r.sendLocked(fmt.Sprintf("+ %d %d\n", pgid, start))
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

// startGuardLocked starts the guard and tells it the journal or, without
// one, every live group.
func (r *registry) startGuardLocked() {
	exe, err := os.Executable()
	if err != nil {
		r.noGuard = true
		warnf("no guard: %v", err)
		return
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envGuard+"=1")
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
	if r.journal.f != nil {
		r.sendLocked("j " + r.journal.path + "\n") // it lists every live group
		return
	}
	r.sendLiveLocked()
}

// --- the guard process

// runGuard reads "+ pgid start", "- pgid" and "j journal-path" lines until
// in ends, then kills every group still listed and removes the plugin's
// journal file. After a "j" line the journal is the list: it held every
// live group when it was named, and the plugin appends to it instead of
// writing here. The plugin keeps its journal complete or sends "j " (no
// journal) and the list itself, so it writes no "+" or "-" after a "j
// path"; such a line would still be applied on top of the journal.
func runGuard(in io.Reader) int {
	// Its life is the plugin's: a terminal's ^C or a TERM meant for the
	// plugin's group must not take it away first.
	// Its stderr is the plugin's, read by the node: once the node is gone,
	// a write there must fail, not kill the guard (SIGPIPE on fd 2).
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE)
	killListed(in)
	return 0
}

// killListed is the guard's work: it reads in to its end, then kills the
// groups listed and removes the journal.
func killListed(in io.Reader) {
	var (
		journalPath string
		// Since the last "j" line (all lines without one): the groups
		// listed here and, with a journal, those unlisted here.
		listed   = map[int]uint64{}
		unlisted = map[int]bool{}
	)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if path, ok := strings.CutPrefix(sc.Text(), "j "); ok {
			journalPath = path
			clear(listed)
			clear(unlisted)
			continue
		}
		// The last line about a group wins.
		switch pgid, op := applyLine(listed, sc.Text()); op {
		case '+':
			delete(unlisted, pgid)
		case '-':
			if journalPath != "" {
				unlisted[pgid] = true
			}
		}
	}
	live := map[int]uint64{}
	if journalPath != "" {
		journaled, err := replay(journalPath)
		// A journal already gone was taken over: the plugin closed it
		// cleanly, or the node's next start swept (killed) what it listed.
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			warnf("guard: reading the journal %s: %v", journalPath, err)
		}
		if journaled != nil {
			live = journaled // what it read, also after a read error
		}
	}
	for pgid := range unlisted {
		delete(live, pgid)
	}
	maps.Copy(live, listed)
	var killed []int
	for pgid, start := range live { // every kill first, then the words
		if KillGroup(pgid, start) {
			killed = append(killed, pgid)
		}
	}
	if journalPath != "" {
		_ = os.Remove(journalPath)
	}
	if len(killed) > 0 {
		warnf("guard: the plugin died; killed the process groups %v it had started", killed)
	}
}

// applyLine applies one "+ pgid start" or "- pgid" line to live and
// returns the group and the line's op ('+' or '-'); anything else is
// ignored (op 0).
func applyLine(live map[int]uint64, line string) (pgid int, op byte) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0, 0
	}
	pgid, err := strconv.Atoi(f[1])
	if err != nil || pgid <= 1 {
		return 0, 0
	}
	switch {
	case f[0] == "+" && len(f) == 3:
		start, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return 0, 0
		}
		live[pgid] = start
		return pgid, '+'
	case f[0] == "-":
		delete(live, pgid)
		return pgid, '-'
	}
	return 0, 0
}

// --- the journal (the node side)

// Sweep kills every process group the journal in dir lists that is still
// alive (see KillGroup), and empties the journal. The node calls it before
// it starts its plugins, so no group of this node's plugins is listed yet.
// It returns how many groups it killed.
func Sweep(dir string, log *slog.Logger) (int, error) {
	listed, err := Journaled(dir)
	if err != nil {
		return 0, err
	}
	killed := 0
	for pgid, start := range listed {
		if KillGroup(pgid, start) {
			killed++
			if log != nil {
				log.Warn("killed a process group a previous run of this node had started", "pgid", pgid)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return killed, fmt.Errorf("procgroup: reading the journal %s: %w", dir, err)
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
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

// readStat reads the process group and start time of pid from /proc. It
// runs once per started group, so it reads with three system calls into a
// buffer on the stack and parses in place: no *os.File (its finalizer and
// poller registration), no fstat, no copy of the line.
func readStat(pid int) (procStat, error) {
	fd, err := openRetry("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, fmt.Errorf("procgroup: open /proc/%d/stat: %w", pid, err)
	}
	// comm is at most 64 bytes; the fields through starttime fit in 512
	// (40 fields of at most 20 digits would be 800: read up to 1 KiB).
	var buf [1024]byte
	n, err := readRetry(fd, buf[:])
	_ = syscall.Close(fd)
	if err != nil {
		return procStat{}, fmt.Errorf("procgroup: read /proc/%d/stat: %w", pid, err)
	}
	return parseStat(pid, buf[:n])
}

func openRetry(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func readRetry(fd int, b []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, b)
		if err == syscall.EINTR {
			continue
		}
		return n, err
	}
}

// parseStat parses the pgrp (field 5) and starttime (field 22) of a
// /proc/<pid>/stat line: "pid (comm) state ppid pgrp ... starttime ...".
// comm may hold spaces and parentheses, so fields are counted after the
// last ')'.
func parseStat(pid int, b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat: unexpected format", pid)
	}
	var st procStat
	field := 2 // the field after comm is the state, field 3; b[i+1] is the blank before it
	for j := i + 1; j < len(b); {
		for j < len(b) && (b[j] == ' ' || b[j] == '\n') {
			j++
		}
		if j == len(b) {
			break
		}
		k := j
		for k < len(b) && b[k] != ' ' && b[k] != '\n' {
			k++
		}
		field++
		switch field {
		case 5:
			v, err := strconv.Atoi(string(b[j:k])) // no allocation: the conversion does not escape
			if err != nil {
				return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat pgrp: %w", pid, err)
			}
			st.pgrp = v
		case 22:
			v, err := strconv.ParseUint(string(b[j:k]), 10, 64)
			if err != nil {
				return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat starttime: %w", pid, err)
			}
			st.start = v
			return st, nil
		}
		j = k
	}
	return procStat{}, fmt.Errorf("procgroup: /proc/%d/stat: %d fields", pid, field)
}
