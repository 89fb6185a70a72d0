package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// operatorOf stores an operator granted only the named groups (created if
// missing) and returns its session token.
func (b *bundle) operatorOf(username string, groups ...string) string {
	b.t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("operator-pw"), bcrypt.MinCost)
	require.NoError(b.t, err)
	ids := make([]int64, 0, len(groups))
	for _, name := range groups {
		g, err := b.store.EnsureGroup(b.ctx, name, name)
		require.NoError(b.t, err)
		ids = append(ids, g.ID)
	}
	require.NoError(b.t, b.store.CreateUser(b.ctx, &store.User{Username: username, PasswordHash: string(hash),
		Role: store.RoleOperator, Groups: ids}))
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": username, "password": "operator-pw"},
		http.StatusOK, &login)
	return login.Token
}

// compat sends an xxl-job compat request (form-encoded) and returns its envelope.
func (b *bundle) compat(path, token string, form url.Values) (code float64, msg string) {
	b.t.Helper()
	var out struct {
		Code float64 `json:"code"`
		Msg  *string `json:"msg"`
	}
	status, raw := b.doForm(path, token, form)
	require.Equal(b.t, http.StatusOK, status, "%s", raw)
	require.NoError(b.t, json.Unmarshal(raw, &out), "%s", raw)
	if out.Msg != nil {
		msg = *out.Msg
	}
	return out.Code, msg
}

// jobIn creates a job (as admin) in group with children.
func (b *bundle) jobIn(group, name string, children ...int64) api.Job {
	b.t.Helper()
	body := validJob()
	body["name"], body["group"], body["child_job_ids"] = name, group, children
	var j api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, body, http.StatusCreated, &j)
	return j
}

// TestChildJobsOutsideCallerGroups: a child job outside the caller's
// groups is answered exactly like one that does not exist, on every front
// door, so an operator can neither fire it through a parent nor learn that
// it exists. Children an admin already put on a job stay when an operator
// edits it.
func TestChildJobsOutsideCallerGroups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mine := b.jobIn("default", "mine")
	hidden := b.jobIn("secret", "hidden")
	hidden2 := b.jobIn("secret", "hidden2")
	op := b.operatorOf("op", "default")
	const missing = int64(99999)
	missingMsg := func(id int64) string { return fmt.Sprintf("job %d does not exist", id) }
	before, keys := b.jobTotal(), b.etcdCount()

	// POST, PUT and batch: an out-of-scope child is "does not exist", word
	// for word as a missing one.
	for _, id := range []int64{missing, hidden.ID} {
		body := validJob()
		body["name"], body["child_job_ids"] = "parent", []int64{id}
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", op, body, http.StatusBadRequest)
		require.Equal(t, map[string]string{"child_job_ids": missingMsg(id)}, e.Fields)
		e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusBadRequest)
		require.Equal(t, map[string]string{"child_job_ids": missingMsg(id)}, e.Fields)
		e = b.errorOf(http.MethodPost, "/api/v1/jobs/batch", op, map[string]any{"jobs": []any{body}}, http.StatusBadRequest)
		require.Equal(t, map[string]string{"jobs[0].child_job_ids": missingMsg(id)}, e.Fields)

		code, msg := b.compat("/jobinfo/add", op, url.Values{"jobGroup": {strconv.FormatInt(b.groupID("default"), 10)},
			"jobDesc": {"xparent"}, "scheduleType": {"NONE"}, "glueType": {"GLUE_SHELL"}, "glueSource": {"true"},
			"childJobId": {strconv.FormatInt(id, 10)}})
		require.EqualValues(t, 500, code)
		require.Equal(t, "invalid job: childJobId: "+missingMsg(id), msg)
	}
	require.Equal(t, before, b.jobTotal(), "nothing created")
	require.Equal(t, keys, b.etcdCount(), "nothing signalled")
	var got api.Job
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, nil, http.StatusOK, &got)
	require.EqualValues(t, 1, got.Revision, "nothing saved")

	// A success of mine fires no job of another group.
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	b.postResults([]cluster.RunResult{{FireID: cluster.FireID(mine.ID, at), JobID: mine.ID,
		Status: cluster.StatusSuccess, ScheduledAt: at}})
	_, fired := b.etcdValue(b.keys.Once(hidden.ID))
	require.False(t, fired)

	// An admin links mine to hidden: the operator may still edit mine, and
	// the child it did not add stays; adding another hidden job, or adding
	// hidden back once removed, is refused as missing.
	body := validJob()
	body["name"], body["child_job_ids"] = "mine", []int64{hidden.ID}
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), b.token, body, http.StatusOK, nil)
	body["description"] = "edited by the operator"
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusOK, &got)
	require.Equal(t, []int64{hidden.ID}, got.ChildJobIDs)
	body["child_job_ids"] = []int64{hidden.ID, hidden2.ID}
	e := b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusBadRequest)
	require.Equal(t, map[string]string{"child_job_ids": missingMsg(hidden2.ID)}, e.Fields)
	code, msg := b.compat("/jobinfo/update", op, url.Values{"id": {strconv.FormatInt(mine.ID, 10)},
		"jobGroup": {strconv.FormatInt(b.groupID("default"), 10)}, "jobDesc": {"mine"}, "jobCron": {"*/5 * * * *"},
		"glueType": {"GLUE_SHELL"}, "glueSource": {"echo hi"},
		"childJobId": {fmt.Sprintf("%d,%d", hidden.ID, hidden2.ID)}})
	require.EqualValues(t, 500, code)
	require.Equal(t, "invalid job: childJobId: "+missingMsg(hidden2.ID), msg)

	// A kept child the operator cannot see is kept whether it still exists
	// or not: the answer tells nothing about it.
	b.doJSON(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", hidden.ID), b.token, nil, http.StatusNoContent, nil)
	body["child_job_ids"] = []int64{hidden.ID}
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusOK, &got)
	require.Equal(t, []int64{hidden.ID}, got.ChildJobIDs)

	body["child_job_ids"] = []int64{}
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusOK, nil)
	body["child_job_ids"] = []int64{hidden2.ID}
	e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", mine.ID), op, body, http.StatusBadRequest)
	require.Equal(t, map[string]string{"child_job_ids": missingMsg(hidden2.ID)}, e.Fields)
}

// TestChildCycleThroughHiddenJobs: a cycle the operator's edit would close
// through jobs of other groups is refused without naming those jobs.
func TestChildCycleThroughHiddenJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.jobIn("default", "a")
	h1 := b.jobIn("secret", "h1", a.ID)
	h2 := b.jobIn("secret", "h2", h1.ID)
	c := b.jobIn("default", "c", h2.ID)
	op := b.operatorOf("op", "default")

	body := validJob()
	body["name"], body["child_job_ids"] = "a", []int64{c.ID}
	e := b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", a.ID), op, body, http.StatusBadRequest)
	require.Equal(t, map[string]string{"child_job_ids": fmt.Sprintf("cycle %d → %d → … → %d", a.ID, c.ID, a.ID)}, e.Fields)
	for _, h := range []int64{h1.ID, h2.ID} {
		require.NotContains(t, e.Fields["child_job_ids"], strconv.FormatInt(h, 10))
	}
	// An admin sees the whole cycle.
	e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", a.ID), b.token, body, http.StatusBadRequest)
	require.Equal(t, fmt.Sprintf("cycle %d → %d → %d → %d → %d", a.ID, c.ID, h2.ID, h1.ID, a.ID), e.Fields["child_job_ids"])
}

// groupID is the id of group appName.
func (b *bundle) groupID(appName string) int64 {
	b.t.Helper()
	g, err := b.store.GroupByName(b.ctx, appName)
	require.NoError(b.t, err)
	return g.ID
}

// doForm posts a form-encoded body.
func (b *bundle) doForm(path, token string, form url.Values) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	return b.send(req)
}

// TestCompatUpdateOfHiddenJob: /jobinfo/update of a job outside the
// caller's groups answers as for an id that does not exist, whatever the
// rest of the request holds.
func TestCompatUpdateOfHiddenJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hidden := b.jobIn("secret", "hidden")
	op := b.operatorOf("op", "default")
	for _, form := range []url.Values{
		{},
		{"jobGroup": {strconv.FormatInt(b.groupID("default"), 10)}, "jobDesc": {"x"}, "jobCron": {"not cron"}},
	} {
		for _, id := range []int64{hidden.ID, 99999} {
			f := url.Values{"id": {strconv.FormatInt(id, 10)}}
			for k, v := range form {
				f[k] = v
			}
			code, msg := b.compat("/jobinfo/update", op, f)
			require.EqualValues(t, 500, code)
			require.Equal(t, fmt.Sprintf("job %d not found", id), msg, "%v", f)
		}
	}
	var got api.Job
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", hidden.ID), b.token, nil, http.StatusOK, &got)
	require.EqualValues(t, 1, got.Revision)
}
