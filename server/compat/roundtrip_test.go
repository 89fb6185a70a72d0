package compat_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

const sampleGroup = "xxl-job-executor-sample-springCloud" // id 2, node n1 offers shell, cmd, http

// nativeJob creates a job through POST /api/v1/jobs and returns its id.
func (b *bundle) nativeJob(body map[string]any) int64 {
	b.t.Helper()
	status, out := b.send(http.MethodPost, "/api/v1/jobs", body, false, "bearer")
	require.Equal(b.t, http.StatusCreated, status, "%v", out)
	return int64(out["id"].(float64))
}

// nativeGet is GET /api/v1/jobs/{id}.
func (b *bundle) nativeGet(id int64) map[string]any {
	b.t.Helper()
	status, out := b.send(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(id, 10), nil, false, "bearer")
	require.Equal(b.t, http.StatusOK, status, "%v", out)
	return out
}

// listed is job id's row of /jobinfo/list.
func (b *bundle) listed(id int64) map[string]any {
	b.t.Helper()
	status, out := b.send(http.MethodGet, "/jobinfo/list?jobGroup=0&pageSize=100", nil, false, "xxl")
	require.Equal(b.t, http.StatusOK, status, "%v", out)
	for _, r := range out["data"].([]any) {
		row := r.(map[string]any)
		if int64(row["id"].(float64)) == id {
			return row
		}
	}
	b.t.Fatalf("job %d is not listed: %v", id, out)
	return nil
}

// TestListUpdateRoundTripIsLossless: every kind of job the native API
// creates, listed by /jobinfo/list and sent back unchanged to
// /jobinfo/update (as JSON and as a form), is accepted and changes nothing;
// an edit through the same body changes only what was edited.
func TestListUpdateRoundTripIsLossless(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := func(name string, extra map[string]any) map[string]any {
		m := map[string]any{"name": name, "group": sampleGroup, "handler": "cmd",
			"params": map[string]any{"argv": []string{"/bin/echo", "hi there"}}, "enabled": false}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name               string
		job                map[string]any
		glue, typ, conf    string
		handler, execParam string
	}{
		{"quartz", base("quartz", map[string]any{"schedule": "0/5 * * * * ? *"}),
			"BEAN", "CRON", "0/5 * * * * ? *", "cmd", "/bin/echo 'hi there'"},
		{"five-field", base("five-field", map[string]any{"schedule": "*/5 * * * *", "timezone": "Europe/Berlin",
			"params": map[string]any{"argv": []string{"env"}, "env": map[string]string{"A": "1"}, "dir": "/tmp"}}),
			"BEAN", "CRON", "*/5 * * * *", "cmd", `{"argv":["env"],"dir":"/tmp","env":{"A":"1"}}`},
		{"six-field-standard", base("six-field-standard", map[string]any{"schedule": "0 0 12 * * 1"}),
			"BEAN", "CRON", "0 0 12 * * 1", "cmd", "/bin/echo 'hi there'"},
		{"macro", base("macro", map[string]any{"schedule": "@daily"}), "BEAN", "CRON", "@daily", "cmd", "/bin/echo 'hi there'"},
		{"every", base("every", map[string]any{"schedule": "@every 1m30s", "handler": "http",
			"params": map[string]any{"url": "http://example.com/x", "headers": map[string]string{"X-A": "b"}}}),
			"BEAN", "FIX_RATE", "90", "http", `{"headers":{"X-A":"b"},"url":"http://example.com/x"}`},
		{"fixed-rate", base("fixed-rate", map[string]any{"schedule_type": "fixed_rate", "schedule": "2m"}),
			"BEAN", "FIX_RATE", "120", "cmd", "/bin/echo 'hi there'"},
		{"fixed-delay", base("fixed-delay", map[string]any{"schedule_type": "fixed_delay", "schedule": "45"}),
			"BEAN", "FIX_DELAY", "45", "cmd", "/bin/echo 'hi there'"},
		{"once", base("once", map[string]any{"schedule_type": "once", "schedule": "2031-01-02T03:04:05Z"}),
			"BEAN", "ONCE", "2031-01-02T03:04:05Z", "cmd", "/bin/echo 'hi there'"},
		{"none", base("none", map[string]any{"schedule_type": "none", "schedule": ""}),
			"BEAN", "NONE", "", "cmd", "/bin/echo 'hi there'"},
		{"shell", base("shell", map[string]any{"schedule": "0 0/10 * * * ?", "handler": "shell",
			"params":       map[string]any{"script": "echo \"$GREETING\"\n", "interpreter": "bash", "env": map[string]string{"GREETING": "hello"}},
			"alarm_emails": []string{"ops@example.com"}, "retry_count": 2, "retry_interval_seconds": 30,
			"misfire_policy": "CATCH_UP", "misfire_max_catch_up": 7, "description": "kept", "author": "it",
			"route_strategy": "ROUND", "block_strategy": "DISCARD_LATER", "timeout_seconds": 60, "enabled": true}),
			"GLUE_SHELL", "CRON", "0 0/10 * * * ?", "shell", `{"env":{"GREETING":"hello"},"interpreter":"bash"}`},
	}
	for _, c := range cases {
		id := b.nativeJob(c.job)
		before := b.nativeGet(id)
		row := b.listed(id)
		require.Equal(t, c.glue, row["glueType"], c.name)
		require.Equal(t, c.typ, row["scheduleType"], c.name)
		require.Equal(t, c.conf, row["scheduleConf"], c.name)
		require.Equal(t, c.handler, row["executorHandler"], c.name)
		require.Equal(t, c.execParam, row["executorParam"], c.name)
		if c.glue == "GLUE_SHELL" {
			require.Equal(t, "echo \"$GREETING\"\n", row["glueSource"], c.name)
		}
		for _, asForm := range []bool{false, true} {
			status, out := b.send(http.MethodPost, "/jobinfo/update", row, asForm, "xxl")
			requireOK(t, status, out)
			require.Equal(t, before, b.nativeGet(id), "%s (form %v): the job is unchanged", c.name, asForm)
		}

		// An edit of one field through the listed body changes only it.
		edited := map[string]any{}
		for k, v := range row {
			edited[k] = v
		}
		edited["jobDesc"] = c.name + "-renamed"
		status, out := b.send(http.MethodPost, "/jobinfo/update", edited, false, "xxl")
		requireOK(t, status, out)
		after := b.nativeGet(id)
		require.Equal(t, c.name+"-renamed", after["name"], c.name)
		require.EqualValues(t, before["revision"].(float64)+1, after["revision"], c.name)
		for _, k := range []string{"schedule_type", "schedule", "timezone", "handler", "params", "alarm_emails",
			"retry_count", "retry_interval_seconds", "misfire_policy", "misfire_max_catch_up", "description", "author",
			"route_strategy", "block_strategy", "timeout_seconds", "enabled", "child_job_ids", "node_uuid"} {
			require.Equal(t, before[k], after[k], "%s: %s kept by an edit of jobDesc", c.name, k)
		}
	}

	// An edited GLUE_SHELL body: glueSource and executorParam both apply.
	id := b.nativeJob(base("glue-edit", map[string]any{"schedule": "@hourly", "handler": "shell",
		"params": map[string]any{"script": "echo a", "interpreter": "sh"}}))
	row := b.listed(id)
	row["glueSource"], row["executorParam"] = "echo b", `{"interpreter":"bash","env":{"X":"y"}}`
	status, out := b.send(http.MethodPost, "/jobinfo/update", row, true, "xxl")
	requireOK(t, status, out)
	after := b.nativeGet(id)
	require.Equal(t, map[string]any{"script": "echo b", "interpreter": "bash", "env": map[string]any{"X": "y"}}, after["params"])
	// Text in a GLUE_SHELL executorParam is refused, naming the field; nothing changes.
	row = b.listed(id)
	row["executorParam"] = "--verbose"
	_, out = b.send(http.MethodPost, "/jobinfo/update", row, true, "xxl")
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], "executorParam")
	require.Equal(t, after, b.nativeGet(id))
}

// TestTriggerExecutorParam: /jobinfo/trigger's executorParam is a one-off
// params override of that fire (the once request carries it), read as the
// job's executorParam; the stored job is unchanged.
func TestTriggerExecutorParam(t *testing.T) {
	t.Parallel()
	b := setup(t)
	once := func(id int64) cluster.OnceRequest {
		t.Helper()
		v, ok := b.get(b.keys.Once(id))
		require.True(t, ok)
		var o cluster.OnceRequest
		require.NoError(t, json.Unmarshal([]byte(v), &o))
		return o
	}
	trigger := func(body map[string]any) map[string]any {
		t.Helper()
		status, out := b.send(http.MethodPost, "/jobinfo/trigger", body, true, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		return out
	}
	cmdID := b.nativeJob(map[string]any{"name": "cmd", "group": sampleGroup, "schedule": "0 0 * * * ? *", "handler": "cmd",
		"params": map[string]any{"argv": []string{"/bin/echo", "stored"}}})
	before := b.nativeGet(cmdID)

	requireOK(t, 200, trigger(map[string]any{"id": cmdID, "executorParam": "/bin/echo 'one off'"}))
	o := once(cmdID)
	require.JSONEq(t, `{"argv":["/bin/echo","one off"]}`, string(o.Params))
	require.Empty(t, o.Node)
	require.Equal(t, before, b.nativeGet(cmdID), "the stored job is unchanged")

	// The listed executorParam, or none: the job's own params.
	for _, p := range []string{"", "/bin/echo stored"} {
		requireOK(t, 200, trigger(map[string]any{"id": cmdID, "executorParam": p}))
		require.Empty(t, once(cmdID).Params, "executorParam %q", p)
	}
	// addressList names the node to run on.
	requireOK(t, 200, trigger(map[string]any{"id": cmdID, "addressList": "n1"}))
	require.Equal(t, "n1", once(cmdID).Node)
	out := trigger(map[string]any{"id": cmdID, "addressList": "ghost"})
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], "ghost")

	// A GLUE_SHELL job: executorParam is its interpreter/env object beside the stored script.
	shID := b.nativeJob(map[string]any{"name": "sh", "group": sampleGroup, "schedule": "0 0 * * * ? *", "handler": "shell",
		"params": map[string]any{"script": "echo $A", "env": map[string]string{"A": "stored"}}})
	requireOK(t, 200, trigger(map[string]any{"id": shID, "executorParam": `{"env":{"A":"one off"}}`}))
	require.JSONEq(t, `{"script":"echo $A","env":{"A":"one off"}}`, string(once(shID).Params))
	out = trigger(map[string]any{"id": shID, "executorParam": "plain text"})
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], "executorParam")

	out = trigger(map[string]any{"id": 9999})
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], "9999")
}

// TestListUnknownGroup: /jobinfo/list of a group that does not exist is the
// list envelope with no rows, never an internal error.
func TestListUnknownGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.nativeJob(map[string]any{"name": "x", "group": sampleGroup, "schedule": "@hourly", "handler": "cmd",
		"params": map[string]any{"argv": []string{"true"}}})
	for _, asForm := range []bool{false, true} {
		status, out := b.send(http.MethodPost, "/jobinfo/list", map[string]any{"jobGroup": 424242}, asForm, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		require.Equal(t, map[string]any{"recordsFiltered": 0.0, "recordsTotal": 0.0, "data": []any{}}, out)
	}
}
