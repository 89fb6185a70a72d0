package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// TestCommitsLeaveTheCheckpointToTheCheckpointer: a commit that takes the
// WAL well past SQLite's default 1,000 pages leaves its pages in the WAL
// (no checkpoint on the write path); the store's checkpointer copies them
// into the database file, beside the writers.
func TestCommitsLeaveTheCheckpointToTheCheckpointer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(ctx, "sqlite://"+path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.stopCheckpoints() // this test runs the checkpointer when it wants it
	require.NoError(t, s.checkpoint(ctx))
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Size()
	}
	before := size(path)

	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	runs := make([]Run, 30000)
	for i := range runs {
		sec := at.Add(time.Duration(i/1000) * time.Second)
		runs[i] = Run{FireID: cluster.FireID(int64(i%1000+1), sec), JobID: int64(i%1000 + 1), Trigger: cluster.TriggerSchedule,
			Status: cluster.StatusTriggered, Node: fmt.Sprintf("node-%d", i%7), ScheduledAt: sec, DispatchedAt: &sec, Attempt: 1}
	}
	_, err = s.InsertRuns(ctx, runs)
	require.NoError(t, err)
	wal := size(path + "-wal")
	require.Greater(t, wal, int64(2000*4096), "the insert wrote fewer pages than this test needs")
	require.Equal(t, before, size(path), "the commit checkpointed: the database file changed")

	s.startCheckpoints(10 * time.Millisecond)
	require.Eventually(t, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Size() >= before+wal/2
	}, 30*time.Second, 10*time.Millisecond, "the checkpointer copied less than half the WAL (%d bytes) in 30 s", wal)
	_, n, err := s.FindRuns(ctx, RunFilter{}, Page{Page: 1, PageSize: 1})
	require.NoError(t, err)
	require.Equal(t, len(runs), n)
}
