//go:build unix && !linux

package shell

import "syscall"

// sysProcAttr puts the script in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
