package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

func TestFixedDelayAndOnce(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)

	delay, err := s.api.CreateJobBody(map[string]any{"name": "delay", "schedule_type": "fixed_delay", "schedule": "2",
		"handler": "shell", "params": map[string]any{"script": "sleep 3"}})
	require.NoError(t, err)
	onceAt := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	once, err := s.api.CreateJobBody(map[string]any{"name": "once", "schedule_type": "once", "schedule": onceAt,
		"handler": "shell", "params": map[string]any{"script": "echo once"}})
	require.NoError(t, err)
	tick, err := s.api.CreateJob(harness.Job{Name: "tick", Schedule: "*/1 * * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`)})
	require.NoError(t, err)

	onceRuns := waitRuns(t, s.api, once.ID, 20*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 1 })
	require.Len(t, onceRuns, 1)
	require.Equal(t, "once\n", onceRuns[0].Output)
	want, err := time.Parse(time.RFC3339, onceAt)
	require.NoError(t, err)
	require.True(t, onceRuns[0].ScheduledAt.Equal(want), "once fired at %v, want %v", onceRuns[0].ScheduledAt, want)

	runs := waitRuns(t, s.api, delay.ID, 40*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 3 })
	runs = byScheduled(successes(runs))
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		require.NotNil(t, prev.FinishedAt)
		require.NotNil(t, cur.StartedAt)
		gap := cur.StartedAt.Sub(*prev.FinishedAt)
		require.GreaterOrEqual(t, gap, 2*time.Second,
			"fixed_delay run %s started %s after %s finished", cur.FireID, gap, prev.FireID)
		require.True(t, prev.FinishedAt.Sub(*prev.StartedAt) >= 3*time.Second, "the script sleeps 3s: %+v", prev)
	}
	all, _, err := s.api.Runs(delay.ID, 500)
	require.NoError(t, err)
	requireNoOverlap(t, all)

	// Restart on the same data: the once job does not fire again.
	require.NoError(t, s.proc.Interrupt(30*time.Second))
	restarted := time.Now()
	s = startStandalone(t, dataDir, s)
	waitRuns(t, s.api, tick.ID, 30*time.Second, func(rs []harness.Run) bool {
		return len(successes(scheduledAfter(rs, restarted.Add(2*time.Second)))) >= 2
	})
	onceRuns, total, err := s.api.Runs(once.ID, 500)
	require.NoError(t, err)
	require.Equal(t, 1, total, "once job fired again after restart: %+v", onceRuns)
	all, _, err = s.api.Runs(delay.ID, 500)
	require.NoError(t, err)
	requireNoOverlap(t, all)
}

// requireNoOverlap checks that no two runs of a job ran at the same time.
func requireNoOverlap(t *testing.T, runs []harness.Run) {
	t.Helper()
	runs = byScheduled(runs)
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		if prev.FinishedAt == nil || cur.StartedAt == nil {
			continue
		}
		require.False(t, cur.StartedAt.Before(*prev.FinishedAt), "run %s started before %s finished", cur.FireID, prev.FireID)
	}
	running := 0
	for _, r := range runs {
		if r.Status == cluster.StatusRunning {
			running++
		}
	}
	require.LessOrEqual(t, running, 1, "at most one run in progress: %+v", runs)
}

func TestCompatJobFiresEveryTenSeconds(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)

	call := func(path string, form url.Values) map[string]any {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.api.Base+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("XXL-JOB-ACCESS-TOKEN", s.api.Token)
		resp, err := s.api.HTTP.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
		var out map[string]any
		require.NoError(t, json.Unmarshal(b, &out), "%s", b)
		return out
	}
	groupID := func() float64 {
		out := call("/jobgroup/list", url.Values{"pageSize": {"100"}})
		data, _ := out["data"].([]any)
		for _, g := range data {
			m := g.(map[string]any)
			if m["appname"] == "default" {
				return m["id"].(float64)
			}
		}
		return 0
	}
	gid := groupID()
	if gid == 0 {
		// The node's registration creates its group too (catalog.Sync),
		// maybe between the list and this request: then it answers 409.
		code, err := s.api.Do(http.MethodPost, "/api/v1/groups", map[string]any{"appname": "default"}, nil)
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, code)
		gid = groupID()
	}
	require.NotZero(t, gid, "the default group is listed")

	out := call("/jobinfo/add", url.Values{
		"jobGroup": {strconv.FormatInt(int64(gid), 10)}, "jobDesc": {"compat"}, "executorRouteStrategy": {"FIRST"},
		"scheduleType": {"CRON"}, "scheduleConf": {"0/10 * * * * ? *"}, "jobCron": {"0/10 * * * * ? *"},
		"glueType": {"BEAN"}, "executorHandler": {"shell"}, "executorBlockStrategy": {"SERIAL_EXECUTION"},
		"childJobId": {""}, "executorTimeout": {"0"}, "executorFailRetryCount": {"0"}, "author": {"it"},
		"alarmEmail": {""}, "executorParam": {"echo compat"}, "triggerStatus": {"1"},
	})
	require.EqualValues(t, 200, out["code"], "%v", out)
	id, err := strconv.ParseInt(out["content"].(string), 10, 64)
	require.NoError(t, err)

	runs := waitRuns(t, s.api, id, 25*time.Second, func(rs []harness.Run) bool { return len(successes(rs)) >= 2 })
	ok := byScheduled(successes(runs))
	for _, r := range ok {
		require.Equal(t, "compat\n", r.Output)
		require.Zero(t, r.ScheduledAt.Unix()%10, "scheduled at a multiple of 10 s: %v", r.ScheduledAt)
		require.Zero(t, r.ScheduledAt.Nanosecond(), "%v", r.ScheduledAt)
	}
	require.Equal(t, 10*time.Second, ok[1].ScheduledAt.Sub(ok[0].ScheduledAt), "consecutive fires 10 s apart")
	requireOncePerSecond(t, runs)
}
