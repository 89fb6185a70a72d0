//go:build !linux

package procgroup

import (
	"log/slog"
	"os/exec"
)

// Start starts cmd (a process group of its own where the caller's
// SysProcAttr asks for one). No parent-death signal, guard or journal here.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// Done is a no-op here.
func Done(int) {}

// Sweep does nothing here: there is no journal to read.
func Sweep(string, *slog.Logger) (int, error) { return 0, nil }
