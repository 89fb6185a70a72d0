package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

func TestJobModelFields(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var def api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &def)
	require.Equal(t, "FIRST", def.RouteStrategy)
	require.Equal(t, "SERIAL_EXECUTION", def.BlockStrategy)
	require.Equal(t, "FIRE_ONCE_NOW", def.MisfirePolicy)
	require.Equal(t, 100, def.MisfireMaxCatchUp)
	require.Equal(t, []string{}, def.AlarmEmails)
	require.Equal(t, []int64{}, def.ChildJobIDs)

	full := validJob()
	full["name"] = "full"
	full["route_strategy"] = "SHARDING_BROADCAST"
	full["block_strategy"] = "COVER_EARLY"
	full["misfire_policy"] = "CATCH_UP"
	full["misfire_max_catch_up"] = 10000
	full["retry_count"] = 10
	full["retry_interval_seconds"] = 86400
	full["author"] = "alice"
	full["description"] = "all fields"
	full["alarm_emails"] = []string{"ops@example.com", "dev@example.org"}
	full["child_job_ids"] = []int64{def.ID}
	full["node_uuid"] = "n1"
	full["enabled"] = false
	var got api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, full, http.StatusCreated, &got)
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", got.ID), b.token, nil, http.StatusOK, &got)
	require.Equal(t, "SHARDING_BROADCAST", got.RouteStrategy)
	require.Equal(t, "COVER_EARLY", got.BlockStrategy)
	require.Equal(t, "CATCH_UP", got.MisfirePolicy)
	require.Equal(t, 10000, got.MisfireMaxCatchUp)
	require.Equal(t, 10, got.RetryCount)
	require.Equal(t, 86400, got.RetryIntervalSeconds)
	require.Equal(t, "alice", got.Author)
	require.Equal(t, []string{"ops@example.com", "dev@example.org"}, got.AlarmEmails)
	require.Equal(t, []int64{def.ID}, got.ChildJobIDs)
	require.Equal(t, "n1", got.NodeUUID)
	require.False(t, got.Enabled)

	// Every invalid value: 400 naming the field, nothing saved or signalled.
	before, keys := b.jobTotal(), b.etcdCount()
	for field, c := range map[string]struct {
		value any
		want  string
	}{
		"route_strategy":         {"SOMEWHERE", `unknown route strategy "SOMEWHERE" (one of FIRST, LAST, ROUND, RANDOM, CONSISTENT_HASH, LEAST_FREQUENTLY_USED, LEAST_RECENTLY_USED, FAILOVER, BUSYOVER, SHARDING_BROADCAST)`},
		"block_strategy":         {"WAIT", `unknown block strategy "WAIT" (one of SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY)`},
		"misfire_policy":         {"LATER", `unknown misfire policy "LATER" (one of DO_NOTHING, FIRE_ONCE_NOW, CATCH_UP)`},
		"misfire_max_catch_up":   {10001, "misfire_max_catch_up must be from 1 to 10000"},
		"retry_count":            {11, "retry_count must be from 0 to 10"},
		"retry_interval_seconds": {-1, "retry_interval_seconds must be from 0 to 86400"},
		"alarm_emails":           {[]string{"not-an-address"}, `"not-an-address" is not a valid e-mail address (give bare addresses like ops@example.com)`},
		"child_job_ids":          {[]int64{9999}, "job 9999 does not exist"},
		"node_uuid":              {"ghost", `no live node "ghost"`},
		"timezone":               {"Mars/Olympus", `unknown time zone "Mars/Olympus" (use an IANA name such as Europe/Berlin or UTC)`},
	} {
		body := validJob()
		body[field] = c.value
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusBadRequest)
		require.Equal(t, c.want, e.Fields[field], field)
		e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", def.ID), b.token, body, http.StatusBadRequest)
		require.Equal(t, c.want, e.Fields[field], field)
	}
	require.Equal(t, before, b.jobTotal())
	require.Equal(t, keys, b.etcdCount())
}

func TestChildCycleRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mk := func(name string, children ...int64) api.Job {
		body := validJob()
		body["name"] = name
		body["child_job_ids"] = children
		var j api.Job
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &j)
		return j
	}
	c := mk("c")
	bj := mk("b", c.ID)
	a := mk("a", bj.ID)

	// c → a closes a → b → c → a.
	body := validJob()
	body["name"] = "c"
	body["child_job_ids"] = []int64{a.ID}
	e := b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", c.ID), b.token, body, http.StatusBadRequest)
	require.Equal(t, fmt.Sprintf("cycle %d → %d → %d → %d", c.ID, a.ID, bj.ID, c.ID), e.Fields["child_job_ids"])
	body["child_job_ids"] = []int64{c.ID}
	e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", c.ID), b.token, body, http.StatusBadRequest)
	require.Equal(t, fmt.Sprintf("cycle %d → %d", c.ID, c.ID), e.Fields["child_job_ids"])
	var got api.Job
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", c.ID), b.token, nil, http.StatusOK, &got)
	require.Empty(t, got.ChildJobIDs)
	require.EqualValues(t, 1, got.Revision, "nothing saved")

	// A diamond is no cycle.
	body["child_job_ids"] = []int64{}
	d := mk("d", c.ID, bj.ID)
	require.Equal(t, []int64{c.ID, bj.ID}, d.ChildJobIDs)
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, name := range []string{"Nightly backup", "report", "backup-web"} {
		body := validJob()
		body["name"] = name
		body["author"] = []string{"alice", "bob", "alice"}[i]
		body["enabled"] = i != 1
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, nil)
	}
	names := func(q string) []string {
		var l api.List[api.Job]
		b.doJSON(http.MethodGet, "/api/v1/jobs?"+q, b.token, nil, http.StatusOK, &l)
		out := []string{}
		for _, j := range l.Items {
			out = append(out, j.Name)
		}
		require.Equal(t, l.Total, len(out))
		return out
	}
	require.Equal(t, []string{"Nightly backup", "backup-web"}, names("q=BACKUP"))
	require.Equal(t, []string{"report"}, names("enabled=false"))
	require.Equal(t, []string{"backup-web", "Nightly backup"}, names("author=alice&sort=-id"))
	require.Equal(t, []string{"Nightly backup", "report", "backup-web"}, names("group=default&handler=shell"))
	require.Empty(t, names("group=other"))
	e := b.errorOf(http.MethodGet, "/api/v1/jobs?sort=size&enabled=maybe", b.token, nil, http.StatusBadRequest)
	require.Contains(t, e.Fields["sort"], `unknown sort "size"`)
	require.Equal(t, "enabled must be true or false", e.Fields["enabled"])

	// Runs: status, node and time range, per job and across jobs.
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var results []cluster.RunResult
	for i := range 4 {
		at := base.Add(time.Duration(i) * time.Hour)
		results = append(results, cluster.RunResult{
			FireID: cluster.FireID(int64(1+i%2), at), JobID: int64(1 + i%2), Node: fmt.Sprintf("n%d", i%2),
			Status: []string{cluster.StatusSuccess, cluster.StatusFailed}[i%2], ScheduledAt: at,
		})
	}
	b.postResults(results)
	fires := func(path string) []string {
		var l api.List[api.Run]
		b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &l)
		out := []string{}
		for _, r := range l.Items {
			out = append(out, r.FireID)
		}
		return out
	}
	require.Equal(t, []string{results[3].FireID, results[2].FireID, results[1].FireID, results[0].FireID}, fires("/api/v1/runs"))
	require.Equal(t, []string{results[3].FireID, results[1].FireID}, fires("/api/v1/runs?status=failed"))
	require.Equal(t, []string{results[2].FireID}, fires("/api/v1/runs?node=n0&from=2026-03-01T01:00:00Z"))
	require.Equal(t, []string{results[1].FireID}, fires("/api/v1/runs?job_id=2&to=2026-03-01T03:00:00%2B00:00"))
	require.Equal(t, []string{results[2].FireID}, fires("/api/v1/jobs/1/runs?from=2026-03-01T01:00:00Z"))
	e = b.errorOf(http.MethodGet, "/api/v1/runs?from=yesterday&status=odd", b.token, nil, http.StatusBadRequest)
	require.Contains(t, e.Fields["from"], "RFC 3339")
	require.Contains(t, e.Fields["status"], `unknown status "odd"`)
}

// postResults records the fires as dispatched (to the result's node, "n1"
// when it names none), as the scheduler does, then sends the results as
// that node.
func (b *bundle) postResults(results []cluster.RunResult) {
	b.t.Helper()
	b.dispatchRuns(results)
	b.doJSON(http.MethodPost, "/api/v1/internal/results", nodeToken, cluster.ResultBatch{Results: results}, http.StatusOK, nil)
}

func TestChildJobsFireOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mk := func(name string, children ...int64) api.Job {
		body := validJob()
		body["name"] = name
		body["child_job_ids"] = children
		var j api.Job
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &j)
		return j
	}
	c1, c2 := mk("child-1"), mk("child-2")
	parent := mk("parent", c1.ID, c2.ID)
	other := mk("other", c1.ID)

	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ok := cluster.RunResult{FireID: cluster.FireID(parent.ID, at), JobID: parent.ID, Status: cluster.StatusSuccess, ScheduledAt: at}
	failed := cluster.RunResult{FireID: cluster.FireID(other.ID, at), JobID: other.ID, Status: cluster.StatusFailed, ScheduledAt: at}
	running := cluster.RunResult{FireID: cluster.FireID(other.ID, at.Add(time.Second)), JobID: other.ID, Status: cluster.StatusRunning, ScheduledAt: at}
	rev := b.etcdRevision()
	b.postResults([]cluster.RunResult{ok, failed, running})
	for _, c := range []api.Job{c1, c2} {
		v, found := b.etcdValue(b.keys.Once(c.ID))
		require.True(t, found, "child %d fired", c.ID)
		var once cluster.OnceRequest
		require.NoError(t, json.Unmarshal([]byte(v), &once))
		require.Equal(t, "parent:"+ok.FireID, once.RequestedBy)
		require.Empty(t, once.Node)
	}
	_, found := b.etcdValue(b.keys.Once(parent.ID))
	require.False(t, found)
	require.Equal(t, rev+1, b.etcdRevision(), "one transaction for the batch")

	// Replays fire nothing; a later success of other fires child-1 again.
	_, err := b.etcd.Delete(b.ctx, b.keys.Once(c1.ID))
	require.NoError(t, err)
	_, err = b.etcd.Delete(b.ctx, b.keys.Once(c2.ID))
	require.NoError(t, err)
	b.postResults([]cluster.RunResult{ok, failed})
	_, found = b.etcdValue(b.keys.Once(c1.ID))
	require.False(t, found, "a duplicate report must not fire children again")
	done := running
	done.Status = cluster.StatusSuccess
	b.postResults([]cluster.RunResult{done})
	v, found := b.etcdValue(b.keys.Once(c1.ID))
	require.True(t, found)
	require.Contains(t, v, "parent:"+done.FireID)
}

func (b *bundle) etcdRevision() int64 {
	b.t.Helper()
	resp, err := b.etcd.Get(b.ctx, "/")
	require.NoError(b.t, err)
	return resp.Header.Revision
}

func TestGroupsCRUD(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var g api.Group
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "default", "title": "Default"}, http.StatusCreated, &g)
	require.Equal(t, "auto", g.AddressType)
	require.Len(t, g.Nodes, 1, "auto members are the registered nodes of the group")
	require.Equal(t, "n1", g.Nodes[0].UUID)

	var m api.Group
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{
		"appname": "batch_jobs", "address_type": "manual", "addresses": []string{"n1", "n9"},
	}, http.StatusCreated, &m)
	require.Equal(t, "batch_jobs", m.Title, "title defaults to the appname")
	require.Equal(t, []string{"n1", "n9"}, m.Addresses)
	require.Len(t, m.Nodes, 1, "only live listed nodes")

	for body, field := range map[string]string{
		`{"appname":"ab"}`:                            "appname",
		`{"appname":"has space"}`:                     "appname",
		`{"appname":"valid","address_type":"dns"}`:    "address_type",
		`{"appname":"valid","address_type":"manual"}`: "addresses",
	} {
		e := b.errorOf(http.MethodPost, "/api/v1/groups", b.token, body, http.StatusBadRequest)
		require.Contains(t, e.Fields, field, body)
	}
	b.errorOf(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "default"}, http.StatusConflict)

	path := fmt.Sprintf("/api/v1/groups/%d", m.ID)
	var upd api.Group
	b.doJSON(http.MethodPut, path, b.token, map[string]any{"appname": "batch_jobs", "title": "Batch"}, http.StatusOK, &upd)
	require.Equal(t, "auto", upd.AddressType)
	require.Equal(t, "Batch", upd.Title)
	var list api.List[api.Group]
	b.doJSON(http.MethodGet, "/api/v1/groups?title=bat", b.token, nil, http.StatusOK, &list)
	require.Equal(t, 1, list.Total)
	require.Equal(t, m.ID, list.Items[0].ID)

	// A group with jobs cannot be deleted.
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, nil)
	b.errorOf(http.MethodDelete, fmt.Sprintf("/api/v1/groups/%d", g.ID), b.token, nil, http.StatusConflict)
	status, _ := b.do(http.MethodDelete, path, b.token, nil)
	require.Equal(t, http.StatusNoContent, status)
	b.errorOf(http.MethodGet, path, b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodDelete, path, b.token, nil, http.StatusNotFound)
}

// dispatchRuns records a triggered run for each result's fire on its node
// ("n1" when the result names none; the result is updated), as the
// scheduler does before it dispatches: results are accepted only for
// fires dispatched to the reporting node.
func (b *bundle) dispatchRuns(results []cluster.RunResult) {
	b.t.Helper()
	runs := make([]store.Run, len(results))
	for i := range results {
		if results[i].Node == "" {
			results[i].Node = "n1"
		}
		r := results[i]
		runs[i] = store.Run{FireID: r.FireID, JobID: r.JobID, Trigger: cluster.TriggerSchedule,
			Status: cluster.StatusTriggered, Node: r.Node, ScheduledAt: r.ScheduledAt}
	}
	_, err := b.store.InsertRuns(b.ctx, runs)
	require.NoError(b.t, err)
}
