package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// runSecuritySuite covers security events and the run-node lookup the
// result endpoint uses, on every dialect.
func runSecuritySuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("SecurityEvents", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
		require.NoError(t, s.InsertSecurityEvents(ctx, "n1", nil))
		require.NoError(t, s.InsertSecurityEvents(ctx, "n1", []cluster.SecurityEvent{
			{At: at, Kind: "unsigned_record", Key: "/Cronix/run/n1/1-1", Reason: "record is not signed"},
			{At: at.Add(time.Second), Kind: "stale_term", Key: "/Cronix/run/n1/1-2", Reason: "term 1"},
		}))
		got, total, err := s.ListSecurityEvents(ctx, store.Page{Page: 1, PageSize: 1})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Len(t, got, 1)
		require.Equal(t, "stale_term", got[0].Kind, "newest first")
		require.Equal(t, "n1", got[0].Node)
		require.Equal(t, "/Cronix/run/n1/1-2", got[0].Key)
		require.True(t, got[0].At.Equal(at.Add(time.Second)))

		_, err = s.InsertRuns(ctx, []store.Run{
			{FireID: "1-1", JobID: 1, Trigger: cluster.TriggerSchedule, Node: "n1", ScheduledAt: at},
			{FireID: "1-2", JobID: 1, Trigger: cluster.TriggerSchedule, ScheduledAt: at, Status: cluster.StatusFailed},
		})
		require.NoError(t, err)
		nodes, err := s.RunNodes(ctx, []string{"1-1", "1-2", "1-3"})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"1-1": "n1", "1-2": ""}, nodes)
	})
}
