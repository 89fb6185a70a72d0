package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/compat"
	"github.com/cronix/cronix/server/store"
)

func TestJobVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)

	body := validJob()
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &job)
	for _, script := range []string{"echo two", "printf '%s\\n' \"three\""} {
		body["params"] = map[string]any{"script": script}
		b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", job.ID), b.token, body, http.StatusOK, &job)
	}
	require.EqualValues(t, 3, job.Revision)

	path := fmt.Sprintf("/api/v1/jobs/%d/versions", job.ID)
	var list api.List[api.JobVersion]
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &list)
	require.Equal(t, 3, list.Total)
	require.Equal(t, 1, list.Page)
	require.Equal(t, api.DefaultPageSize, list.PageSize)
	require.Len(t, list.Items, 3)
	wantScripts := []string{"printf '%s\\n' \"three\"", "echo two", "echo hi"}
	for i, v := range list.Items {
		require.EqualValues(t, 3-i, v.Revision)
		require.Equal(t, "admin", v.SavedBy)
		require.Equal(t, "backup", v.Name)
		require.Equal(t, "shell", v.Handler)
		require.Equal(t, "cron", v.ScheduleType)
		require.Equal(t, "*/5 * * * *", v.Schedule)
		require.False(t, v.SavedAt.IsZero())
		var p struct{ Script string }
		require.NoError(t, json.Unmarshal(v.Params, &p), string(v.Params))
		require.Equal(t, wantScripts[i], p.Script)
	}

	// The wire names, and paging.
	var raw map[string]any
	b.doJSON(http.MethodGet, path+"?page=2&page_size=2", b.token, nil, http.StatusOK, &raw)
	require.EqualValues(t, 3, raw["total"])
	require.EqualValues(t, 2, raw["page"])
	require.EqualValues(t, 2, raw["page_size"])
	items := raw["items"].([]any)
	require.Len(t, items, 1)
	item := items[0].(map[string]any)
	for _, k := range []string{"revision", "name", "schedule_type", "schedule", "timezone", "handler", "params", "saved_at", "saved_by"} {
		require.Contains(t, item, k)
	}
	require.EqualValues(t, 1, item["revision"])
	require.Equal(t, map[string]any{"script": "echo hi"}, item["params"])

	// Errors: login required, bad paging, unknown job.
	b.errorOf(http.MethodGet, path, "", nil, http.StatusUnauthorized)
	b.errorOf(http.MethodGet, path+"?page=0", b.token, nil, http.StatusBadRequest)
	b.errorOf(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/versions", job.ID+100), b.token, nil, http.StatusNotFound)

	// Deleting the job deletes its history.
	b.doJSON(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", job.ID), b.token, nil, http.StatusNoContent, nil)
	b.errorOf(http.MethodGet, path, b.token, nil, http.StatusNotFound)
	versions, total, err := b.store.ListJobVersions(b.ctx, job.ID, store.Page{})
	require.NoError(t, err)
	require.Zero(t, total)
	require.Empty(t, versions)
}

// TestJobVersionsCompatUpdate: a job saved through the xxl-job-compatible
// API (the shared api.Jobs) gets a version too.
func TestJobVersionsCompatUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	compatSrv := b.srv // setup serves the compat API behind the same authorization

	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)
	g, err := b.store.EnsureGroup(b.ctx, job.Group, job.Group)
	require.NoError(t, err)

	form := url.Values{
		"id": {strconv.FormatInt(job.ID, 10)}, "jobGroup": {strconv.FormatInt(g.ID, 10)}, "jobDesc": {"backup"},
		"jobCron": {"0 0/5 * * * ?"}, "glueType": {"GLUE_SHELL"}, "glueSource": {"echo from glue"},
		"executorRouteStrategy": {"FIRST"}, "executorBlockStrategy": {"SERIAL_EXECUTION"},
	}
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, compatSrv.URL+"/jobinfo/update", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(compat.TokenHeader, b.token)
	resp, err := compatSrv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", out)
	require.EqualValues(t, 200, out["code"], "%v", out)

	var list api.List[api.JobVersion]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/versions", job.ID), b.token, nil, http.StatusOK, &list)
	require.Equal(t, 2, list.Total)
	require.Len(t, list.Items, 2)
	require.EqualValues(t, 2, list.Items[0].Revision)
	require.Equal(t, "shell", list.Items[0].Handler)
	require.JSONEq(t, `{"script":"echo from glue"}`, string(list.Items[0].Params))
	require.EqualValues(t, 1, list.Items[1].Revision)
	require.JSONEq(t, `{"script":"echo hi"}`, string(list.Items[1].Params))
	require.Equal(t, "admin", list.Items[1].SavedBy)
}
