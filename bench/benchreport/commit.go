package benchreport

import (
	"os/exec"
	"strings"
	"sync"
)

// GitCommit is the short hash of the checkout's HEAD, with "+dirty" when
// tracked files outside docs/ differ from it ("unknown" outside a git
// checkout): the commit a bench's figures were measured on. docs/ is left
// out because the benches write there: in `make bench` the speed table is
// written before the failover bench names its commit.
func GitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

// runCommit is GitCommit as first read by RunCommit.
var runCommit = sync.OnceValue(GitCommit)

// RunCommit is GitCommit read once, at its first call: each bench calls it
// as it starts, so that its section names the code it measured, not the
// tree as it stood when the section was written (a file edited during a
// 30-minute soak would mark that dirty).
func RunCommit() string { return runCommit() }
