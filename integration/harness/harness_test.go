package harness

import (
	"fmt"
	"os"
	"os/signal"
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
