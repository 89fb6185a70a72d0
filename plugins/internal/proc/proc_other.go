//go:build !unix

package proc

import (
	"os/exec"
	"syscall"
)

// sysProcAttr: no process groups here; only the main process is killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(cmd *exec.Cmd, _ int, _ syscall.Signal) {
	_ = cmd.Process.Kill()
}
