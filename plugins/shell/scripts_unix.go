//go:build unix

package shell

import (
	"errors"
	"syscall"
)

// pidAlive reports whether a process pid may exist (it does, or belongs to
// another user).
func pidAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
