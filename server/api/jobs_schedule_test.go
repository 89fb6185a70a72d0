package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// TestScheduleTypeErrors: an unknown schedule type is an error on
// schedule_type, and a none job takes no schedule; none jobs stored with
// one before keep it on read and stay editable when it is sent back.
func TestScheduleTypeErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var def api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, batchJob("def"), http.StatusCreated, &def)
	before, keys := b.jobTotal(), b.etcdCount()
	const noneMsg = "schedule must be empty for schedule_type none (a none job fires only when triggered or as a child job)"
	for _, c := range []struct {
		typ, sched string
		want       map[string]string
	}{
		{"weird", "*/5 * * * *", map[string]string{
			"schedule_type": `unknown schedule type "weird" (supported: cron, fixed_rate, fixed_delay, once, none)`}},
		{"weird", "", map[string]string{
			"schedule_type": `unknown schedule type "weird" (supported: cron, fixed_rate, fixed_delay, once, none)`}},
		{"none", "foo", map[string]string{"schedule": noneMsg}},
		{"none", "*/5 * * * *", map[string]string{"schedule": noneMsg}},
	} {
		body := batchJob("j")
		body["schedule_type"], body["schedule"] = c.typ, c.sched
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusBadRequest)
		require.Equal(t, c.want, e.Fields, "%s %q", c.typ, c.sched)
		e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", def.ID), b.token, body, http.StatusBadRequest)
		require.Equal(t, c.want, e.Fields, "%s %q", c.typ, c.sched)
		e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{body}}, http.StatusBadRequest)
		for f, msg := range c.want {
			require.Equal(t, map[string]string{"jobs[0]." + f: msg}, e.Fields)
		}
	}
	require.Equal(t, before, b.jobTotal())
	require.Equal(t, keys, b.etcdCount())

	body := batchJob("none")
	body["schedule_type"], body["schedule"] = "none", "  "
	var none api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &none)
	require.Equal(t, "none", none.ScheduleType)
	require.Empty(t, none.Schedule)

	// A none job stored with a schedule (before it was refused) reads as
	// stored; sent back unchanged (REST, /jobinfo/start, /jobinfo/update)
	// it saves, its schedule dropped; a different one is refused.
	legacy := &store.Job{Name: "legacy", Group: "default", ScheduleType: "none", Schedule: "foo", Handler: "shell",
		Params: json.RawMessage(`{"script":"echo hi"}`), RouteStrategy: "FIRST", BlockStrategy: "SERIAL_EXECUTION",
		MisfirePolicy: "FIRE_ONCE_NOW", MisfireMaxCatchUp: 100}
	require.NoError(t, b.store.CreateJob(b.ctx, legacy))
	path := fmt.Sprintf("/api/v1/jobs/%d", legacy.ID)
	var got map[string]any
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &got)
	require.Equal(t, "foo", got["schedule"])
	reset := func() {
		t.Helper()
		require.NoError(t, b.store.UpdateJob(b.ctx, legacy)) // its schedule "foo" again
		var j api.Job
		b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &j)
		require.Equal(t, "foo", j.Schedule)
	}
	id := strconv.FormatInt(legacy.ID, 10)
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/jobinfo/start", url.Values{"id": {id}}},
		{"/jobinfo/update", url.Values{"id": {id}, "jobGroup": {strconv.FormatInt(b.groupID("default"), 10)},
			"jobDesc": {"legacy"}, "scheduleType": {"NONE"}, "glueType": {"GLUE_SHELL"}, "glueSource": {"echo hi"},
			"author": {"xxl"}}},
	} {
		reset()
		code, msg := b.compat(c.path, b.token, c.form)
		require.EqualValues(t, 200, code, "%s: %s", c.path, msg)
		var saved api.Job
		b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &saved)
		require.Empty(t, saved.Schedule, c.path)
		require.Greater(t, saved.Revision, legacy.Revision, c.path)
	}

	reset()
	for _, k := range []string{"id", "revision", "created_at", "updated_at"} {
		delete(got, k)
	}
	got["description"] = "edited"
	var saved api.Job
	b.doJSON(http.MethodPut, path, b.token, got, http.StatusOK, &saved)
	require.Empty(t, saved.Schedule)
	require.Equal(t, "edited", saved.Description)
	reset()
	got["schedule"] = "bar"
	e := b.errorOf(http.MethodPut, path, b.token, got, http.StatusBadRequest)
	require.Equal(t, map[string]string{"schedule": noneMsg}, e.Fields)
}
