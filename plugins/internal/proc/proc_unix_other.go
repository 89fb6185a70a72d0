//go:build unix && !linux

package proc

import "syscall"

// sysProcAttr puts the process in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
