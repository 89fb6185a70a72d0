package compat_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutOfScopeGroupLooksMissing: to an operator of group 2, group 1
// (which exists) and group 99999 (which does not) get the same answer from
// /jobinfo/add and /jobinfo/update, one that never names group 1's appname;
// an admin, who sees every group, is told that 99999 does not exist.
func TestOutOfScopeGroupLooksMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operator(2)
	status, out := op.send(http.MethodPost, "/jobinfo/add", seedAdd(), true, "xxl")
	requireOK(t, status, out)
	own := out["content"].(string)

	answer := func(path string, group int64, asForm bool) (int, map[string]any) {
		body := seedAdd()
		body["jobGroup"] = group
		body["jobDesc"] = "elsewhere"
		if path == "/jobinfo/update" {
			body["id"] = own
		}
		return op.send(http.MethodPost, path, body, asForm, "xxl")
	}
	for _, path := range []string{"/jobinfo/add", "/jobinfo/update"} {
		for _, asForm := range []bool{true, false} {
			for _, group := range []int64{1, 99999} {
				status, out := answer(path, group, asForm)
				require.Equal(t, http.StatusForbidden, status, "%s jobGroup=%d: %v", path, group, out)
				require.Equal(t, map[string]any{"code": 403.0, "content": nil,
					"msg": "no permission for jobGroup " + strconv.FormatInt(group, 10)}, out, "%s jobGroup=%d", path, group)
			}
		}
	}
	j, err := b.store.GetJob(b.ctx, mustID(t, own))
	require.NoError(t, err)
	require.Equal(t, "xxl-job-executor-sample-springCloud", j.Group, "not moved")
	require.EqualValues(t, 1, j.Revision)

	// /jobinfo/list: both the list envelope with no rows.
	b.storeJob("xxl-job-executor-sample", "in group 1")
	for _, group := range []string{"1", "99999"} {
		status, out := op.send(http.MethodGet, "/jobinfo/list?jobGroup="+group, nil, false, "xxl")
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, map[string]any{"recordsFiltered": 0.0, "recordsTotal": 0.0, "data": []any{}}, out, group)
	}

	// An admin sees every group: 99999 does not exist, group 1 takes the job.
	body := seedAdd()
	body["jobGroup"] = 99999
	status, out = b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]any{"code": 500.0, "content": nil, "msg": "jobGroup 99999 does not exist"}, out)
}

// TestOutOfScopeJobLooksMissing: every call naming a job outside the
// caller's groups answers exactly as for a job that does not exist, whatever
// else the request holds (an invalid body, a group, a node).
func TestOutOfScopeJobLooksMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outside := b.storeJob("xxl-job-executor-sample", "outside") // group 1
	op := b.operator(2)
	const missing = 999999

	bodies := map[string][]map[string]any{
		"/jobinfo/update": {
			seedAdd(),
			{"jobGroup": 2, "jobDesc": "x", "jobCron": "not cron", "executorHandler": "shell"},
			{"jobGroup": 1, "jobDesc": "x"},
			{"jobGroup": 99999, "jobDesc": "x"},
			{"jobGroup": 2},
			{},
		},
		"/jobinfo/start":   {{}},
		"/jobinfo/stop":    {{}},
		"/jobinfo/remove":  {{}},
		"/jobinfo/trigger": {{}, {"addressList": "n1,n2"}, {"executorParam": "{not json", "addressList": "nowhere"}},
	}
	for path, list := range bodies {
		for _, body := range list {
			var answers []map[string]any
			for _, id := range []int64{outside.ID, missing} {
				req := map[string]any{"id": id}
				for k, v := range body {
					req[k] = v
				}
				status, out := op.send(http.MethodPost, path, req, true, "xxl")
				require.Equal(t, http.StatusOK, status, "%s %v: %v", path, req, out)
				out["msg"] = replaceID(out["msg"], id)
				answers = append(answers, out)
			}
			require.Equal(t, map[string]any{"code": 500.0, "content": nil, "msg": "job N not found"}, answers[1],
				"%s %v", path, body)
			require.Equal(t, answers[1], answers[0], "%s %v: the job outside the caller's groups looks missing", path, body)
		}
	}
	j, err := b.store.GetJob(b.ctx, outside.ID)
	require.NoError(t, err)
	require.Equal(t, outside.Revision, j.Revision, "unchanged")
	_, ok := b.get(b.keys.Once(outside.ID))
	require.False(t, ok, "not triggered")
}

// replaceID is msg with the id written as N.
func replaceID(msg any, id int64) any {
	s, ok := msg.(string)
	if !ok {
		return msg
	}
	return strings.ReplaceAll(s, strconv.FormatInt(id, 10), "N")
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return id
}

// TestNegativeIDs: /jobinfo/list takes jobGroup 0 or -1 for every group (as
// xxl-job's admin and its clients send them) and refuses any other negative
// group; an id or jobGroup that is not a positive integer is refused with a
// message that says so, on every route that takes one.
func TestNegativeIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.storeJob("xxl-job-executor-sample", "in group 1")
	b.storeJob("xxl-job-executor-sample-springCloud", "in group 2")
	for _, g := range []string{"", "0", "-1"} {
		status, out := b.send(http.MethodGet, "/jobinfo/list?jobGroup="+g, nil, false, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		require.EqualValues(t, 2, out["recordsTotal"], "jobGroup=%q is every group", g)
		require.Len(t, out["data"], 2)
	}
	for _, g := range []string{"-2", "-5", "-9223372036854775808"} {
		status, out := b.send(http.MethodGet, "/jobinfo/list?jobGroup="+g, nil, false, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		require.Equal(t, map[string]any{"code": 500.0, "content": nil,
			"msg": "jobGroup must be a group id, or 0 or -1 for every group, not " + g}, out)
	}

	for _, path := range []string{"/jobinfo/update", "/jobinfo/start", "/jobinfo/stop", "/jobinfo/trigger", "/jobinfo/remove"} {
		for _, id := range []string{"-1", "0", "abc", "1.5", "-9223372036854775808"} {
			body := seedAdd()
			body["id"] = id
			status, out := b.send(http.MethodPost, path, body, true, "xxl")
			require.Equal(t, http.StatusOK, status, "%v", out)
			require.Equal(t, map[string]any{"code": 500.0, "content": nil,
				"msg": `id must be a positive integer, not "` + id + `"`}, out, "%s id=%s", path, id)
		}
		status, out := b.send(http.MethodPost, path, seedAdd(), true, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		require.Equal(t, map[string]any{"code": 500.0, "content": nil, "msg": "id is required"}, out, path)
	}
	for _, g := range []string{"-3", "0", "two"} {
		body := seedAdd()
		body["jobGroup"] = g
		status, out := b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
		require.Equal(t, http.StatusOK, status, "%v", out)
		require.Equal(t, map[string]any{"code": 500.0, "content": nil,
			"msg": `jobGroup must be a positive integer, not "` + g + `"`}, out, "jobGroup=%s", g)
	}
	body := seedAdd()
	delete(body, "jobGroup")
	_, out := b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
	require.Equal(t, "jobGroup is required", out["msg"])
}
