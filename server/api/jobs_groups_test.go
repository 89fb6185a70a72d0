package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
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

// TestJobGroupNamesFollowTheAppnameRule: a job that would create its group
// must name it as POST /api/v1/groups requires (so the group can be edited
// afterwards); groups that exist keep working whatever their name, and a
// caller who may not create groups is answered as before (403).
func TestJobGroupNamesFollowTheAppnameRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rule = "4 to 64 characters of a-z, A-Z, 0-9, _ and -"
	before := b.groupNames()
	for _, name := range []string{"x", "héllo wörld/../<script>", "has space", "abc"} {
		body := batchJob("j")
		body["group"] = name
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusBadRequest)
		require.Equal(t, map[string]string{"group": fmt.Sprintf("group %q does not exist, and a new group's appname must be %s", name, rule)},
			e.Fields, name)
		e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", b.token, map[string]any{"jobs": []any{batchJob("ok"), body}},
			http.StatusBadRequest)
		require.Contains(t, e.Fields["jobs[1].group"], rule)
		require.Len(t, e.Fields, 1)
	}
	var j api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, batchJob("j"), http.StatusCreated, &j)
	body := batchJob("j")
	body["group"] = "x"
	e := b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", j.ID), b.token, body, http.StatusBadRequest)
	require.Contains(t, e.Fields["group"], rule)
	require.Equal(t, append(before, "default"), b.groupNames(), "no group created")
	require.Equal(t, 1, b.jobTotal())

	// A new group named by the rule is created, and can be edited.
	body["group"] = "new_group-1"
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", j.ID), b.token, body, http.StatusOK, nil)
	id := b.groupID("new_group-1")
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/groups/%d", id), b.token,
		map[string]string{"appname": "new_group-1", "title": "t"}, http.StatusOK, nil)

	// Existing groups keep working whatever their name, and so does the
	// group of a live node (created as the node is seen).
	for _, legacy := range []string{"ab", "old group"} {
		_, err := b.store.EnsureGroup(b.ctx, legacy, legacy)
		require.NoError(t, err)
		body := batchJob("in-" + legacy)
		body["group"] = legacy
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, nil)
	}
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "abc", IP: "127.0.0.12", Port: 1,
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1"}}})
	body = batchJob("in-abc")
	body["group"] = "abc"
	var created api.SavedJob
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &created)
	require.Empty(t, created.Warnings, "the node offers the handler")

	// An operator gets the same 403 for a missing group as for an
	// existing one outside its grants, whatever the name.
	op := b.operatorOf("op", "default")
	for _, name := range []string{"x", "ab", "nope", "new_group-1"} {
		body := batchJob("op-job")
		body["group"] = name
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", op, body, http.StatusForbidden)
		require.Equal(t, fmt.Sprintf("no permission for group %q", name), e.Error)
	}
}
