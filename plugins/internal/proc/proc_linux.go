//go:build linux

package proc

import "syscall"

// sysProcAttr puts the process in its own process group and kills it if the
// plugin process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
