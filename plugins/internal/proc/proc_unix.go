//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// signalGroup sends sig to the process group (its pgid is the
// main process's pid, thanks to Setpgid).
func signalGroup(_ *exec.Cmd, pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}
