package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunAndProcKeysRoundTrip(t *testing.T) {
	t.Parallel()
	k := NewKeys("/R")
	node, fire, err := k.ParseRunKey(k.Run("n1", "7-1000-s2"))
	require.NoError(t, err)
	require.Equal(t, "n1", node)
	require.Equal(t, "7-1000-s2", fire)
	_, _, err = k.ParseRunKey(k.RunPrefix("n1"))
	require.Error(t, err)

	node, id, pid, err := k.ParseProcKey(k.Proc("n2", 7, 99))
	require.NoError(t, err)
	require.Equal(t, "n2", node)
	require.Equal(t, int64(7), id)
	require.Equal(t, 99, pid)
	_, _, _, err = k.ParseProcKey(k.ProcPrefix("n2") + "7")
	require.Error(t, err)
}

func TestShardFireID(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1000)
	require.Equal(t, "7-1000-s2", ShardFireID(7, at, 2))
	id, err := JobIDOfFire(ShardFireID(7, at, 2))
	require.NoError(t, err)
	require.Equal(t, int64(7), id)
}

func TestScheduledMilliOfFire(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1764000000123)
	for _, id := range []string{FireID(7, at), ShardFireID(7, at, 2)} {
		ms, ok := ScheduledMilliOfFire(id)
		require.True(t, ok, id)
		require.Equal(t, at.UnixMilli(), ms, id)
	}
	for _, id := range []string{ManualFireID(7, 42), "7", "-1000", "7-", "7-x", "7-1000-m3", ""} {
		_, ok := ScheduledMilliOfFire(id)
		require.False(t, ok, id)
	}
}
