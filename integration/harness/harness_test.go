package harness

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envStubborn turns the test binary into a process that ignores SIGINT,
// prints its temp dir and waits: what a replica whose stop hangs looks
// like to Interrupt.
const envStubborn = "CRONIX_HARNESS_TEST_STUBBORN"

func TestMain(m *testing.M) {
	if os.Getenv(envStubborn) == "1" {
		signal.Ignore(syscall.SIGINT)
		fmt.Printf("ready tmp=%s\n", os.TempDir())
		time.Sleep(time.Hour) // until Interrupt's SIGQUIT or kill
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestInterruptDumpsAStuckProcess: a process still running at Interrupt's
// timeout is reported, ends with the Go runtime's goroutine dump in its
// output, and is gone; the processes Start runs get ProcessTempDir as
// their TMPDIR.
func TestInterruptDumpsAStuckProcess(t *testing.T) {
	ProcessTempDir = t.TempDir()
	t.Cleanup(func() { ProcessTempDir = "" })

	p, err := Start(os.Args[0], []string{envStubborn + "=1"}, "-test.run=^$")
	require.NoError(t, err)
	out, err := p.WaitOutput(regexp.MustCompile(`ready tmp=\S+`), 30*time.Second)
	require.NoError(t, err)
	require.Contains(t, out, "ready tmp="+ProcessTempDir, "the process's TMPDIR is ProcessTempDir")

	err = p.Interrupt(200 * time.Millisecond)
	require.ErrorContains(t, err, "did not exit within 200ms after SIGINT")
	require.Contains(t, p.Output(), "goroutine 1 ", "the output ends with the goroutine dump")
	select {
	case <-p.Done():
	default:
		t.Fatal("Interrupt returned while the process runs")
	}
}

// failedTB is a test that has failed, recording what it logs.
type failedTB struct{ logs []string }

func (f *failedTB) Failed() bool { return true }
func (f *failedTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// TestCloseKeepingLogsDumpsRunningReplicas: after a failed test, a replica
// still running is quit with a goroutine dump, and its log (dump included)
// is written where the test says.
func TestCloseKeepingLogsDumpsRunningReplicas(t *testing.T) {
	p, err := Start(os.Args[0], []string{envStubborn + "=1"}, "-test.run=^$")
	require.NoError(t, err)
	_, err = p.WaitOutput(regexp.MustCompile(`ready tmp=\S+`), 30*time.Second)
	require.NoError(t, err)
	c := &Cluster{Replicas: []*Replica{{ID: "s1", proc: p}}}

	name := fmt.Sprintf("cronix-harness-test-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(os.TempDir(), name)) })
	tb := &failedTB{}
	c.CloseKeepingLogs(tb, name)

	select {
	case <-p.Done():
	default:
		t.Fatal("the replica still runs after CloseKeepingLogs")
	}
	require.Len(t, tb.logs, 1)
	require.Contains(t, tb.logs[0], filepath.Join(os.TempDir(), name))
	log, err := os.ReadFile(filepath.Join(os.TempDir(), name, "s1.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "ready tmp=")
	require.Contains(t, string(log), "goroutine 1 ", "the replica's log ends with its goroutine dump")
}
