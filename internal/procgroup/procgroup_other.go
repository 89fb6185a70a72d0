//go:build !linux

package procgroup

import (
	"errors"
	"log/slog"
	"os/exec"
	"runtime"
)

// Start starts cmd (a process group of its own where the caller's
// SysProcAttr asks for one). No parent-death signal, guard or journal here.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// Done is a no-op here.
func Done(int) {}

// Sweep does nothing here: there is no journal to read.
func Sweep(string, *slog.Logger) (int, error) { return 0, nil }

// Journaled lists nothing here.
func Journaled(string) (map[int]uint64, error) { return map[int]uint64{}, nil }

// StartTime is not known here.
func StartTime(int) (uint64, error) {
	return 0, errors.New("procgroup: no process start times on " + runtime.GOOS)
}

// Track does nothing here.
func Track(int) {}

// Release does nothing here.
func Release(int) {}

// SetJournalDir does nothing here.
func SetJournalDir(string) {}
