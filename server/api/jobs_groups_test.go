package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// groupNames lists the appnames of every group, as an admin sees them.
func (b *bundle) groupNames() []string {
	b.t.Helper()
	var l api.List[api.Group]
	b.doJSON(http.MethodGet, "/api/v1/groups?page_size=500", b.token, nil, http.StatusOK, &l)
	names := []string{}
	for _, g := range l.Items {
		names = append(names, g.AppName)
	}
	return names
}

// TestFailedJobSaveCreatesNoGroup: a job save that fails (409 here) leaves
// no new group behind, for one job, an update and a batch.
func TestFailedJobSaveCreatesNoGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, batchJob("taken"), http.StatusCreated, nil)
	// A job whose group has no row (stored before groups were kept): its
	// name is taken in group "orphan".
	orphan := &store.Job{Name: "dup", Group: "orphan", ScheduleType: "none", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`)}
	require.NoError(t, b.store.CreateJob(b.ctx, orphan))
	var other api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, batchJob("other"), http.StatusCreated, &other)
	groups := b.groupNames()
	require.Equal(t, []string{"default"}, groups)

	fresh := batchJob("fresh-job")
	fresh["group"] = "fresh"
	e := b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token,
		map[string]any{"jobs": []any{fresh, batchJob("taken")}}, http.StatusConflict)
	require.Contains(t, e.Error, "nothing was created")

	dup := batchJob("dup")
	dup["group"] = "orphan"
	b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, dup, http.StatusConflict)
	b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", other.ID), b.token, dup, http.StatusConflict)
	e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{dup}}, http.StatusConflict)
	require.Contains(t, e.Error, "nothing was created")

	require.Equal(t, groups, b.groupNames(), "no group of a refused save")
	require.Equal(t, 3, b.jobTotal())

	// The same saves without the conflict create their group.
	fresh["name"] = "fresh-ok"
	b.doJSON(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{fresh}}, http.StatusCreated, nil)
	dup["name"] = "dup-2"
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", other.ID), b.token, dup, http.StatusOK, nil)
	require.Equal(t, []string{"default", "fresh", "orphan"}, b.groupNames())
}
