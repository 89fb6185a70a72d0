//go:build linux

package procgroup

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envFakePlugin turns the test binary into a "plugin" that starts a
// guarded group for each line of its value (a shell script), prints the
// groups' pgids, and waits to be killed.
const envFakePlugin = "CRONIX_PROCGROUP_TEST_PLUGIN"

func TestMain(m *testing.M) {
	if scripts := os.Getenv(envFakePlugin); scripts != "" {
		var cmds []*exec.Cmd
		for _, script := range strings.Split(scripts, "\n") {
			cmd := exec.Command("/bin/sh", "-c", script)
			if err := Start(cmd); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Println(cmd.Process.Pid)
			cmds = append(cmds, cmd)
		}
		for _, cmd := range cmds {
			_ = cmd.Wait()
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// marker is a sleep duration no other process uses: its cmdline finds
// the processes a test started.
func marker() string { return fmt.Sprintf("60.%09d", rand.IntN(1_000_000_000)) }

// withMarker lists the live sleep processes whose argument is m (not the
// shells whose script names it).
func withMarker(t *testing.T, m string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Equal(b, []byte("sleep\x00"+m+"\x00")) {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				continue // a zombie is dead already
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestPluginDeathKillsTheWholeGroup: a plugin killed with SIGKILL leaves no
// process of the groups it started, not even a shell's child (which the
// parent-death signal alone would leave behind), and their journal entries
// are gone. The plugin's stderr, which the guard shares, has no reader any
// more (as when the node died first): the guard still kills every group.
// With a journal the guard learns the groups from it (the second group is
// written only there); without one, from the plugin's lines.
func TestPluginDeathKillsTheWholeGroup(t *testing.T) {
	for _, journaled := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journaled), func(t *testing.T) {
			dir := ""
			if journaled {
				dir = t.TempDir()
			}
			testPluginDeath(t, dir)
		})
	}
}

func testPluginDeath(t *testing.T, dir string) {
	m1, m2 := marker(), marker()
	exe, err := os.Executable()
	require.NoError(t, err)
	plugin := exec.Command(exe)
	plugin.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, EnvDir+"=") }),
		envFakePlugin+"=sleep "+m1+"; true\nsleep "+m2+"; true")
	if dir != "" {
		plugin.Env = append(plugin.Env, EnvDir+"="+dir)
	}
	out, err := plugin.StdoutPipe()
	require.NoError(t, err)
	stderrR, stderrW, err := os.Pipe()
	require.NoError(t, err)
	plugin.Stderr = stderrW
	require.NoError(t, plugin.Start())
	require.NoError(t, stderrW.Close())
	t.Cleanup(func() { _ = plugin.Process.Kill(); _ = plugin.Wait() })
	rd := bufio.NewReader(out)
	var pgids []int
	for range 2 {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		pgid, err := strconv.Atoi(strings.TrimSpace(line))
		require.NoError(t, err)
		pgids = append(pgids, pgid)
		t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	}

	require.Eventually(t, func() bool { return len(withMarker(t, m1)) == 1 && len(withMarker(t, m2)) == 1 },
		10*time.Second, 20*time.Millisecond, "the shells' sleeps run")
	if dir != "" {
		listed, err := Journaled(dir)
		require.NoError(t, err)
		for _, pgid := range pgids {
			start, err := StartTime(pgid)
			require.NoError(t, err)
			require.Equal(t, start, listed[pgid], "the running group is in the journal")
		}
	}

	require.NoError(t, stderrR.Close()) // nobody reads the plugin's (and the guard's) stderr now
	require.NoError(t, plugin.Process.Signal(syscall.SIGKILL))
	require.Eventually(t, func() bool { return len(withMarker(t, m1)) == 0 && len(withMarker(t, m2)) == 0 },
		10*time.Second, 20*time.Millisecond, "no process of the groups outlives the plugin")
	if dir != "" {
		require.Eventually(t, func() bool {
			ents, err := os.ReadDir(dir)
			return err == nil && len(ents) == 0
		}, 10*time.Second, 20*time.Millisecond, "the guard removes the journal entries")
	}
}

// TestGuardReadsTheJournalThenItsLines: after a "j" line the guard's list
// is the journal, changed by the lines that follow it (those the journal
// could not take): a group the journal lists is killed, one a later line
// unlists is spared, one only a later line lists is killed, and the lines
// before the "j" line do not count.
func TestGuardReadsTheJournalThenItsLines(t *testing.T) {
	dir := t.TempDir()
	mJournal, mUnlisted, mLine, mBefore := marker(), marker(), marker(), marker()
	pJournal := startGroup(t, "sleep "+mJournal+"; true")
	pUnlisted := startGroup(t, "sleep "+mUnlisted+"; true")
	pLine := startGroup(t, "sleep "+mLine+"; true")
	pBefore := startGroup(t, "sleep "+mBefore+"; true")
	for _, m := range []string{mJournal, mUnlisted, mLine, mBefore} {
		require.Eventually(t, func() bool { return len(withMarker(t, m)) == 1 }, 10*time.Second, 20*time.Millisecond)
	}
	start := func(pid int) uint64 {
		st, err := StartTime(pid)
		require.NoError(t, err)
		return st
	}
	path := filepath.Join(dir, journalPrefix+"1-x")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "+ %d %d\n+ %d %d\n",
		pJournal, start(pJournal), pUnlisted, start(pUnlisted)), 0o600))
	in := fmt.Sprintf("+ %d %d\nj %s\n- %d\n+ %d %d\n",
		pBefore, start(pBefore), path, pUnlisted, pLine, start(pLine))

	killListed(strings.NewReader(in))
	require.Eventually(t, func() bool { return len(withMarker(t, mJournal)) == 0 && len(withMarker(t, mLine)) == 0 },
		10*time.Second, 20*time.Millisecond, "the journal's group and the line's group are killed")
	require.Len(t, withMarker(t, mUnlisted), 1, "a group unlisted after the journal is spared")
	require.Len(t, withMarker(t, mBefore), 1, "a line before the journal was named does not count")
	_, err := os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "the guard removes the journal")
}

// TestGuardWithoutItsJournal: a journal already gone (the plugin closed it,
// or the node's next start swept it) is no problem: the groups listed after
// it are still killed, and no read error is reported. A journal that
// cannot be read is reported.
func TestGuardWithoutItsJournal(t *testing.T) {
	var warned bytes.Buffer
	warnOut = &warned
	t.Cleanup(func() { warnOut = os.Stderr })

	m := marker()
	pgid := startGroup(t, "sleep "+m+"; true")
	require.Eventually(t, func() bool { return len(withMarker(t, m)) == 1 }, 10*time.Second, 20*time.Millisecond)
	st, err := StartTime(pgid)
	require.NoError(t, err)
	gone := filepath.Join(t.TempDir(), journalPrefix+"1-gone")
	killListed(strings.NewReader(fmt.Sprintf("j %s\n+ %d %d\n", gone, pgid, st)))
	require.Eventually(t, func() bool { return len(withMarker(t, m)) == 0 },
		10*time.Second, 20*time.Millisecond, "the group listed after the missing journal is killed")
	require.NotContains(t, warned.String(), "reading the journal", "a journal already gone is not reported")

	unreadable := t.TempDir() // a directory: opened, but not read as a journal
	killListed(strings.NewReader("j " + unreadable + "\n"))
	require.Contains(t, warned.String(), "guard: reading the journal "+unreadable)
}

// startGroup starts a shell running script in a group of its own, not
// guarded, and returns its pgid.
func startGroup(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	go func() { _ = cmd.Wait() }() // reaped as soon as it dies, like an orphan by init
	return pgid
}

// TestSweepKillsOnlyRecordedLiveGroups: Sweep kills a journaled group whose
// leader is the recorded process and one whose leader is gone but whose
// members remain; it spares a group whose pid now belongs to another
// process (another start time), and empties the journal.
func TestSweepKillsOnlyRecordedLiveGroups(t *testing.T) {
	dir := t.TempDir()
	mLive, mOrphan, mReused := marker(), marker(), marker()
	live := startGroup(t, "sleep "+mLive+"; true")
	orphan := startGroup(t, "sleep "+mOrphan+" & exit 0") // the leader exits, its child stays in the group
	reused := startGroup(t, "sleep "+mReused+"; true")
	for _, m := range []string{mLive, mOrphan, mReused} {
		require.Eventually(t, func() bool { return len(withMarker(t, m)) == 1 }, 10*time.Second, 20*time.Millisecond)
	}
	require.Eventually(t, func() bool { _, err := StartTime(orphan); return err != nil }, 10*time.Second, 20*time.Millisecond,
		"the orphan group's leader is gone")

	write := func(pgid int, start uint64) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(pgid)), []byte(strconv.FormatUint(start, 10)+"\n"), 0o600))
	}
	st, err := StartTime(live)
	require.NoError(t, err)
	write(live, st)
	// The orphan's sleep started after its leader: a start time a bit
	// before the sleep's stands for the leader's.
	sleeps := withMarker(t, mOrphan)
	sleepStart, err := StartTime(sleeps[0])
	require.NoError(t, err)
	write(orphan, sleepStart)
	st, err = StartTime(reused)
	require.NoError(t, err)
	write(reused, st+1) // another process than the one recorded
	require.NoError(t, os.WriteFile(filepath.Join(dir, "not-a-pgid"), []byte("1\n"), 0o600))

	killed, err := Sweep(dir, nil)
	require.NoError(t, err)
	require.Equal(t, 2, killed)
	require.Eventually(t, func() bool { return len(withMarker(t, mLive)) == 0 && len(withMarker(t, mOrphan)) == 0 },
		10*time.Second, 20*time.Millisecond, "the recorded groups are killed")
	require.Len(t, withMarker(t, mReused), 1, "a group whose leader is another process is spared")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "the journal is emptied")

	killed, err = Sweep(filepath.Join(dir, "missing"), nil)
	require.NoError(t, err)
	require.Zero(t, killed)
}

// TestDoneUnlistsTheGroup: a finished run's group leaves the journal.
func TestDoneUnlistsTheGroup(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	require.NoError(t, Start(cmd))
	pgid := cmd.Process.Pid
	listed, err := Journaled(dir)
	require.NoError(t, err)
	require.Contains(t, listed, pgid)
	require.NoError(t, cmd.Wait())
	Done(pgid)
	listed, err = Journaled(dir)
	require.NoError(t, err)
	require.NotContains(t, listed, pgid)
}

// TestJournalAppendsAndCompacts: the journal is one file of this process
// whatever the number of runs; it lists exactly the live groups, also
// after compactions, and Sweep reads it (and an earlier-layout file) and
// empties the directory.
func TestJournalAppendsAndCompacts(t *testing.T) {
	dir := t.TempDir()
	defer func(n int) { compactMin = n }(compactMin)
	compactMin = 16
	var j journal
	live := map[int]uint64{}
	require.NoError(t, j.open(dir, live))
	defer j.close()
	for i := range 100 {
		pgid := 1_000_000 + i
		live[pgid] = uint64(i + 1)
		j.append(fmt.Sprintf("+ %d %d\n", pgid, i+1), live)
		if i%3 != 0 { // a third stays live
			delete(live, pgid)
			j.append(fmt.Sprintf("- %d\n", pgid), live)
		}
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, ents, 1, "one journal file")
		listed, err := Journaled(dir)
		require.NoError(t, err)
		require.Equal(t, live, listed)
	}
	require.Less(t, j.lines, 2*compactMin+compactRatio*len(live), "compacted along the way")

	// An earlier-layout entry next to it, and a compaction's leftover.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "1000500"), []byte("7\n"), 0o600))
	require.NoError(t, os.WriteFile(j.path+".tmp", []byte("+ 1000600 8\n"), 0o600))
	listed, err := Journaled(dir)
	require.NoError(t, err)
	require.Equal(t, uint64(7), listed[1000500])
	require.NotContains(t, listed, 1000600, "a compaction's leftover is not read")
	require.Len(t, listed, len(live)+1)

	killed, err := Sweep(dir, nil) // no such groups: nothing to kill
	require.NoError(t, err)
	require.Zero(t, killed)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents)
}

// TestParseStat: the process group and start time are fields 5 and 22,
// counted after the last ')' (a comm may hold blanks and parentheses);
// a short or garbled line is an error, not a zero.
func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c)) S 1 777 777 0 -1 4194560 101 0 0 0 3 1 0 0 20 0 1 0 987654321 1234 56 18446744073709551615\n"
	st, err := parseStat(4242, []byte(line))
	require.NoError(t, err)
	require.Equal(t, procStat{pgrp: 777, start: 987654321}, st)

	for _, bad := range []string{
		"4242 no parenthesis S 1 777",
		"4242 (a) S 1 777 777 0 -1 4194560", // ends before starttime
		"4242 (a) S 1 x77 777 0 -1 4194560 101 0 0 0 3 1 0 0 20 0 1 0 987654321",
		"4242 (a) S 1 777 777 0 -1 4194560 101 0 0 0 3 1 0 0 20 0 1 0 -5",
	} {
		_, err := parseStat(4242, []byte(bad))
		require.Error(t, err, bad)
	}
}

// TestReadStatOfALiveProcess: readStat of a child started in a group of
// its own reads that group and the start time /proc shows for it.
func TestReadStatOfALiveProcess(t *testing.T) {
	cmd := exec.Command("sleep", marker())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, err := readStat(cmd.Process.Pid)
	require.NoError(t, err)
	require.Equal(t, cmd.Process.Pid, st.pgrp)

	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	require.NoError(t, err)
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	require.Equal(t, f[19], strconv.FormatUint(st.start, 10))

	_, err = readStat(1 << 30) // above pid_max: no such process
	require.ErrorIs(t, err, syscall.ENOENT)
}

func BenchmarkReadStat(b *testing.B) {
	pid := os.Getpid()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readStat(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// bufGuard stands in for the guard's stdin.
type bufGuard struct{ bytes.Buffer }

func (*bufGuard) Close() error { return nil }

// TestAFailedJournalWriteStartsACompleteJournal: when a line cannot be
// written to the journal, a new journal listing every live group replaces
// it and the guard is told its path; the guard never gets the run's line
// itself, and the journal stays complete.
func TestAFailedJournalWriteStartsACompleteJournal(t *testing.T) {
	dir := t.TempDir()
	g := &bufGuard{}
	r := &registry{live: map[int]uint64{}, dir: dir, dirSet: true, guard: g}
	defer r.journal.close()
	r.add(100, 1)
	r.add(101, 2)
	first := r.journal.path
	require.Equal(t, "j "+first+"\n", g.String(), "the guard is told the journal, not the runs")

	require.NoError(t, r.journal.f.Close()) // the next write fails
	g.Reset()
	r.add(102, 3)
	require.NotEqual(t, first, r.journal.path)
	require.Equal(t, "j "+r.journal.path+"\n", g.String(), "the guard is told the new journal")
	_, err := os.Stat(first)
	require.ErrorIs(t, err, fs.ErrNotExist, "the incomplete journal is removed")
	listed, err := Journaled(dir)
	require.NoError(t, err)
	require.Equal(t, map[int]uint64{100: 1, 101: 2, 102: 3}, listed)

	g.Reset()
	r.remove(101)
	require.Empty(t, g.String())
	listed, err = Journaled(dir)
	require.NoError(t, err)
	require.Equal(t, map[int]uint64{100: 1, 102: 3}, listed)

	// No journal can be written any more (its directory cannot be made):
	// the guard gets the list itself, and the old journal is gone.
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	old := r.journal.path
	r.dir = filepath.Join(file, "procs")
	g.Reset()
	r.add(103, 4)
	lines := strings.Split(strings.TrimSpace(g.String()), "\n")
	require.Equal(t, "j ", lines[0], "an empty journal path: no journal")
	require.ElementsMatch(t, []string{"+ 100 1", "+ 102 3", "+ 103 4"}, lines[1:])
	_, err = os.Stat(old)
	require.ErrorIs(t, err, fs.ErrNotExist)
	g.Reset()
	r.remove(100)
	require.Equal(t, "- 100\n", g.String(), "without a journal every line goes to the guard")
}
