package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

// Dispatch ahead through the real binary: with --dispatch-ahead 3s every
// fire is recorded and dispatched before its time and still starts at its
// time, never before; disabling a job whose next fire is already on the
// node cancels that fire (skipped, never run).
func TestDispatchAheadEndToEnd(t *testing.T) {
	s := newStandalone(t, t.TempDir(), "--dispatch-ahead", "3s")
	s = startStandalone(t, s.dataDir, s)

	every, err := s.api.CreateJob(harness.Job{Name: "ahead-every-second", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"date +%s%N"}`)})
	require.NoError(t, err)
	runs := waitRuns(t, s.api, every.ID, 30*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 3 })
	requireOncePerSecond(t, runs)
	for _, r := range successes(runs) {
		ns, err := strconv.ParseInt(strings.TrimSpace(r.Output), 10, 64)
		require.NoError(t, err, "output %q", r.Output)
		started := time.Unix(0, ns)
		require.False(t, started.Before(r.ScheduledAt), "fire %s ran at %s, before its time %s", r.FireID, started, r.ScheduledAt)
		require.NotNil(t, r.DispatchedAt)
		require.True(t, r.DispatchedAt.Before(r.ScheduledAt), "fire %s dispatched at %s, not ahead of %s",
			r.FireID, r.DispatchedAt, r.ScheduledAt)
	}

	// A once job 4–5 s away: wait until its fire is dispatched (a triggered
	// run, 3 s ahead), then disable the job before its time.
	marker := t.TempDir() + "/ran"
	at := time.Now().Add(5 * time.Second).Truncate(time.Second)
	tenth, err := s.api.CreateJobBody(map[string]any{"name": "ahead-disabled", "schedule_type": "once",
		"schedule": at.Format(time.RFC3339), "handler": "shell", "params": map[string]string{"script": "touch " + marker}})
	require.NoError(t, err)
	var pending harness.Run
	waitRuns(t, s.api, tenth.ID, 30*time.Second, func(rs []harness.Run) bool {
		for _, r := range rs {
			if r.Status == cluster.StatusTriggered && time.Until(r.ScheduledAt) > time.Second {
				pending = r
				return true
			}
		}
		return false
	})
	body := map[string]any{"name": "ahead-disabled", "schedule_type": "once", "schedule": at.Format(time.RFC3339),
		"handler": "shell", "params": map[string]string{"script": "touch " + marker}, "enabled": false}
	var resp map[string]any
	code, err := s.api.Do("PUT", fmt.Sprintf("/api/v1/jobs/%d", tenth.ID), body, &resp)
	require.NoError(t, err)
	require.Equal(t, 200, code, "%v", resp)

	runs = waitRuns(t, s.api, tenth.ID, 30*time.Second, func(rs []harness.Run) bool {
		for _, r := range rs {
			if r.FireID == pending.FireID {
				return cluster.Terminal(r.Status)
			}
		}
		return false
	})
	for _, r := range runs {
		if r.FireID == pending.FireID {
			require.Equal(t, cluster.StatusSkipped, r.Status, "%+v", r)
			require.Contains(t, r.Message, "disabled")
		}
		require.NotEqual(t, cluster.StatusSuccess, r.Status, "the disabled job ran: %+v", r)
	}
	require.NoFileExists(t, marker)
}
