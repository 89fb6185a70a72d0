//go:build linux

package procgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The journal of one process is one file, <dir>/journal-<pid>-<random>,
// of the lines the guard reads: "+ pgid start" when a group starts, "- pgid"
// when its run is over. Appending a line costs one write; a file per group
// cost an inode allocation and removal per run, most of a busy plugin's
// own CPU. When the file holds many more lines than live groups it is
// compacted: the live groups are written to a new file, renamed over it.
// Journals of the earlier layout (a file <pgid> holding the start time) are
// still read.
const (
	journalPrefix = "journal-"
	// compactRatio: a compaction needs this many lines per live group.
	compactRatio = 4
)

// compactMin is the smallest line count that triggers a compaction (a
// variable for the tests).
var compactMin = 4096

type journal struct {
	dir, path string
	f         *os.File // nil when closed or not opened
	lines     int
}

// open creates this process's journal in dir, listing live.
func (j *journal) open(dir string, live map[int]uint64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, journalPrefix+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return err
	}
	j.dir, j.path, j.f, j.lines = dir, f.Name(), f, 0
	if err := j.writeLive(f, live); err != nil {
		j.close()
		return err
	}
	return nil
}

func (j *journal) writeLive(f *os.File, live map[int]uint64) error {
	var b strings.Builder
	for pgid, start := range live {
		fmt.Fprintf(&b, "+ %d %d\n", pgid, start)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		return err
	}
	j.lines = len(live)
	return nil
}

// append writes line; live (already changed by it) is what a compaction
// writes. It reports whether the line is in the file.
func (j *journal) append(line string, live map[int]uint64) bool {
	if _, err := j.f.WriteString(line); err != nil {
		warnf("journal: %v", err)
		return false
	}
	j.lines++
	if j.lines >= compactMin && j.lines >= compactRatio*len(live) {
		if err := j.compact(live); err != nil {
			warnf("journal: compacting: %v", err)
		}
	}
	return true
}

// compact replaces the file with one listing live only. A crash halfway
// leaves the old file (and a .tmp one Sweep ignores).
func (j *journal) compact(live map[int]uint64) error {
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	lines := j.lines
	if err := j.writeLive(f, live); err != nil {
		j.lines = lines
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		j.lines = lines
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	_ = j.f.Close()
	j.f = f
	return nil
}

// close closes and removes the file (its groups are in the next journal).
func (j *journal) close() {
	if j.f == nil {
		return
	}
	_ = j.f.Close()
	_ = os.Remove(j.path)
	j.f = nil
}

// Journaled returns the process groups (pgid → leader start time) the
// journal in dir lists: every journal file replayed, and every file of
// the earlier layout. A missing dir lists none.
func Journaled(dir string) (map[int]uint64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[int]uint64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("procgroup: reading the journal %s: %w", dir, err)
	}
	listed := map[int]uint64{}
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), journalPrefix) && !strings.HasSuffix(e.Name(), ".tmp") {
			live, err := replay(path)
			if err != nil {
				continue // removed meanwhile
			}
			for pgid, start := range live {
				listed[pgid] = start
			}
			continue
		}
		pgid, err := strconv.Atoi(e.Name())
		if err != nil || pgid <= 1 {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if start, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			listed[pgid] = start
		}
	}
	return listed, nil
}

// replay reads one journal file's lines into the groups still live at its end.
func replay(path string) (map[int]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	live := map[int]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		applyLine(live, sc.Text())
	}
	return live, sc.Err()
}
