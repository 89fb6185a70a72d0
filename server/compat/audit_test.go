package compat_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

// audited is every audit entry, oldest first, as "user action type id".
func (b *bundle) audited() []string {
	b.t.Helper()
	entries, _, err := b.store.FindAudit(b.ctx, store.AuditFilter{}, store.Page{})
	require.NoError(b.t, err)
	out := make([]string, 0, len(entries))
	for _, e := range slices.Backward(entries) {
		out = append(out, fmt.Sprintf("%s %s %s %s", e.Username, e.Action, e.ObjectType, e.ObjectID))
	}
	return out
}

// TestAuditOnlySuccessfulWrites: the compat API answers errors with HTTP
// 200 and code 500; such a call changed nothing and writes no audit entry,
// nor does a list (a read, even as POST). Every successful write is
// audited with its action and the job it acted on.
func TestAuditOnlySuccessfulWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outside := b.storeJob("xxl-job-executor-sample", "outside") // group 1
	op := b.operator(2)
	before := b.audited()

	// Reads, GET and POST, as an admin and as an operator.
	for _, who := range []*bundle{b, op} {
		for _, path := range []string{"/jobinfo/list", "/jobgroup/list"} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				status, out := who.send(method, path, nil, true, "xxl")
				require.Equal(t, http.StatusOK, status, "%s %s: %v", method, path, out)
				require.Contains(t, out, "data")
			}
		}
	}
	require.Equal(t, before, b.audited(), "lists are reads: not audited")

	// Failures answered in the error envelope (HTTP 200, code 500).
	bad := seedAdd()
	bad["jobCron"] = "not cron"
	upd := seedAdd()
	upd["id"] = 424242
	outsideUpd := seedAdd()
	outsideUpd["id"], outsideUpd["jobGroup"] = outside.ID, 1
	outsideID := map[string]any{"id": outside.ID}
	missing := map[string]any{"id": 424242}
	for _, c := range []struct {
		who  *bundle
		path string
		body map[string]any
	}{
		{b, "/jobinfo/add", bad},
		{b, "/jobinfo/update", upd},
		{b, "/jobinfo/remove", missing},
		{b, "/jobinfo/start", missing},
		{b, "/jobinfo/stop", missing},
		{b, "/jobinfo/trigger", missing},
		{b, "/jobinfo/remove", map[string]any{"id": "x"}},
		{op, "/jobinfo/update", outsideUpd},
		{op, "/jobinfo/remove", outsideID},
		{op, "/jobinfo/start", outsideID},
		{op, "/jobinfo/stop", outsideID},
		{op, "/jobinfo/trigger", outsideID},
	} {
		status, out := c.who.send(http.MethodPost, c.path, c.body, true, "xxl")
		require.Equal(t, http.StatusOK, status, "%s %v: %v", c.path, c.body, out)
		require.EqualValues(t, 500, out["code"], "%s %v: %v", c.path, c.body, out)
	}
	require.Equal(t, before, b.audited(), "failed calls are not audited")
	j, err := b.store.GetJob(b.ctx, outside.ID)
	require.NoError(t, err)
	require.Equal(t, outside.Revision, j.Revision, "the job outside the operator's groups is unchanged")

	// Successful writes: one entry each, naming the job.
	status, out := op.send(http.MethodPost, "/jobinfo/add", seedAdd(), true, "xxl")
	requireOK(t, status, out)
	id := out["content"].(string)
	changed := seedAdd()
	changed["id"], changed["author"] = id, "someone else"
	unchanged := seedAdd()
	unchanged["id"], unchanged["author"] = id, "someone else"
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/jobinfo/update", changed},
		{"/jobinfo/update", unchanged}, // sent back as it is: a successful update that changes nothing
		{"/jobinfo/start", map[string]any{"id": id}},
		{"/jobinfo/stop", map[string]any{"id": id}},
		{"/jobinfo/trigger", map[string]any{"id": id}},
		{"/jobinfo/remove", map[string]any{"id": id}},
	} {
		status, out := op.send(http.MethodPost, c.path, c.body, true, "xxl")
		requireOK(t, status, out)
	}
	got := b.audited()[len(before):]
	require.Len(t, got, 7, "%v", got)
	want := []string{"create", "update", "update", "enable", "disable", "trigger", "delete"}
	for i, e := range got {
		var name, action, typ, objectID string
		_, err := fmt.Sscan(e, &name, &action, &typ, &objectID)
		require.NoError(t, err, "%q in %q", e, got)
		require.True(t, strings.HasPrefix(name, "op-"), "%q", e)
		require.Equal(t, want[i]+" job "+id, action+" "+typ+" "+objectID, "entry %d: %q", i, e)
	}
}
