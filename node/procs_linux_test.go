//go:build linux

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/internal/procgroup"
	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')') // "pid (comm) state ..."
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// TestStartKillsJournaledGroupsAndPluginsJournalTheirs: a process group
// the journal in <data-dir>/procs lists (left by a previous run of the
// node) is killed when the node starts, before its plugins; the node's
// shell plugin then lists the group of a running job there, and unlists it
// once the run is over.
func TestStartKillsJournaledGroupsAndPluginsJournalTheirs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shellBin := buildShell(ctx, t)

	dataDir := t.TempDir()
	procs := filepath.Join(dataDir, "procs")
	require.NoError(t, os.MkdirAll(procs, 0o700))
	left := exec.Command("/bin/sh", "-c", "sleep 60; true")
	left.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, left.Start())
	pgid := left.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	reaped := make(chan struct{})
	go func() { _ = left.Wait(); close(reaped) }()
	start, err := procgroup.StartTime(pgid)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(procs, strconv.Itoa(pgid)), []byte(strconv.FormatUint(start, 10)+"\n"), 0o600))

	n := newShellNode(t, dataDir, shellBin, etcdtest.Client(t))
	require.NoError(t, n.Start(ctx))
	defer n.Stop()
	select {
	case <-reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the journaled group's leader still runs after the node started")
	}
	_, err = os.Stat(filepath.Join(procs, strconv.Itoa(pgid)))
	require.True(t, os.IsNotExist(err), "its journal entry is removed")

	runCtx, stop := context.WithCancel(ctx)
	params, err := json.Marshal(map[string]string{"script": "echo $$; sleep 60"})
	require.NoError(t, err)
	pr, pw := io.Pipe()
	done := make(chan pluginapi.Result, 1)
	go func() {
		res, _ := n.host.Run(runCtx, "shell", pluginapi.Request{FireID: "1-1", JobID: 1, Params: params}, pw)
		done <- res
		_ = pw.Close()
	}()
	var jobPgid int
	_, err = fmt.Fscanln(pr, &jobPgid)
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	journaled := func() bool {
		listed, err := procgroup.Journaled(procs)
		require.NoError(t, err)
		_, ok := listed[jobPgid]
		return ok
	}
	require.Eventually(t, journaled, 10*time.Second, 20*time.Millisecond,
		"the plugin lists its job's group in the node's journal")
	require.True(t, alive(jobPgid))
	stop()
	select {
	case res := <-done:
		require.Equal(t, "killed", res.Message)
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled run did not end")
	}
	require.Eventually(t, func() bool { return !journaled() }, 10*time.Second, 20*time.Millisecond,
		"a finished run's group leaves the journal")
}
