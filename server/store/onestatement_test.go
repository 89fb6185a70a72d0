package store

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

// TestSQLiteTickIsOneStatementWithoutTransaction: on a SQLite file a
// tick's runs (3,000 jobs) and then their results are each written by one
// statement outside a transaction (no BEGIN: SQLite keeps no statement
// journal), with the same outcome as before: every run inserted once, a
// replay inserting none, every result finishing its run once. A batch
// larger than one statement still runs in one transaction.
func TestSQLiteTickIsOneStatementWithoutTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var mu sync.Mutex
	ops := map[string]int{}
	s, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "c.db"), WithQueryObserver(func(op string, _ time.Duration) {
		mu.Lock()
		ops[op]++
		mu.Unlock()
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.stopCheckpoints() // its PRAGMAs are not this test's statements
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		c := ops
		ops = map[string]int{}
		return c
	}

	at := time.Date(2026, 3, 1, 0, 0, 1, 0, time.UTC)
	runs := make([]Run, 3000)
	results := make([]cluster.RunResult, len(runs))
	for i := range runs {
		job := int64(i + 1)
		runs[i] = Run{FireID: cluster.FireID(job, at), JobID: job, Trigger: cluster.TriggerSchedule,
			Status: cluster.StatusTriggered, Node: "n1", ScheduledAt: at, DispatchedAt: &at, Attempt: 1}
		results[i] = cluster.RunResult{FireID: runs[i].FireID, JobID: job, Status: cluster.StatusSuccess, ScheduledAt: at}
	}
	count()
	inserted, err := s.InsertRuns(ctx, runs)
	require.NoError(t, err)
	require.Len(t, inserted, len(runs))
	require.Equal(t, map[string]int{"INSERT": 1}, count(), "one INSERT, no BEGIN or COMMIT")

	again, err := s.InsertRuns(ctx, runs)
	require.NoError(t, err)
	require.Empty(t, again, "a replay inserts nothing")
	require.Equal(t, map[string]int{"INSERT": 1}, count())

	fin, err := s.ApplyResultsFinished(ctx, results)
	require.NoError(t, err)
	require.Len(t, fin, len(runs))
	require.Equal(t, map[string]int{"INSERT": 1}, count(), "one upsert, no BEGIN or COMMIT")
	fin, err = s.ApplyResultsFinished(ctx, results)
	require.NoError(t, err)
	require.Empty(t, fin, "a replay finishes nothing")
	count()

	// Past one statement's rows: one transaction around the statements.
	big := make([]Run, sqliteBatchRows+1)
	later := at.Add(time.Second)
	for i := range big {
		job := int64(i + 1)
		big[i] = Run{FireID: cluster.FireID(job, later), JobID: job, Trigger: cluster.TriggerSchedule,
			Status: cluster.StatusTriggered, ScheduledAt: later, Attempt: 1}
	}
	inserted, err = s.InsertRuns(ctx, big)
	require.NoError(t, err)
	require.Len(t, inserted, len(big))
	c := count()
	require.Equal(t, 2, c["INSERT"])
	require.Equal(t, 1, c["BEGIN"])
	_, n, err := s.FindRuns(ctx, RunFilter{}, Page{Page: 1, PageSize: 1})
	require.NoError(t, err)
	require.Equal(t, len(runs)+len(big), n)
}
