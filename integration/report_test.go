package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// TestDailyReportFromLeader: the standalone's trigger leader computes the
// daily report while jobs fire; once the jobs are disabled and their runs
// finished, GET /api/v1/reports/daily counts exactly the runs the runs API
// lists, by status.
func TestDailyReportFromLeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startStandaloneAlerting(t, filepath.Join(dir, "data"), []string{"--report-interval", "1s"}, nil)

	bodies := map[string]map[string]any{
		"report-ok":   {"name": "report-ok", "schedule": "*/1 * * * * *", "handler": "shell", "params": map[string]any{"script": "exit 0"}},
		"report-fail": {"name": "report-fail", "schedule": "*/1 * * * * *", "handler": "shell", "params": map[string]any{"script": "exit 2"}},
	}
	ids := map[string]int64{}
	for name, body := range bodies {
		j, err := s.api.CreateJobBody(body)
		require.NoError(t, err)
		ids[name] = j.ID
	}
	for name, id := range ids {
		waitRuns(t, s.api, id, 60*time.Second, func(r []harness.Run) bool { return len(r) >= 3 })
		body := bodies[name]
		body["enabled"] = false
		code, err := s.api.Do(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", id), body, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	// Every run finished, counted by status through the runs API.
	want := map[int64]map[string]int{}
	for _, id := range ids {
		runs := waitRuns(t, s.api, id, 60*time.Second, func(r []harness.Run) bool {
			for _, x := range r {
				if x.Status == "triggered" || x.Status == "running" {
					return false
				}
			}
			return true
		})
		want[id] = map[string]int{}
		for _, r := range runs {
			want[id][r.Status]++
		}
	}
	require.Positive(t, want[ids["report-ok"]]["success"])
	require.Positive(t, want[ids["report-fail"]]["failed"])

	now := time.Now().UTC()
	query := fmt.Sprintf("/api/v1/reports/daily?from=%s&to=%s&page_size=100",
		now.AddDate(0, 0, -1).Format("2006-01-02"), now.AddDate(0, 0, 1).Format("2006-01-02"))
	var got map[int64]map[string]int
	require.Eventually(t, func() bool {
		var out struct {
			Items []struct {
				JobID int64          `json:"job_id"`
				Runs  map[string]int `json:"runs"`
			} `json:"items"`
		}
		code, err := s.api.Do(http.MethodGet, query, nil, &out)
		if err != nil || code != http.StatusOK {
			return false
		}
		got = map[int64]map[string]int{}
		for _, it := range out.Items {
			if got[it.JobID] == nil {
				got[it.JobID] = map[string]int{}
			}
			for st, n := range it.Runs {
				if n > 0 && st != "total" {
					got[it.JobID][st] += n
				}
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	}, 30*time.Second, 200*time.Millisecond, "report %v, runs API %v", got, want)
}
