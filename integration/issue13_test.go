package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

// xxlCall posts form values to an xxl-job compat path with the
// XXL-JOB-ACCESS-TOKEN header, as an xxl-job portal does, and decodes the reply.
func xxlCall(t *testing.T, api *harness.Client, path string, form url.Values) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, api.Base+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("XXL-JOB-ACCESS-TOKEN", api.Token)
	resp, err := api.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, b)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return out
}

// formOf is a listed /jobinfo/list row as the form body a portal sends back.
func formOf(row map[string]any) url.Values {
	f := url.Values{}
	for k, v := range row {
		switch x := v.(type) {
		case string:
			f.Set(k, x)
		case float64:
			f.Set(k, strconv.FormatFloat(x, 'f', -1, 64))
		case nil:
			f.Set(k, "")
		default:
			b, _ := json.Marshal(x)
			f.Set(k, string(b))
		}
	}
	return f
}

// TestCompatAPIFromAFreshInstall (issue 13, acceptance 2): on a fresh
// standalone, /jobgroup/list shows group "default" with the node; then for a
// Quartz job, a 5-field cron job, an "@every" job and a shell job with
// interpreter and env: /jobinfo/add → /jobinfo/start → it fires →
// /jobinfo/trigger with executorParam runs once with that param →
// /jobinfo/list → /jobinfo/update with the listed body unchanged → the
// native job is identical before and after. The native trigger names the
// fire and run it made.
func TestCompatAPIFromAFreshInstall(t *testing.T) {
	s := startStandalone(t, t.TempDir(), nil)

	var nodeUUID string
	require.Eventually(t, func() bool {
		ids := liveNodes(t, s.api, "default")
		if len(ids) != 1 {
			return false
		}
		nodeUUID = ids[0]
		return true
	}, 30*time.Second, 100*time.Millisecond, "the built-in node registers")
	var gid string
	require.Eventually(t, func() bool {
		out := xxlCall(t, s.api, "/jobgroup/list", url.Values{"pageSize": {"100"}})
		for _, g := range out["data"].([]any) {
			m := g.(map[string]any)
			if m["appname"] == "default" && fmt.Sprint(m["registryList"]) == fmt.Sprint([]any{nodeUUID}) {
				require.EqualValues(t, 0, m["addressType"], "auto-registered")
				gid = strconv.FormatFloat(m["id"].(float64), 'f', -1, 64)
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "/jobgroup/list shows group default with node %s", nodeUUID)

	type kind struct {
		name       string
		form       url.Values // beside the common fields
		storedOut  string     // output of a fire with the stored params
		param      string     // executorParam of the trigger
		triggerOut string     // output of that trigger's run
		id         int64
	}
	kinds := []*kind{
		{name: "quartz", form: url.Values{"scheduleType": {"CRON"}, "scheduleConf": {"0/2 * * * * ? *"},
			"executorHandler": {"cmd"}, "executorParam": {"/bin/echo quartz"}},
			storedOut: "quartz\n", param: "/bin/echo 'quartz override'", triggerOut: "quartz override\n"},
		{name: "five-field", form: url.Values{"jobCron": {"* * * * *"}, "executorHandler": {"cmd"},
			"executorParam": {"/bin/echo five"}},
			storedOut: "five\n", param: "/bin/echo five-override", triggerOut: "five-override\n"},
		{name: "every", form: url.Values{"scheduleType": {"CRON"}, "scheduleConf": {"@every 2s"},
			"executorHandler": {"cmd"}, "executorParam": {"/bin/echo every"}},
			storedOut: "every\n", param: "/bin/echo every-override", triggerOut: "every-override\n"},
		{name: "shell", form: url.Values{"scheduleType": {"CRON"}, "scheduleConf": {"0/3 * * * * ? *"},
			"glueType": {"GLUE_SHELL"}, "glueSource": {"echo \"$GREETING ${BASH_VERSION:+bash}\""},
			"executorParam": {`{"interpreter":"bash","env":{"GREETING":"hello"}}`}},
			storedOut: "hello bash\n", param: `{"interpreter":"bash","env":{"GREETING":"override"}}`, triggerOut: "override bash\n"},
	}
	for _, k := range kinds {
		f := url.Values{"jobGroup": {gid}, "jobDesc": {"compat-" + k.name}, "author": {"it"},
			"executorRouteStrategy": {"FIRST"}, "executorBlockStrategy": {"SERIAL_EXECUTION"}, "glueType": {"BEAN"},
			"executorTimeout": {"0"}, "executorFailRetryCount": {"0"}, "childJobId": {""}, "alarmEmail": {""}}
		for key, v := range k.form {
			f[key] = v
		}
		out := xxlCall(t, s.api, "/jobinfo/add", f)
		require.EqualValues(t, 200, out["code"], "%s: %v", k.name, out)
		id, err := strconv.ParseInt(out["content"].(string), 10, 64)
		require.NoError(t, err)
		k.id = id
		out = xxlCall(t, s.api, "/jobinfo/start", url.Values{"id": {out["content"].(string)}})
		require.EqualValues(t, 200, out["code"], "%s: %v", k.name, out)
	}

	// Each fires on its schedule with its stored params (the 5-field one
	// at the next minute).
	for _, k := range kinds {
		waitRuns(t, s.api, k.id, 75*time.Second, func(rs []harness.Run) bool {
			for _, r := range successes(rs) {
				if r.Trigger == cluster.TriggerSchedule && r.Output == k.storedOut {
					return true
				}
			}
			return false
		})
	}

	// A trigger with executorParam runs once with it; the stored job is unchanged.
	for _, k := range kinds {
		var before map[string]any
		code, err := s.api.Do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(k.id, 10), nil, &before)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		out := xxlCall(t, s.api, "/jobinfo/trigger", url.Values{"id": {strconv.FormatInt(k.id, 10)}, "executorParam": {k.param}})
		require.EqualValues(t, 200, out["code"], "%s: %v", k.name, out)
		runs := waitRuns(t, s.api, k.id, 30*time.Second, func(rs []harness.Run) bool {
			for _, r := range rs {
				if r.Trigger == cluster.TriggerManual && r.Status == cluster.StatusSuccess {
					return true
				}
			}
			return false
		})
		var manual []harness.Run
		for _, r := range runs {
			if r.Trigger == cluster.TriggerManual {
				manual = append(manual, r)
			}
		}
		require.Len(t, manual, 1, "%s: one manual run", k.name)
		require.Equal(t, k.triggerOut, manual[0].Output, "%s: the trigger ran with its executorParam", k.name)
		require.Equal(t, nodeUUID, manual[0].Node)
		for _, r := range successes(runs) {
			if r.Trigger == cluster.TriggerSchedule {
				require.Equal(t, k.storedOut, r.Output, "%s: scheduled runs keep the stored params", k.name)
			}
		}
		var after map[string]any
		_, err = s.api.Do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(k.id, 10), nil, &after)
		require.NoError(t, err)
		require.Equal(t, before, after, "%s: the trigger left the job unchanged", k.name)
	}

	// /jobinfo/list → /jobinfo/update with the listed body unchanged → nothing changed.
	out := xxlCall(t, s.api, "/jobinfo/list", url.Values{"jobGroup": {gid}, "pageSize": {"100"}})
	rows := map[int64]map[string]any{}
	for _, r := range out["data"].([]any) {
		m := r.(map[string]any)
		rows[int64(m["id"].(float64))] = m
	}
	for _, k := range kinds {
		row, ok := rows[k.id]
		require.True(t, ok, "%s listed", k.name)
		var before, after map[string]any
		_, err := s.api.Do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(k.id, 10), nil, &before)
		require.NoError(t, err)
		out := xxlCall(t, s.api, "/jobinfo/update", formOf(row))
		require.EqualValues(t, 200, out["code"], "%s: %v", k.name, out)
		_, err = s.api.Do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(k.id, 10), nil, &after)
		require.NoError(t, err)
		require.Equal(t, before, after, "%s: the listed body sent back changes nothing", k.name)
	}
	shell := rows[kinds[3].id]
	require.Equal(t, "GLUE_SHELL", shell["glueType"])
	require.Equal(t, "FIX_RATE", rows[kinds[2].id]["scheduleType"])
	require.Equal(t, "2", rows[kinds[2].id]["scheduleConf"])

	// The native trigger names the fire it made, and the run.
	var trig struct {
		Status string `json:"status"`
		FireID string `json:"fire_id"`
		RunID  *int64 `json:"run_id"`
	}
	code, err := s.api.Do(http.MethodPost, "/api/v1/jobs/"+strconv.FormatInt(kinds[0].id, 10)+"/trigger", nil, &trig)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "accepted", trig.Status)
	require.Regexp(t, regexp.MustCompile(`^`+strconv.FormatInt(kinds[0].id, 10)+`-m[0-9]+$`), trig.FireID)
	require.NotNil(t, trig.RunID, "the leader recorded the run within the wait")
	var run harness.Run
	code, err = s.api.Do(http.MethodGet, "/api/v1/runs/"+strconv.FormatInt(*trig.RunID, 10), nil, &run)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, trig.FireID, run.FireID)
	require.Equal(t, cluster.TriggerManual, run.Trigger)
}
