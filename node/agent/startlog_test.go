package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The starts of a batch are in the file when startedBatch returns, one
// line each; the next process sees those without an end line.
func TestStartedBatchJournalsEveryFire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, prev, err := openStartLog(dir)
	require.NoError(t, err)
	require.Empty(t, prev)
	now := time.Now().UTC().Truncate(time.Millisecond)
	es := []startEntry{
		{FireID: "1-1000", JobID: 1, Trigger: "schedule", ScheduledAt: now, StartedAt: now},
		{FireID: "2-1000", JobID: 2, Trigger: "schedule", ScheduledAt: now, StartedAt: now},
		{FireID: "3-1000", JobID: 3, Trigger: "schedule", ScheduledAt: now, StartedAt: now},
	}
	require.NoError(t, l.startedBatch(es))
	b, err := os.ReadFile(filepath.Join(dir, startLogName))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(b), "\n"))

	l.ended("2-1000")
	require.NoError(t, l.keysDeleted([]string{"2-1000"}))
	l.close()
	got, err := readStartLog(filepath.Join(dir, startLogName))
	require.NoError(t, err)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.FireID)
		require.True(t, e.ScheduledAt.Equal(now))
	}
	require.Equal(t, []string{"1-1000", "3-1000"}, ids)
}
