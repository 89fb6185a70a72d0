// Package procgroup starts the process groups of the built-in process
// handlers (shell, cmd) so that none outlives the node that asked for it,
// and tracks the node's plugin processes, each the leader of a group of
// its own, the same way (Track, Release; the node is then the process
// with the guard, and SetJournalDir names its journal).
//
// Three layers, each covering what the previous one cannot:
//
//  1. Parent-death signal. Start forks the job's main process with
//     Setpgid (its own process group, pgid = its pid) and Pdeathsig
//     SIGKILL, from one of a few OS threads (one per core) locked for the
//     life of the plugin process (Linux sends the parent-death signal when the forking
//     *thread* exits, and Go may otherwise end a thread). The node starts
//     its plugins the same way (node/pluginhost), so kill -9 of the node
//     kills the plugins, which kills the jobs' main processes.
//  2. The guard. A parent-death signal reaches only the direct child: the
//     `sleep` a shell script forked would survive its shell. So the first
//     Start of a plugin process also starts a guard: this same executable
//     re-executed with CRONIX_PROCGROUP_GUARD=1 (see the init hook), in its
//     own process group, with a pipe as stdin. With a journal (3) the
//     plugin writes "j path" there, and the journal file is the list: a
//     run costs the guard nothing (no line, no wake-up). A journal is
//     complete or absent: after a failed write a new file listing every
//     live group replaces it (and its path goes to the guard). Without a
//     journal the plugin writes "+ pgid start" when a group starts and
//     "- pgid" when its run is over. When the plugin dies, for any reason,
//     the pipe closes and the guard reads the journal (or its own list),
//     kills every group listed (SIGKILL to -pgid), removes the journal
//     file, then exits.
//  3. The journal. When EnvDir is set (the node sets it to <data-dir>/procs
//     for its plugins), each process appends the same lines to a file of
//     its own there, journal-<pid>-<random> (one write per line, no file
//     per group; compacted to the live groups when it holds many more
//     lines). A node that starts again (after a crash that took the guard
//     too, such as an OOM kill of the whole group) calls Sweep before it
//     starts its plugins: every group the journal files (and files <pgid>
//     holding a start time, the earlier layout) list that is still alive is
//     killed.
//
// A pid can be reused, so a group is killed only when its leader is the
// recorded process (same start time in /proc/<pid>/stat) or, the leader
// being gone, when processes of that group started no earlier than it.
//
// Only Linux has all three; elsewhere Start is exec.Cmd.Start with a
// process group and Sweep does nothing.
package procgroup

import (
	"fmt"
	"io"
	"os"
)

// EnvDir names the directory of the process-group journal, passed by the
// node to its plugins.
const EnvDir = "CRONIX_PROC_DIR"

// envGuard marks the guard process (see the package comment).
const envGuard = "CRONIX_PROCGROUP_GUARD"

// warnOut is where warnf writes: stderr, which the node's plugin host
// copies into its log (a test reads it instead).
var warnOut io.Writer = os.Stderr

// warnf reports a problem of the machinery; a run is never failed for it.
func warnf(format string, args ...any) {
	fmt.Fprintf(warnOut, "procgroup: "+format+"\n", args...)
}
