package shell

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A job's script runs from a file the interpreter reads (as it always
// did: `sh <file>`, never `sh -c <script>`, which would show the script,
// and any secret in it, to every user of the node in ps). Writing a new
// file for every run costs an inode allocation and removal per fire, most
// of the plugin's CPU at hundreds of fires per second, so the plugin keeps
// one private, read-only file per distinct script source in a directory of
// its own and every run of that script reads it.
//
// A file is removed only when no run uses it (so a script the interpreter
// has not opened yet, or reads as it goes, is never taken away) and the
// cache holds more than maxScripts files or maxScriptBytes bytes: the
// least recently used go first. Every run checks the file (one stat): one
// that was removed or changed (a /tmp cleaner, a script that deletes "$0")
// is written again. The directory goes when
// the plugin stops (Close); one left by a plugin that was killed is removed
// by the next shell plugin that starts on the machine.
const (
	maxScripts     = 1024
	maxScriptBytes = 16 << 20
	// scriptDirPrefix names the cache directories in os.TempDir; the
	// owner's pid follows.
	scriptDirPrefix = "cronix-shell-"
)

type scriptCache struct {
	mu    sync.Mutex
	dir   string // "" until the first script
	files map[string]*scriptFile
	bytes int
	seq   uint64
}

type scriptFile struct {
	path    string
	size    int
	refs    int       // runs using the file
	used    uint64    // seq of the last use (LRU)
	modTime time.Time // as written
}

func newScriptCache() *scriptCache {
	return &scriptCache{files: map[string]*scriptFile{}}
}

// acquire returns the path of a file holding src and a release function
// the caller calls once the interpreter is done with it.
func (c *scriptCache) acquire(src string) (string, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	f := c.files[src]
	if f != nil {
		if st, err := os.Stat(f.path); err != nil || st.Size() != int64(f.size) || !st.ModTime().Equal(f.modTime) {
			// Gone or changed: forget it (a run still using it keeps its
			// open file; its file is removed when its last run is over).
			c.dropLocked(src, f)
			f = nil
		}
	}
	if f == nil {
		path, modTime, err := c.writeLocked(src)
		if err != nil {
			return "", nil, err
		}
		f = &scriptFile{path: path, size: len(src), modTime: modTime}
		c.files[src] = f
		c.bytes += f.size
		c.evictLocked()
	}
	f.refs++
	f.used = c.seq
	return f.path, func() { c.release(f) }, nil
}

func (c *scriptCache) release(f *scriptFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.refs--
	if f.refs == 0 && f.size < 0 { // dropped from the cache while in use
		_ = os.Remove(f.path)
	}
}

// dropLocked takes f out of the cache; its file goes now, or when its last
// run is over.
func (c *scriptCache) dropLocked(src string, f *scriptFile) {
	delete(c.files, src)
	c.bytes -= f.size
	f.size = -1 // marks it dropped
	if f.refs == 0 {
		_ = os.Remove(f.path)
	}
}

// evictLocked removes the least recently used unused files while the cache
// is over its bounds, down to 7/8 of them so eviction is not per run.
func (c *scriptCache) evictLocked() {
	if len(c.files) <= maxScripts && c.bytes <= maxScriptBytes {
		return
	}
	for len(c.files) > maxScripts*7/8 || c.bytes > maxScriptBytes*7/8 {
		var (
			oldest    *scriptFile
			oldestSrc string
		)
		for src, f := range c.files {
			if f.refs == 0 && (oldest == nil || f.used < oldest.used) {
				oldest, oldestSrc = f, src
			}
		}
		if oldest == nil {
			return // every file is in use
		}
		c.dropLocked(oldestSrc, oldest)
	}
}

// writeLocked writes src to a new read-only file of the cache directory,
// creating the directory (again, if it was removed) when needed.
func (c *scriptCache) writeLocked(src string) (string, time.Time, error) {
	for attempt := 0; ; attempt++ {
		if c.dir == "" {
			dir, err := os.MkdirTemp("", scriptDirPrefix+strconv.Itoa(os.Getpid())+"-")
			if err != nil {
				return "", time.Time{}, fmt.Errorf("creating the script directory: %w", err)
			}
			c.dir = dir
			go removeStaleScriptDirs(os.TempDir(), dir)
		}
		path, err := writeScript(c.dir, src)
		if err == nil {
			st, err := os.Stat(path)
			if err != nil {
				_ = os.Remove(path)
				return "", time.Time{}, fmt.Errorf("writing the script file: %w", err)
			}
			return path, st.ModTime(), nil
		}
		if attempt > 0 || !errors.Is(err, fs.ErrNotExist) {
			return "", time.Time{}, err
		}
		c.dir = "" // the directory was removed: make a new one
	}
}

// writeScript stores src in a new private file of dir, readable and
// executable by its owner only.
func writeScript(dir, src string) (string, error) {
	f, err := os.CreateTemp(dir, "script-*")
	if err != nil {
		return "", fmt.Errorf("creating the script file: %w", err)
	}
	_, werr := f.WriteString(src)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o500)); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("writing the script file: %w", err)
	}
	return f.Name(), nil
}

// Close removes the cache directory. Runs still in flight keep their open
// files; a run after Close starts a new directory.
func (c *scriptCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := c.dir
	c.dir = ""
	for src, f := range c.files {
		delete(c.files, src)
		f.size = -1
	}
	c.bytes = 0
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}

// removeStaleScriptDirs removes the script directories in tmp, other than
// own, whose plugin process is gone (killed before it could remove them).
func removeStaleScriptDirs(tmp, own string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), scriptDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || filepath.Join(tmp, e.Name()) == own {
			continue
		}
		if !pidAlive(pid) {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}
