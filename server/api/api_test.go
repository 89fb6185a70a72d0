package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/compat"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/store"
)

const (
	adminPassword = "s3cret-admin-pw"
	nodeToken     = "node-shared-secret"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bundle is one test's API server with its real store and etcd.
type bundle struct {
	t     testing.TB
	ctx   context.Context
	srv   *httptest.Server
	store *store.Store
	etcd  *clientv3.Client
	keys  cluster.Keys
	clock *clock
	logs  *syncbuf.Buffer
	token string // admin bearer token
	// throttle is the server's login throttle (tests may tune it before use).
	throttle *auth.Throttle
}

func setup(t testing.TB) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	created, pw, err := auth.EnsureAdmin(ctx, st, adminPassword)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, adminPassword, pw)

	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("")
	putNode(t, cli, keys, cluster.NodeInfo{
		UUID: "n1", Group: "default", IP: "127.0.0.11", Port: 1, Version: "1.2.3", Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}},
		Started: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC),
	})

	b := &bundle{
		t: t, ctx: ctx, store: st, etcd: cli, keys: keys, throttle: &auth.Throttle{},
		clock: &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		logs:  &syncbuf.Buffer{},
	}
	h := api.New(api.Config{
		Store:              st,
		Etcd:               cli,
		Keys:               keys,
		Location:           time.UTC,
		NodeToken:          nodeToken,
		SessionMaxLifetime: time.Hour,
		Logger:             slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:                b.clock.Now,
		Compat:             compat.New(compat.Config{Store: st, Etcd: cli, Keys: keys, Location: time.UTC, Now: b.clock.Now}),
		Throttle:           b.throttle,
	})
	b.srv = httptest.NewServer(h)
	t.Cleanup(b.srv.Close)

	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": adminPassword},
		http.StatusOK, &login)
	require.NotEmpty(t, login.Token)
	b.token = login.Token
	return b
}

func putNode(t testing.TB, cli *clientv3.Client, keys cluster.Keys, n cluster.NodeInfo) {
	t.Helper()
	v, err := json.Marshal(n)
	require.NoError(t, err)
	_, err = cli.Put(context.Background(), keys.Node(n.UUID), string(v))
	require.NoError(t, err)
}

// send sends req and returns its status and body.
func (b *bundle) send(req *http.Request) (int, []byte) {
	b.t.Helper()
	resp, err := b.srv.Client().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, raw
}

// do sends a request; body is JSON-encoded unless it is a []byte or string.
func (b *bundle) do(method, path, token string, body any) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(v)
	case string:
		rd = strings.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		require.NoError(b.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, rd)
	require.NoError(b.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return b.send(req)
}

// doJSON sends a request, requires status, and decodes the reply into out (if not nil).
func (b *bundle) doJSON(method, path, token string, body any, status int, out any) {
	b.t.Helper()
	got, raw := b.do(method, path, token, body)
	require.Equal(b.t, status, got, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(b.t, json.Unmarshal(raw, out), "body: %s", raw)
	}
}

// rawDo sends a request over a fresh TCP connection, writing the body in the
// background while reading the response. A server that rejects an oversized
// body replies before it stops reading and closes; net/http's client may then
// report the write error instead of the reply, so oversize tests use this.
func (b *bundle) rawDo(method, path, token string, body []byte) (int, []byte) {
	b.t.Helper()
	conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	require.NoError(b.t, err)
	defer conn.Close()
	require.NoError(b.t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n",
		method, path, len(body))
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	go func() {
		// Write errors are expected once the server gives up reading.
		_, _ = conn.Write(append([]byte(head+"\r\n"), body...))
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, raw
}

// errorOf sends a request that must fail with status and returns the error body.
func (b *bundle) errorOf(method, path, token string, body any, status int) api.ErrorResponse {
	b.t.Helper()
	var e api.ErrorResponse
	b.doJSON(method, path, token, body, status, &e)
	require.NotEmpty(b.t, e.Error)
	return e
}

// etcdCount is the number of keys in etcd.
func (b *bundle) etcdCount() int64 {
	b.t.Helper()
	resp, err := b.etcd.Get(b.ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(b.t, err)
	return resp.Count
}

func (b *bundle) etcdValue(key string) (string, bool) {
	b.t.Helper()
	resp, err := b.etcd.Get(b.ctx, key)
	require.NoError(b.t, err)
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

func (b *bundle) jobTotal() int {
	b.t.Helper()
	_, total, err := b.store.ListJobs(b.ctx, store.Page{Page: 1, PageSize: 10})
	require.NoError(b.t, err)
	return total
}

func validJob() map[string]any {
	return map[string]any{
		"name":     "backup",
		"schedule": "*/5 * * * *",
		"handler":  "shell",
		"params":   map[string]any{"script": "echo hi"},
	}
}

func TestHealthzUIAndRouting(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var health map[string]string
	b.doJSON(http.MethodGet, "/healthz", "", nil, http.StatusOK, &health)
	require.Equal(t, map[string]string{"status": "ok"}, health)

	status, page := b.do(http.MethodGet, "/", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(page), "/healthz")
	require.Contains(t, string(page), "docs/api.md")

	b.errorOf(http.MethodGet, "/api/v1/nope", b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodGet, "/api/v2/jobs", "", nil, http.StatusNotFound)
	b.errorOf(http.MethodGet, "/api/v1/jobs/abc", b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodPatch, "/api/v1/jobs", b.token, nil, http.StatusMethodNotAllowed)
}

func TestLoginAndTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)

	e := b.errorOf(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": "wrong"}, http.StatusUnauthorized)
	require.Equal(t, "invalid username or password", e.Error)
	b.errorOf(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "ghost", "password": "x"}, http.StatusUnauthorized)
	e = b.errorOf(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin"}, http.StatusBadRequest)
	require.Contains(t, e.Fields, "password")
	b.errorOf(http.MethodPost, "/api/v1/auth/login", "", `{"username":`, http.StatusBadRequest)

	// Every other /api/v1 route needs a valid token.
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/jobs"},
		{http.MethodPost, "/api/v1/jobs"},
		{http.MethodGet, "/api/v1/jobs/1"},
		{http.MethodPut, "/api/v1/jobs/1"},
		{http.MethodDelete, "/api/v1/jobs/1"},
		{http.MethodPost, "/api/v1/jobs/1/trigger"},
		{http.MethodGet, "/api/v1/jobs/1/runs"},
		{http.MethodGet, "/api/v1/runs/1"},
		{http.MethodGet, "/api/v1/nodes"},
		{http.MethodGet, "/api/v1/nodes/n1"},
	} {
		b.errorOf(r.method, r.path, "", nil, http.StatusUnauthorized)
		b.errorOf(r.method, r.path, "not-a-token", nil, http.StatusUnauthorized)
	}
	// The node token is not a user token.
	b.errorOf(http.MethodGet, "/api/v1/jobs", nodeToken, nil, http.StatusUnauthorized)

	b.doJSON(http.MethodGet, "/api/v1/jobs", b.token, nil, http.StatusOK, nil)
	b.clock.Advance(time.Hour + time.Second)
	b.errorOf(http.MethodGet, "/api/v1/jobs", b.token, nil, http.StatusUnauthorized)

	// Neither the password nor a token ever reaches the log, but requests do.
	logs := b.logs.String()
	require.Contains(t, logs, "path=/api/v1/auth/login")
	require.Contains(t, logs, "status=401")
	require.NotContains(t, logs, adminPassword)
	require.NotContains(t, logs, b.token)
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var created api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &created)
	require.Positive(t, created.ID)
	require.Equal(t, int64(1), created.Revision)
	require.Equal(t, "backup", created.Name)
	require.Equal(t, "default", created.Group)
	require.Equal(t, "cron", created.ScheduleType)
	require.True(t, created.Enabled)
	require.Equal(t, 0, created.TimeoutSeconds)
	require.JSONEq(t, `{"script":"echo hi"}`, string(created.Params))
	require.False(t, created.CreatedAt.IsZero())
	require.False(t, created.UpdatedAt.IsZero())
	sig, ok := b.etcdValue(b.keys.JobSignal(created.ID))
	require.True(t, ok)
	require.Equal(t, "1", sig)
	path := fmt.Sprintf("/api/v1/jobs/%d", created.ID)

	// The raw JSON carries every documented field.
	status, raw := b.do(http.MethodGet, path, b.token, nil)
	require.Equal(t, http.StatusOK, status)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	for _, k := range []string{"id", "name", "group", "schedule_type", "schedule", "timezone", "handler", "params",
		"timeout_seconds", "enabled", "description", "author", "revision", "created_at", "updated_at"} {
		require.Contains(t, fields, k)
	}
	var got api.Job
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, created.ID, got.ID)
	require.Equal(t, created.Schedule, got.Schedule)

	var list api.List[api.Job]
	b.doJSON(http.MethodGet, "/api/v1/jobs", b.token, nil, http.StatusOK, &list)
	require.Equal(t, 1, list.Total)
	require.Equal(t, 1, list.Page)
	require.Equal(t, 20, list.PageSize)
	require.Len(t, list.Items, 1)
	require.Equal(t, created.ID, list.Items[0].ID)

	upd := validJob()
	upd["name"] = "backup-nightly"
	upd["schedule"] = "0 3 * * *"
	upd["timezone"] = "Europe/Berlin"
	upd["enabled"] = false
	upd["timeout_seconds"] = 600
	var updated api.Job
	b.doJSON(http.MethodPut, path, b.token, upd, http.StatusOK, &updated)
	require.Equal(t, int64(2), updated.Revision)
	require.Equal(t, "backup-nightly", updated.Name)
	require.False(t, updated.Enabled)
	require.Equal(t, "Europe/Berlin", updated.Timezone)
	require.Equal(t, 600, updated.TimeoutSeconds)
	sig, _ = b.etcdValue(b.keys.JobSignal(created.ID))
	require.Equal(t, "2", sig)
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &got)
	require.Equal(t, int64(2), got.Revision)
	require.Equal(t, "0 3 * * *", got.Schedule)

	var accepted api.TriggerResponse
	b.doJSON(http.MethodPost, path+"/trigger", b.token, nil, http.StatusAccepted, &accepted)
	require.Equal(t, "accepted", accepted.Status)
	v, ok := b.etcdValue(b.keys.Once(created.ID))
	require.True(t, ok)
	onceKV, err := b.etcd.Get(b.ctx, b.keys.Once(created.ID))
	require.NoError(t, err)
	require.Equal(t, cluster.ManualFireID(created.ID, onceKV.Kvs[0].ModRevision), accepted.FireID,
		"the reply names the fire id the leader will use")
	require.Nil(t, accepted.RunID, "no TriggerRunWait: no run id")
	var once cluster.OnceRequest
	require.NoError(t, json.Unmarshal([]byte(v), &once))
	require.Empty(t, once.Node)
	require.Equal(t, "admin", once.RequestedBy)
	require.True(t, once.RequestedAt.Equal(b.clock.Now()), "requested_at %v", once.RequestedAt)

	b.doJSON(http.MethodPost, path+"/trigger", b.token, map[string]string{"node": "n1"}, http.StatusAccepted, nil)
	v, _ = b.etcdValue(b.keys.Once(created.ID))
	require.NoError(t, json.Unmarshal([]byte(v), &once))
	require.Equal(t, "n1", once.Node)
	require.Empty(t, once.Params, "no override: the job's params")

	// A params override travels in the once request, for this run only.
	b.doJSON(http.MethodPost, path+"/trigger", b.token,
		map[string]any{"params": map[string]any{"script": "echo override"}}, http.StatusAccepted, nil)
	v, _ = b.etcdValue(b.keys.Once(created.ID))
	once = cluster.OnceRequest{}
	require.NoError(t, json.Unmarshal([]byte(v), &once))
	require.JSONEq(t, `{"script":"echo override"}`, string(once.Params))
	// The audit entry records the fire and the override, its secrets redacted.
	b.doJSON(http.MethodPost, path+"/trigger", b.token, map[string]any{"params": map[string]any{
		"script": "echo with env", "env": map[string]string{"DB_PASSWORD": "hunter2hunter2", "MODE": "fast"}}},
		http.StatusAccepted, &accepted)
	entries, _, err := b.store.FindAudit(b.ctx, store.AuditFilter{ObjectType: "job", ObjectID: strconv.FormatInt(created.ID, 10)},
		store.Page{Page: 1, PageSize: 1})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "trigger", entries[0].Action)
	require.JSONEq(t, `{"fire_id":"`+accepted.FireID+`","params":{"script":"echo with env",`+
		`"env":{"DB_PASSWORD":"[redacted]","MODE":"fast"}}}`, string(entries[0].Diff))
	require.NotContains(t, string(entries[0].Diff), "hunter2")
	v, _ = b.etcdValue(b.keys.Once(created.ID))
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &got)
	require.Equal(t, int64(2), got.Revision, "an override does not change the job")
	for _, bad := range []any{[]int{1}, "x", 3} {
		e := b.errorOf(http.MethodPost, path+"/trigger", b.token, map[string]any{"params": bad}, http.StatusBadRequest)
		require.Equal(t, "params must be a JSON object", e.Fields["params"])
	}
	after, _ := b.etcdValue(b.keys.Once(created.ID))
	require.Equal(t, v, after, "a rejected override writes nothing")

	status, raw = b.do(http.MethodDelete, path, b.token, nil)
	require.Equal(t, http.StatusNoContent, status)
	require.Empty(t, raw)
	e := b.errorOf(http.MethodGet, path, b.token, nil, http.StatusNotFound)
	require.Equal(t, fmt.Sprintf("job %d not found", created.ID), e.Error)
	_, ok = b.etcdValue(b.keys.JobSignal(created.ID))
	require.False(t, ok, "signal key must be gone")
	b.errorOf(http.MethodDelete, path, b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodPut, path, b.token, validJob(), http.StatusNotFound)
	b.errorOf(http.MethodPost, path+"/trigger", b.token, nil, http.StatusNotFound)
	require.Equal(t, 0, b.jobTotal())
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 3 {
		j := validJob()
		j["name"] = fmt.Sprintf("job-%d", i)
		b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, nil)
	}
	var list api.List[api.Job]
	b.doJSON(http.MethodGet, "/api/v1/jobs?page_size=2", b.token, nil, http.StatusOK, &list)
	require.Equal(t, 3, list.Total)
	require.Len(t, list.Items, 2)
	require.Equal(t, "job-0", list.Items[0].Name)
	// A page past the last one is empty, up to the largest page allowed.
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs?page=%d&page_size=500", api.MaxPage), b.token, nil, http.StatusOK, &list)
	require.Equal(t, 3, list.Total)
	require.Empty(t, list.Items)
	b.doJSON(http.MethodGet, "/api/v1/jobs?page=2&page_size=2", b.token, nil, http.StatusOK, &list)
	require.Equal(t, 3, list.Total)
	require.Equal(t, 2, list.Page)
	require.Len(t, list.Items, 1)
	require.Equal(t, "job-2", list.Items[0].Name)

	for q, field := range map[string]string{
		"page=0":               "page",
		"page=x":               "page",
		"page_size=0":          "page_size",
		"page_size=501":        "page_size",
		"page_size=-1":         "page_size",
		"page=1&page_size=abc": "page_size",
		// The largest int64: refused, never read as page 1 by an overflowing offset.
		"page=9223372036854775807": "page",
		"page=1000000001":          "page",
	} {
		e := b.errorOf(http.MethodGet, "/api/v1/jobs?"+q, b.token, nil, http.StatusBadRequest)
		require.Contains(t, e.Fields, field, q)
	}
}

func TestInvalidInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Another group's node offers "http"; "default" does not.
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "web", IP: "127.0.0.12", Port: 1,
		Plugins: []cluster.PluginInfo{{Name: "http", Version: "1"}}})

	// One existing job, to check that a rejected PUT or trigger changes nothing either.
	var existing api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &existing)
	existingPath := fmt.Sprintf("/api/v1/jobs/%d", existing.ID)
	_, err := b.etcd.Delete(b.ctx, b.keys.JobSignal(existing.ID))
	require.NoError(t, err)
	groupsBefore, err := b.store.ListGroups(b.ctx)
	require.NoError(t, err)
	keysBefore := b.etcdCount()

	with := func(k string, v any) map[string]any {
		j := validJob()
		if v == nil {
			delete(j, k)
		} else {
			j[k] = v
		}
		return j
	}
	huge := `{"name":"big","schedule":"@every 1m","handler":"shell","description":"` + strings.Repeat("x", 2<<20) + `"}`

	cases := []struct {
		name   string
		body   any
		status int
		field  string // "" = no field expected
		msg    string // substring of the field message or the error
	}{
		{"bad cron", with("schedule", "61 * * * *"), 400, "schedule", "invalid cron expression"},
		{"empty schedule", with("schedule", nil), 400, "schedule", "empty"},
		{"unknown schedule type", with("schedule_type", "quartz"), 400, "schedule_type", "unknown schedule type"},
		{"unknown handler", with("handler", "nope"), 400, "handler", `unknown handler "nope": no node has ever offered it (known: http, shell)`},
		{"missing handler", with("handler", nil), 400, "handler", "required"},
		{"missing name", with("name", nil), 400, "name", "required"},
		{"blank name", with("name", "   "), 400, "name", "required"},
		{"long name", with("name", strings.Repeat("n", 201)), 400, "name", "200"},
		// A NUL byte would reach SQLite, which refuses it (a 500 before).
		{"NUL in name", with("name", "back\x00up"), 400, "name", "NUL"},
		{"NUL in description", with("description", "a\x00b"), 400, "description", "NUL"},
		{"NUL in author", with("author", "\x00"), 400, "author", "NUL"},
		{"once in the past", map[string]any{"name": "late", "schedule_type": "once", "schedule": "2026-02-28T12:00:00Z",
			"handler": "shell", "params": map[string]any{"script": "echo hi"}}, 400, "schedule", "is in the past"},
		{"cron only in a DST gap", map[string]any{"name": "gap", "schedule": "0 30 2 ? 3 1L", "timezone": "Europe/Berlin",
			"handler": "shell", "params": map[string]any{"script": "echo hi"}}, 400, "schedule", "daylight-saving gap"},
		{"quartz step too large", with("schedule", "0 0/60 * * * ?"), 400, "schedule", "minute: step 60"},
		{"params array", with("params", []int{1}), 400, "params", "JSON object"},
		{"params string", with("params", "x=1"), 400, "params", "JSON object"},
		{"params too big", with("params", map[string]string{"x": strings.Repeat("y", 70<<10)}), 400, "params", "64 KiB"},
		{"bad timezone", with("timezone", "Mars/Olympus"), 400, "timezone", "Mars/Olympus"},
		{"negative timeout", with("timeout_seconds", -1), 400, "timeout_seconds", "86400"},
		{"timeout too long", with("timeout_seconds", 86401), 400, "timeout_seconds", "86400"},
		{"timeout not integer", with("timeout_seconds", "ten"), 400, "timeout_seconds", "integer"},
		{"enabled not bool", with("enabled", "yes"), 400, "enabled", "boolean"},
		{"unknown field", with("retries", 3), 400, "retries", "unknown field"},
		{"read-only field", with("revision", 7), 400, "revision", "unknown field"},
		{"malformed JSON", `{"name": "x",`, 400, "", "malformed JSON"},
		{"trailing data", `{"name":"x"} {}`, 400, "", "malformed JSON"},
		{"not an object", `[1,2]`, 400, "", "JSON object"},
		{"empty body", "", 400, "", "empty"},
		{"2 MiB body", huge, 413, "", "request body exceeds 1 MiB"},
	}
	for _, tc := range cases {
		for _, target := range []struct{ method, path string }{
			{http.MethodPost, "/api/v1/jobs"},
			{http.MethodPut, existingPath},
		} {
			var e api.ErrorResponse
			if tc.status == http.StatusRequestEntityTooLarge {
				status, raw := b.rawDo(target.method, target.path, b.token, []byte(tc.body.(string)))
				require.Equal(t, tc.status, status, "%s %s: %s", tc.name, target.method, raw)
				require.NoError(t, json.Unmarshal(raw, &e))
			} else {
				e = b.errorOf(target.method, target.path, b.token, tc.body, tc.status)
			}
			if tc.field != "" {
				require.Contains(t, e.Fields, tc.field, "%s %s: %+v", tc.name, target.method, e)
				require.Contains(t, e.Fields[tc.field], tc.msg, tc.name)
			} else {
				require.Contains(t, e.Error, tc.msg, "%s %s", tc.name, target.method)
			}
		}
	}

	// Several problems at once are all reported.
	e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, map[string]any{"schedule": "bad", "params": 1}, 400)
	require.Equal(t, "invalid job", e.Error)
	for _, f := range []string{"name", "schedule", "handler", "params"} {
		require.Contains(t, e.Fields, f)
	}

	// Rejected triggers write no once key.
	e = b.errorOf(http.MethodPost, existingPath+"/trigger", b.token, map[string]string{"node": "ghost"}, 400)
	require.Contains(t, e.Fields["node"], "ghost")
	e = b.errorOf(http.MethodPost, existingPath+"/trigger", b.token, map[string]string{"node": "n2"}, 400)
	require.Contains(t, e.Fields["node"], "group")
	e = b.errorOf(http.MethodPost, existingPath+"/trigger", b.token, map[string]any{"nodes": "n1"}, 400)
	require.Equal(t, "unknown field", e.Fields["nodes"])
	b.errorOf(http.MethodPost, "/api/v1/jobs/999/trigger", b.token, nil, 404)

	require.Equal(t, 1, b.jobTotal(), "no job may be created")
	stored, err := b.store.GetJob(b.ctx, existing.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), stored.Revision, "no update may be applied")
	require.Equal(t, "backup", stored.Name)
	groupsAfter, err := b.store.ListGroups(b.ctx)
	require.NoError(t, err)
	require.Equal(t, groupsBefore, groupsAfter, "no group may be created")
	require.Equal(t, keysBefore, b.etcdCount(), "no etcd key may be written")
	_, ok := b.etcdValue(b.keys.JobSignal(existing.ID))
	require.False(t, ok)
	_, ok = b.etcdValue(b.keys.Once(existing.ID))
	require.False(t, ok)
	resp, err := b.etcd.Get(b.ctx, b.keys.JobSignalPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count)
}

// TestJobNamesUniqueInGroup: a second job of the same name in a group is a
// 409 naming both, also when 20 clients create it at once; the store's
// suite checks the same on PostgreSQL and MySQL.
func TestJobNamesUniqueInGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var first api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &first)
	e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusConflict)
	require.Equal(t, `a job named "backup" already exists in group "default"`, e.Error)

	other := validJob()
	other["name"] = "restore"
	var second api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, other, http.StatusCreated, &second)
	e = b.errorOf(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", second.ID), b.token, validJob(), http.StatusConflict)
	require.Contains(t, e.Error, `"backup" already exists`)
	got, err := b.store.GetJob(b.ctx, second.ID)
	require.NoError(t, err)
	require.Equal(t, "restore", got.Name)
	// Saving a job unchanged under its own name is fine.
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", first.ID), b.token, validJob(), http.StatusOK, nil)

	const n = 20
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j := validJob()
			j["name"] = "race"
			statuses[i], _ = b.do(http.MethodPost, "/api/v1/jobs", b.token, j)
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, st := range statuses {
		counts[st]++
	}
	require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusConflict: n - 1}, counts)
	require.Equal(t, 3, b.jobTotal())
}

// TestJobSavesWithoutLiveNode: a handler the catalog knows saves with a
// warning while no node of the job's group offers it (the node is down,
// or has not registered yet), checked against the catalog's schema; a
// handler never seen is refused listing the known ones.
func TestJobSavesWithoutLiveNode(t *testing.T) {
	t.Parallel()
	b := setup(t) // n1 of "default" offers shell
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "web", IP: "127.0.0.12", Port: 1,
		Plugins: []cluster.PluginInfo{{Name: "http", Version: "1"}}})
	putHandler(t, b, cluster.HandlerInfo{Name: "http", Version: "1", Node: "n2",
		ParamsSchema: json.RawMessage(`{"type":"object","required":["url"],"properties":{"url":{"type":"string"}}}`)})

	// http is offered in "web" only: a "default" job using it waits for a node.
	j := validJob()
	j["handler"], j["params"] = "http", map[string]any{"url": "http://example.com"}
	var saved api.SavedJob
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, &saved)
	require.Equal(t, []string{`no live node of group "default" offers handler "http" now: the job is saved and fires once one does`},
		saved.Warnings)
	require.Equal(t, "http", saved.Handler)

	// The nodes go away: the catalog in SQL still knows http and its schema.
	_, err := b.etcd.Delete(b.ctx, "/", clientv3.WithPrefix())
	require.NoError(t, err)
	j["name"], j["params"] = "b2", map[string]any{"nope": 1}
	e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusBadRequest)
	require.Contains(t, e.Fields["params"], "params do not match the http handler's schema (version 1): missing property 'url'")
	j["params"] = map[string]any{"url": "http://example.com/2"}
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, &saved)
	require.Len(t, saved.Warnings, 1)
	// shell was only listed by n1's registration: known too, without a schema.
	j["name"], j["handler"], j["params"] = "b3", "shell", map[string]any{"script": "true"}
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, &saved)
	require.Len(t, saved.Warnings, 1)
	// Updates warn the same way.
	b.doJSON(http.MethodPut, fmt.Sprintf("/api/v1/jobs/%d", saved.ID), b.token, j, http.StatusOK, &saved)
	require.Len(t, saved.Warnings, 1)

	j["name"], j["handler"] = "b4", "nope"
	e = b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusBadRequest)
	require.Equal(t, `unknown handler "nope": no node has ever offered it (known: http, shell)`, e.Fields["handler"])
	require.Equal(t, 3, b.jobTotal())

	// With a live node offering it, no warning.
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n1", Group: "default", IP: "127.0.0.11", Port: 1,
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}}})
	j["name"], j["handler"] = "b5", "shell"
	status, raw := b.do(http.MethodPost, "/api/v1/jobs", b.token, j)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	require.NotContains(t, string(raw), "warnings")
}

func TestGroupIsEnsured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "web", IP: "127.0.0.12", Port: 1,
		Plugins: []cluster.PluginInfo{{Name: "http", Version: "1"}}})
	j := validJob()
	j["group"] = "web"
	j["handler"] = "http"
	var created api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, j, http.StatusCreated, &created)
	require.Equal(t, "web", created.Group)
	groups, err := b.store.ListGroups(b.ctx)
	require.NoError(t, err)
	var names []string
	for _, g := range groups {
		names = append(names, g.AppName)
	}
	require.Contains(t, names, "web")

	// "web" breaks the appname rule (4 to 64 characters) but came from a
	// node's --group: its title can still be edited under that name, while
	// renaming it, or creating another such group, is held to the rule.
	var web api.Group
	for _, g := range groups {
		if g.AppName == "web" {
			web.ID = g.ID
		}
	}
	path := fmt.Sprintf("/api/v1/groups/%d", web.ID)
	b.doJSON(http.MethodPut, path, b.token, map[string]any{"appname": "web", "title": "Web tier"}, http.StatusOK, &web)
	require.Equal(t, "Web tier", web.Title)
	e := b.errorOf(http.MethodPut, path, b.token, map[string]any{"appname": "ui"}, http.StatusBadRequest)
	require.Contains(t, e.Fields["appname"], "4 to 64 characters")
	e = b.errorOf(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "api"}, http.StatusBadRequest)
	require.Contains(t, e.Fields["appname"], "4 to 64 characters")
}

func TestResultsAndRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)

	sched := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	started := sched.Add(1500 * time.Millisecond)
	finished := started.Add(2 * time.Second)
	exit := 0
	batch := cluster.ResultBatch{Results: []cluster.RunResult{
		{
			FireID: cluster.FireID(job.ID, sched), JobID: job.ID, Trigger: cluster.TriggerSchedule, Node: "n1",
			Status: cluster.StatusSuccess, ScheduledAt: sched, StartedAt: &started, FinishedAt: &finished,
			ExitCode: &exit, Output: "hello\n",
		},
		{
			FireID: cluster.FireID(job.ID, sched.Add(time.Minute)), JobID: job.ID, Trigger: cluster.TriggerSchedule,
			Node: "n1", Status: cluster.StatusRunning, ScheduledAt: sched.Add(time.Minute), StartedAt: &finished,
		},
	}}

	// Node auth: missing, wrong, or a user token → 401, nothing stored.
	b.errorOf(http.MethodPost, "/api/v1/internal/results", "", batch, http.StatusUnauthorized)
	b.errorOf(http.MethodPost, "/api/v1/internal/results", "wrong-token", batch, http.StatusUnauthorized)
	b.errorOf(http.MethodPost, "/api/v1/internal/results", b.token, batch, http.StatusUnauthorized)
	var empty api.List[api.Run]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID), b.token, nil, http.StatusOK, &empty)
	require.Zero(t, empty.Total)
	require.NotNil(t, empty.Items)

	// An invalid batch is rejected as a whole.
	bad := cluster.ResultBatch{Results: []cluster.RunResult{batch.Results[0], {FireID: "x", Status: "weird"}}}
	e := b.errorOf(http.MethodPost, "/api/v1/internal/results", nodeToken, bad, http.StatusBadRequest)
	require.Contains(t, e.Fields, "results[1].fire_id")
	require.Contains(t, e.Fields, "results[1].status")

	var ack cluster.ResultAck
	b.dispatchRuns(batch.Results)
	b.doJSON(http.MethodPost, "/api/v1/internal/results", nodeToken, batch, http.StatusOK, &ack)
	require.Equal(t, 2, ack.Accepted)
	// Idempotent: the same batch again is accepted and changes nothing.
	b.doJSON(http.MethodPost, "/api/v1/internal/results", nodeToken, batch, http.StatusOK, &ack)
	require.Equal(t, 2, ack.Accepted)

	var runs api.List[api.Run]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID), b.token, nil, http.StatusOK, &runs)
	require.Equal(t, 2, runs.Total)
	require.Len(t, runs.Items, 2)
	// Newest scheduled first.
	require.Equal(t, batch.Results[1].FireID, runs.Items[0].FireID)
	require.Equal(t, cluster.StatusRunning, runs.Items[0].Status)
	require.Nil(t, runs.Items[0].ExitCode)
	require.True(t, runs.Items[0].FinishedAt.IsZero())

	done := runs.Items[1]
	require.Equal(t, batch.Results[0].FireID, done.FireID)
	require.Equal(t, job.ID, done.JobID)
	require.Equal(t, "backup", done.JobName)
	require.Equal(t, cluster.TriggerSchedule, done.Trigger)
	require.Equal(t, cluster.StatusSuccess, done.Status)
	require.Equal(t, "n1", done.Node)
	require.Equal(t, "hello\n", done.Output)
	require.NotNil(t, done.ExitCode)
	require.Equal(t, 0, *done.ExitCode)
	require.True(t, done.StartedAt.Equal(started))
	require.True(t, done.FinishedAt.Equal(finished))

	// Raw JSON: RFC 3339 with milliseconds, null when unset.
	status, raw := b.do(http.MethodGet, fmt.Sprintf("/api/v1/runs/%d", done.ID), b.token, nil)
	require.Equal(t, http.StatusOK, status)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"id", "fire_id", "job_id", "job_name", "trigger", "status", "scheduled_at", "dispatched_at",
		"started_at", "finished_at", "exit_code", "node", "output", "output_truncated", "message"} {
		require.Contains(t, m, k)
	}
	require.Equal(t, "backup", m["job_name"])
	require.Equal(t, "2026-03-01T11:00:01.500Z", m["started_at"])
	require.Equal(t, "2026-03-01T11:00:00.000Z", m["scheduled_at"])
	require.Nil(t, m["dispatched_at"])
	require.EqualValues(t, 0, m["exit_code"])

	status, raw = b.do(http.MethodGet, fmt.Sprintf("/api/v1/runs/%d", runs.Items[0].ID), b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, json.Unmarshal(raw, &m))
	require.Nil(t, m["exit_code"])
	require.Nil(t, m["finished_at"])

	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs?page=2&page_size=1", job.ID), b.token, nil, http.StatusOK, &runs)
	require.Equal(t, 2, runs.Total)
	require.Len(t, runs.Items, 1)
	require.Equal(t, done.ID, runs.Items[0].ID)

	b.errorOf(http.MethodGet, "/api/v1/runs/999999", b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodGet, "/api/v1/jobs/999999/runs", b.token, nil, http.StatusNotFound)
	b.errorOf(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs?page_size=0", job.ID), b.token, nil, http.StatusBadRequest)
}

func TestResultBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)

	// A 2 MiB output is fine on the result route (limit 64 MiB).
	sched := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	batch := cluster.ResultBatch{Results: []cluster.RunResult{{
		FireID: cluster.FireID(job.ID, sched), JobID: job.ID, Trigger: cluster.TriggerSchedule, Node: "n1",
		Status: cluster.StatusFailed, ScheduledAt: sched, Output: strings.Repeat("o", 2<<20),
	}}}
	var ack cluster.ResultAck
	b.dispatchRuns(batch.Results)
	b.doJSON(http.MethodPost, "/api/v1/internal/results", nodeToken, batch, http.StatusOK, &ack)
	require.Equal(t, 1, ack.Accepted)
	var runs api.List[api.Run]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID), b.token, nil, http.StatusOK, &runs)
	require.Len(t, runs.Items, 1)
	// The store keeps the first MaxOutputBytes and marks the run truncated.
	require.True(t, runs.Items[0].OutputTruncated)
	require.Equal(t, store.MaxOutputBytes, len(runs.Items[0].Output))
}

func TestNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "web", IP: "127.0.0.12", Port: 2,
		Status: "online", Plugins: []cluster.PluginInfo{{Name: "http", Version: "2.0.0"}}})
	// Junk under the node prefix is skipped, not fatal.
	_, err := b.etcd.Put(b.ctx, b.keys.Node("junk"), "{not json")
	require.NoError(t, err)

	var nodes api.NodeList
	b.doJSON(http.MethodGet, "/api/v1/nodes", b.token, nil, http.StatusOK, &nodes)
	require.Len(t, nodes.Items, 2)
	n1 := nodes.Items[0]
	require.Equal(t, api.Node{
		UUID: "n1", Group: "default", Address: "127.0.0.11:1", Status: "online",
		Plugins: []api.Plugin{{Name: "shell", Version: "1.0.0"}}, Version: "1.2.3",
		Started:      api.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)},
		PluginStatus: []api.PluginStatus{},
	}, n1)
	require.Equal(t, "n2", nodes.Items[1].UUID)
	require.Equal(t, "127.0.0.12:2", nodes.Items[1].Address)

	status, raw := b.do(http.MethodGet, "/api/v1/nodes", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), `"started":"2026-01-02T03:04:05.600Z"`)
}

func TestGetNodeShowsRefusedPlugins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	retry := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n3", Group: "web", IP: "127.0.0.13", Port: 3, Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "notify", Version: "1.0.0"}},
		PluginStatus: []cluster.PluginStatus{
			{Name: "copy", Path: "/p/cronix-plugin-copy", Handler: "copy", State: cluster.PluginRefused,
				Reason: cluster.PluginReasonHandlerNotPinned, Message: `it serves handler "notify" but its checksum entry pins it to handler "copy" only`},
			{Name: "flaky", Handler: "flaky", State: cluster.PluginBackoff, Reason: cluster.PluginReasonCrashLoop,
				Message: "crash loop", Restarts: 3, RetryAt: &retry},
			{Name: "notify", Handler: "notify", Version: "1.0.0", Protocol: 2, State: cluster.PluginLoaded},
		}})

	var n api.Node
	b.doJSON(http.MethodGet, "/api/v1/nodes/n3", b.token, nil, http.StatusOK, &n)
	require.Equal(t, "n3", n.UUID)
	require.Equal(t, []api.PluginStatus{
		{Name: "copy", Path: "/p/cronix-plugin-copy", Handler: "copy", State: "refused", Reason: "handler_not_pinned",
			Message: `it serves handler "notify" but its checksum entry pins it to handler "copy" only`},
		{Name: "flaky", Handler: "flaky", State: "backoff", Reason: "crash_loop", Message: "crash loop", Restarts: 3,
			RetryAt: &api.Time{Time: retry}},
		{Name: "notify", Handler: "notify", Version: "1.0.0", Protocol: 2, State: "loaded"},
	}, n.PluginStatus)
	b.errorOf(http.MethodGet, "/api/v1/nodes/nope", b.token, nil, http.StatusNotFound)
}

// A result for a fire that was not dispatched to the reporting node (no
// run, or another node's run) is acknowledged but not stored, and shows up
// as a security event; nodes' refused records show up there too.
func TestForeignResultsAndSecurityEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var job api.Job
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, &job)
	at := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	mine := cluster.RunResult{FireID: cluster.FireID(job.ID, at), JobID: job.ID, Node: "n1",
		Status: cluster.StatusSuccess, ScheduledAt: at}
	b.dispatchRuns([]cluster.RunResult{mine})
	theirs := mine
	theirs.Node = "n2" // n1's fire, reported by n2
	unknown := cluster.RunResult{FireID: cluster.FireID(job.ID, at.Add(time.Hour)), JobID: job.ID, Node: "n1",
		Status: cluster.StatusSuccess, ScheduledAt: at.Add(time.Hour)} // never dispatched
	var ack cluster.ResultAck
	b.doJSON(http.MethodPost, "/api/v1/internal/results", nodeToken,
		cluster.ResultBatch{Results: []cluster.RunResult{theirs, unknown}}, http.StatusOK, &ack)
	require.Equal(t, 2, ack.Accepted, "acknowledged, so the node stops sending them")
	var runs api.List[api.Run]
	b.doJSON(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/runs", job.ID), b.token, nil, http.StatusOK, &runs)
	require.Equal(t, 1, runs.Total, "the never-dispatched fire is not recorded")
	require.Equal(t, cluster.StatusTriggered, runs.Items[0].Status, "n2's report did not finish n1's run")

	b.doJSON(http.MethodPost, "/api/v1/internal/security-events", nodeToken, cluster.SecurityEventBatch{
		Node: "n1", Events: []cluster.SecurityEvent{{At: at, Kind: "unsigned_record", Key: "/Cronix/run/n1/9-9",
			Reason: "record is not signed"}},
	}, http.StatusOK, nil)
	b.errorOf(http.MethodPost, "/api/v1/internal/security-events", b.token, cluster.SecurityEventBatch{Node: "n1"},
		http.StatusUnauthorized)
	e := b.errorOf(http.MethodPost, "/api/v1/internal/security-events", nodeToken,
		cluster.SecurityEventBatch{Events: []cluster.SecurityEvent{{}}}, http.StatusBadRequest)
	require.Contains(t, e.Fields, "node")
	require.Contains(t, e.Fields, "events[0].kind")

	var events api.List[api.SecurityEvent]
	b.doJSON(http.MethodGet, "/api/v1/security/events", b.token, nil, http.StatusOK, &events)
	require.Equal(t, 3, events.Total)
	kinds := map[string]string{}
	for _, ev := range events.Items {
		kinds[ev.Key] = ev.Kind + "@" + ev.Node
	}
	require.Equal(t, map[string]string{
		theirs.FireID:        api.KindForeignResult + "@n2",
		unknown.FireID:       api.KindForeignResult + "@n1",
		"/Cronix/run/n1/9-9": "unsigned_record@n1",
	}, kinds)
	b.errorOf(http.MethodGet, "/api/v1/security/events", "", nil, http.StatusUnauthorized)
}
