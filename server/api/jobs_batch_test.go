package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

func batchJob(name string) map[string]any {
	j := validJob()
	j["name"] = name
	return j
}

func TestJobBatchCreates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := batchJob("in-ops")
	other["group"] = "ops-team"
	body := map[string]any{"jobs": []any{batchJob("a"), batchJob("b"), other}}
	var out api.JobBatchResponse
	b.doJSON(http.MethodPost, "/api/v1/jobs/batch", b.token, body, http.StatusCreated, &out)
	require.Len(t, out.Items, 3)
	for i, want := range []struct{ name, group string }{{"a", "default"}, {"b", "default"}, {"in-ops", "ops-team"}} {
		it := out.Items[i]
		require.Equal(t, want.name, it.Name, "items in request order")
		require.Equal(t, want.group, it.Group)
		var got api.Job
		b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", it.ID), b.token, nil, http.StatusOK, &got)
		require.Equal(t, want.name, got.Name)
		require.Equal(t, "*/5 * * * *", got.Schedule)
		require.EqualValues(t, 1, got.Revision)
		require.JSONEq(t, `{"script":"echo hi"}`, string(got.Params))
		sig, ok := b.etcdValue(b.keys.JobSignal(it.ID))
		require.True(t, ok, "the leader is signalled for every job")
		require.Equal(t, "1", sig)
		vs, n, err := b.store.ListJobVersions(b.ctx, it.ID, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, "admin", vs[0].SavedBy)
	}
	_, err := b.store.GroupByName(b.ctx, "ops-team")
	require.NoError(t, err, "a new group is ensured as for one job")

	// One audit entry per job, as POST /api/v1/jobs writes, and none for
	// the request itself.
	entries, total, err := b.store.FindAudit(b.ctx, store.AuditFilter{Username: "admin", ObjectType: "job"}, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 3, total)
	ids := map[string]bool{}
	for _, e := range entries {
		require.Equal(t, "create", e.Action)
		require.Equal(t, "job", e.ObjectType)
		require.Contains(t, string(e.Diff), `"name"`)
		ids[e.ObjectID] = true
	}
	for _, it := range out.Items {
		require.True(t, ids[strconv.FormatInt(it.ID, 10)], "job %d audited", it.ID)
	}
}

func TestJobBatchAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := batchJob("bad")
	bad["schedule"] = "not a schedule"
	noHandler := batchJob("no-handler")
	delete(noHandler, "handler")
	e := b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token,
		map[string]any{"jobs": []any{batchJob("ok"), bad, batchJob("ok"), noHandler}}, http.StatusBadRequest)
	require.Contains(t, e.Error, "nothing was created")
	require.Contains(t, e.Fields, "jobs[1].schedule")
	require.Contains(t, e.Fields["jobs[2].name"], "jobs[0]", "a name twice in one group")
	require.Contains(t, e.Fields, "jobs[3].handler")
	require.NotContains(t, e.Fields, "jobs[0].name")
	require.Zero(t, b.jobTotal())

	var one api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, batchJob("taken"), http.StatusCreated, &one)
	e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token,
		map[string]any{"jobs": []any{batchJob("fresh"), batchJob("taken")}}, http.StatusConflict)
	require.Contains(t, e.Error, "jobs[1]")
	require.Contains(t, e.Error, `"taken"`)
	require.Equal(t, 1, b.jobTotal(), "the valid job of a refused batch is not stored")
	_, ok := b.etcdValue(b.keys.JobSignal(one.ID + 1))
	require.False(t, ok, "no signal for a refused batch")

	e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{}}, http.StatusBadRequest)
	require.Contains(t, e.Fields, "jobs")
	many := make([]any, api.MaxBatchJobs+1)
	for i := range many {
		many[i] = batchJob(fmt.Sprintf("j%d", i))
	}
	e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": many}, http.StatusBadRequest)
	require.Contains(t, e.Fields["jobs"], "at most")
	e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{batchJob("x")}, "extra": 1},
		http.StatusBadRequest)
	require.NotEmpty(t, e.Error)
	require.Equal(t, 1, b.jobTotal())
}

// TestJobBatchDecodeErrorsNameTheJob: a JSON type error or an unknown
// field in one job of a batch is named "jobs[i].field", like every other
// problem of that job, and reported with the other jobs' problems.
func TestJobBatchDecodeErrorsNameTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := batchJob("bad")
	bad["schedule"] = "not a schedule"
	for _, c := range []struct {
		body string
		want map[string]string
	}{
		{`{"jobs":[{"name":"ok","schedule":"*/5 * * * *","handler":"shell"},{"name":5}]}`,
			map[string]string{"jobs[1].name": "must be a string, not number"}},
		{`{"jobs":[{"name":"ok","schedule":"*/5 * * * *","handler":"shell"},{"name":"x","bogus":1}]}`,
			map[string]string{"jobs[1].bogus": "unknown field"}},
		{`{"jobs":[{"name":"ok","schedule":"*/5 * * * *","handler":"shell"},{"name":"x","enabled":"yes"}]}`,
			map[string]string{"jobs[1].enabled": "must be a boolean, not string"}},
		{`{"jobs":[5,null,"x",[]]}`, map[string]string{"jobs[0]": "jobs[0] must be a JSON object",
			"jobs[1]": "jobs[1] must be a JSON object", "jobs[2]": "jobs[2] must be a JSON object",
			"jobs[3]": "jobs[3] must be a JSON object"}},
		{`{"jobs":[{"name":"bad","schedule":"not a schedule","handler":"shell"},{"retry_count":"3"}]}`,
			map[string]string{"jobs[0].schedule": "", "jobs[1].retry_count": "must be an integer, not string"}},
		{`{"jobs":5}`, map[string]string{"jobs": "must be an array, not number"}},
		{`{"jobs":[{"name":"ok","schedule":"*/5 * * * *","handler":"shell"}],"bogus":1}`,
			map[string]string{"bogus": "unknown field"}},
	} {
		e := b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, c.body, http.StatusBadRequest)
		require.Len(t, e.Fields, len(c.want), "%s: %v", c.body, e.Fields)
		for f, msg := range c.want {
			require.Contains(t, e.Fields, f, c.body)
			if msg != "" {
				require.Equal(t, msg, e.Fields[f], c.body)
			}
		}
	}
	require.Zero(t, b.jobTotal())
}
