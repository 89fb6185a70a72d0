package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/compat"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/store"
)

type bundle struct {
	t     *testing.T
	ctx   context.Context
	srv   *httptest.Server
	store *store.Store
	keys  cluster.Keys
	token string
	get   func(key string) (string, bool)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup whose compat handler reads and writes through
// wrap(store) when wrap is not nil (the REST API keeps the store itself).
func setupWith(t *testing.T, wrap func(api.Store) api.Store) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = auth.EnsureAdmin(ctx, st, "pw-admin-123")
	require.NoError(t, err)
	login, err := (&auth.Sessions{Store: st}).Login(ctx, "admin", "pw-admin-123", time.Now())
	require.NoError(t, err)
	token := login.Token

	cli := etcdtest.Client(t)
	keys := cluster.NewKeys("")
	for _, n := range []cluster.NodeInfo{
		{UUID: "n1", Group: "xxl-job-executor-sample-springCloud", IP: "127.0.0.11", Port: 1,
			Plugins: []cluster.PluginInfo{{Name: "springCloudDemoJobHandler"}, {Name: "shell"}, {Name: "cmd"}, {Name: "http"}}},
	} {
		v, err := json.Marshal(n)
		require.NoError(t, err)
		_, err = cli.Put(ctx, keys.Node(n.UUID), string(v))
		require.NoError(t, err)
	}
	// Seed 001's executors: id 1 and id 2.
	require.NoError(t, st.CreateGroup(ctx, &store.Group{AppName: "xxl-job-executor-sample", Title: "示例执行器"}))
	require.NoError(t, st.CreateGroup(ctx, &store.Group{AppName: "xxl-job-executor-sample-springCloud", Title: "测试执行器"}))

	b := &bundle{t: t, ctx: ctx, store: st, keys: keys, token: token}
	b.get = func(key string) (string, bool) {
		resp, err := cli.Get(ctx, key)
		require.NoError(t, err)
		if len(resp.Kvs) == 0 {
			return "", false
		}
		return string(resp.Kvs[0].Value), true
	}
	// The compat API is served behind the REST API's front door, which
	// authorizes its paths like any route.
	var compatStore api.Store = st
	if wrap != nil {
		compatStore = wrap(st)
	}
	b.srv = httptest.NewServer(api.New(api.Config{Store: st, Etcd: cli, Keys: keys, Location: time.UTC,
		Compat: compat.New(compat.Config{Store: compatStore, Etcd: cli, Keys: keys, Location: time.UTC})}))
	t.Cleanup(b.srv.Close)
	return b
}

// send posts body (form-encoded when asForm, else JSON) or GETs the query.
func (b *bundle) send(method, path string, body map[string]any, asForm bool, header string) (int, map[string]any) {
	b.t.Helper()
	var rd io.Reader
	ct := ""
	if body != nil {
		if asForm {
			f := url.Values{}
			for k, v := range body {
				switch x := v.(type) {
				case string:
					f.Set(k, x)
				default:
					f.Set(k, strings.Trim(mustJSON(b.t, x), `"`))
				}
			}
			rd, ct = strings.NewReader(f.Encode()), "application/x-www-form-urlencoded"
		} else {
			rd, ct = bytes.NewReader([]byte(mustJSON(b.t, body))), "application/json"
		}
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, rd)
	require.NoError(b.t, err)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	switch header {
	case "xxl":
		req.Header.Set(compat.TokenHeader, b.token)
	case "bearer":
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	require.NoError(b.t, json.Unmarshal(raw, &out), "%s", raw)
	return resp.StatusCode, out
}

// operator is b acting as a new operator whose API token grants groups.
func (b *bundle) operator(groups ...int64) *bundle {
	b.t.Helper()
	secret, hash := auth.NewAPIToken()
	u := &store.User{Username: "op-" + hash[:12], PasswordHash: "-", Role: store.RoleOperator, Groups: groups}
	require.NoError(b.t, b.store.CreateUser(b.ctx, u))
	require.NoError(b.t, b.store.CreateAccessToken(b.ctx, &store.AccessToken{TokenHash: hash, UserID: u.ID,
		Name: "portal", Role: store.RoleOperator, Groups: groups}))
	op := *b
	op.token = secret
	return &op
}

// storeJob stores a shell job named name in group appName, past the API.
func (b *bundle) storeJob(appName, name string) *store.Job {
	b.t.Helper()
	j := &store.Job{Name: name, Group: appName, ScheduleType: "none", Handler: "shell",
		Params: json.RawMessage(`{"script":"true"}`), RouteStrategy: cluster.RouteFirst,
		BlockStrategy: cluster.BlockSerial, MisfirePolicy: cluster.MisfireFireOnceNow}
	require.NoError(b.t, b.store.CreateJob(b.ctx, j))
	return j
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// seedAdd is seed 001's /jobinfo/add request, verbatim.
func seedAdd() map[string]any {
	return map[string]any{
		"jobGroup": 2, "jobDesc": "测试任务1", "executorRouteStrategy": "FIRST", "jobCron": "0/5 * * * * ? *",
		"glueType": "BEAN", "executorHandler": "springCloudDemoJobHandler", "executorBlockStrategy": "SERIAL_EXECUTION",
		"childJobId": "", "executorTimeout": 0, "executorFailRetryCount": 0, "author": "warrior", "alarmEmail": "",
		"executorParam": "",
	}
}

func requireOK(t *testing.T, status int, out map[string]any) {
	t.Helper()
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.EqualValues(t, 200, out["code"], "%v", out)
	require.Contains(t, out, "msg")
	require.Nil(t, out["msg"])
	require.Contains(t, out, "content")
}

func TestSeedExamples(t *testing.T) {
	t.Parallel()
	for _, asForm := range []bool{true, false} {
		t.Run(map[bool]string{true: "form", false: "json"}[asForm], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// /jobgroup/list
			status, out := b.send(http.MethodGet, "/jobgroup/list?appname=&title=&pageNum=&pageSize=", nil, asForm, "xxl")
			require.Equal(t, http.StatusOK, status)
			require.EqualValues(t, 2, out["recordsFiltered"])
			require.EqualValues(t, 2, out["recordsTotal"])
			data := out["data"].([]any)
			require.Len(t, data, 2)
			g2 := data[1].(map[string]any)
			for _, k := range []string{"id", "appname", "title", "addressType", "addressList", "registryList"} {
				require.Contains(t, g2, k)
			}
			require.Equal(t, "xxl-job-executor-sample-springCloud", g2["appname"])
			require.EqualValues(t, 0, g2["addressType"])
			require.Equal(t, []any{"n1"}, g2["registryList"])
			require.Nil(t, data[0].(map[string]any)["registryList"])

			// /jobinfo/add
			status, out = b.send(http.MethodPost, "/jobinfo/add", seedAdd(), asForm, "bearer")
			requireOK(t, status, out)
			idStr, ok := out["content"].(string)
			require.True(t, ok, "content is the id as a string: %v", out)
			id, err := strconv.ParseInt(idStr, 10, 64)
			require.NoError(t, err)
			j, err := b.store.GetJob(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, "测试任务1", j.Name)
			require.Equal(t, "xxl-job-executor-sample-springCloud", j.Group)
			require.Equal(t, "cron", j.ScheduleType)
			require.Equal(t, "0/5 * * * * ? *", j.Schedule)
			require.False(t, j.Enabled, "added stopped, as xxl-job does")
			sig, ok := b.get(b.keys.JobSignal(id))
			require.True(t, ok)
			require.Equal(t, "1", sig)

			// /jobinfo/list
			status, out = b.send(http.MethodGet, "/jobinfo/list?jobGroup=2&triggerStatus=&jobDesc=&executorHandler=&author=&pageNum=&pageSize=", nil, asForm, "xxl")
			require.Equal(t, http.StatusOK, status)
			require.EqualValues(t, 1, out["recordsFiltered"])
			require.EqualValues(t, 1, out["recordsTotal"])
			info := out["data"].([]any)[0].(map[string]any)
			for _, k := range []string{"id", "jobGroup", "jobCron", "jobDesc", "addTime", "updateTime", "author", "alarmEmail",
				"executorRouteStrategy", "executorHandler", "executorParam", "executorBlockStrategy", "executorTimeout",
				"executorFailRetryCount", "glueType", "childJobId", "triggerStatus"} {
				require.Contains(t, info, k)
			}
			require.EqualValues(t, 2, info["jobGroup"])
			require.Equal(t, "0/5 * * * * ? *", info["jobCron"])
			require.Equal(t, "BEAN", info["glueType"])
			require.EqualValues(t, 0, info["triggerStatus"])
			_, err = time.Parse(compat.TimeLayout, info["addTime"].(string))
			require.NoError(t, err, "addTime like 2018-11-03T14:21:31.000+0000")
			require.True(t, strings.HasSuffix(info["addTime"].(string), "+0000"))

			// /jobinfo/update, verbatim with the new id.
			upd := seedAdd()
			upd["id"] = id
			upd["executorRouteStrategy"] = "ROUND"
			upd["alarmEmail"] = "a@example.com,b@example.com"
			status, out = b.send(http.MethodPost, "/jobinfo/update", upd, asForm, "xxl")
			requireOK(t, status, out)
			require.Nil(t, out["content"])
			j, err = b.store.GetJob(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, "ROUND", j.RouteStrategy)
			require.Equal(t, []string{"a@example.com", "b@example.com"}, j.AlarmEmails)
			require.EqualValues(t, 2, j.Revision)

			// start, stop, trigger, remove: ?id= in the query or the body.
			status, out = b.send(http.MethodPost, "/jobinfo/start?id="+idStr, nil, asForm, "xxl")
			requireOK(t, status, out)
			j, _ = b.store.GetJob(b.ctx, id)
			require.True(t, j.Enabled)
			_, out = b.send(http.MethodGet, "/jobinfo/list?jobGroup=2&triggerStatus=1", nil, asForm, "xxl")
			require.EqualValues(t, 1, out["recordsTotal"])
			status, out = b.send(http.MethodPost, "/jobinfo/stop", map[string]any{"id": id}, asForm, "xxl")
			requireOK(t, status, out)
			j, _ = b.store.GetJob(b.ctx, id)
			require.False(t, j.Enabled)
			_, out = b.send(http.MethodGet, "/jobinfo/list?jobGroup=2&triggerStatus=1", nil, asForm, "xxl")
			require.EqualValues(t, 0, out["recordsTotal"])

			status, out = b.send(http.MethodPost, "/jobinfo/trigger?id="+idStr+"&executorParam=", nil, asForm, "xxl")
			requireOK(t, status, out)
			v, ok := b.get(b.keys.Once(id))
			require.True(t, ok)
			require.Contains(t, v, `"requested_by":"admin"`)

			status, out = b.send(http.MethodPost, "/jobinfo/remove", map[string]any{"id": id, "executorParam": ""}, asForm, "xxl")
			requireOK(t, status, out)
			_, err = b.store.GetJob(b.ctx, id)
			require.ErrorIs(t, err, store.ErrNotFound)
			_, ok = b.get(b.keys.JobSignal(id))
			require.False(t, ok)
		})
	}
}

func TestErrorsAndMapping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.send(http.MethodGet, "/jobgroup/list", nil, false, "")
	require.Equal(t, http.StatusUnauthorized, status)
	require.EqualValues(t, 401, out["code"])

	for field, v := range map[string]any{
		"executorRouteStrategy": "NOWHERE", "jobCron": "not cron", "jobGroup": 99, "executorBlockStrategy": "X",
		"glueType": "GLUE_PYTHON", "childJobId": "12345",
	} {
		body := seedAdd()
		body[field] = v
		status, out := b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
		require.Equal(t, http.StatusOK, status)
		require.EqualValues(t, 500, out["code"], field)
		require.Contains(t, out["msg"], field, "the message names %s: %v", field, out["msg"])
	}
	_, total, err := b.store.FindJobs(b.ctx, store.JobFilter{}, store.Page{})
	require.NoError(t, err)
	require.Zero(t, total, "nothing saved")

	_, out = b.send(http.MethodPost, "/jobinfo/start", map[string]any{"id": 404}, true, "xxl")
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], "404")

	// executorParam per handler, and GLUE_SHELL.
	for _, c := range []struct {
		handler, param, want string
	}{
		{"shell", "echo hi\nexit 0", `{"script":"echo hi\nexit 0"}`},
		{"cmd", `/bin/echo "hello world" 'a b' c\ d`, `{"argv":["/bin/echo","hello world","a b","c d"]}`},
		{"http", "url:http://example.com/x\nmethod:POST\ndata:{\"a\":1}", `{"url":"http://example.com/x","method":"POST","body":"{\"a\":1}"}`},
	} {
		body := seedAdd()
		body["jobDesc"] = "测试任务-" + c.handler // names are unique in a group
		body["executorHandler"], body["executorParam"] = c.handler, c.param
		status, out := b.send(http.MethodPost, "/jobinfo/add", body, false, "xxl")
		requireOK(t, status, out)
		id, _ := strconv.ParseInt(out["content"].(string), 10, 64)
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.JSONEq(t, c.want, string(j.Params), c.handler)
		_, out = b.send(http.MethodGet, "/jobinfo/list?jobDesc=测试&executorHandler="+c.handler, nil, false, "xxl")
		row := out["data"].([]any)[0].(map[string]any)
		listed := row["executorParam"].(string)
		switch c.handler {
		case "cmd":
			require.Equal(t, `/bin/echo 'hello world' 'a b' 'c d'`, listed, "argv quoted back")
		case "shell":
			// A shell job is a script: listed as GLUE_SHELL with it as glueSource.
			require.Equal(t, "GLUE_SHELL", row["glueType"])
			require.Equal(t, c.param, row["glueSource"])
			require.Empty(t, listed)
		default:
			require.Equal(t, "BEAN", row["glueType"])
			require.Equal(t, c.param, listed, c.handler)
		}
	}
	body := seedAdd()
	body["glueType"], body["glueSource"], body["executorHandler"] = "GLUE_SHELL", "echo glue", ""
	status, out = b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
	requireOK(t, status, out)
	id, _ := strconv.ParseInt(out["content"].(string), 10, 64)
	// The same name again in the group: the seed's error envelope naming it.
	status, out = b.send(http.MethodPost, "/jobinfo/add", body, true, "xxl")
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 500, out["code"])
	require.Contains(t, out["msg"], `a job named "测试任务1" already exists`)
	j, err := b.store.GetJob(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "shell", j.Handler)
	require.JSONEq(t, `{"script":"echo glue"}`, string(j.Params))

	// Paging: pageNum/pageSize and start/length.
	_, out = b.send(http.MethodGet, "/jobinfo/list?pageNum=2&pageSize=3", nil, false, "xxl")
	require.EqualValues(t, 4, out["recordsTotal"])
	require.Len(t, out["data"], 1)
	_, out = b.send(http.MethodPost, "/jobinfo/list", map[string]any{"start": 1, "length": 2}, true, "xxl")
	require.Len(t, out["data"], 2)
	// The largest int64 is refused, never read as the first page.
	for _, q := range []string{"pageNum=9223372036854775807", "start=9223372036854775807"} {
		_, out = b.send(http.MethodGet, "/jobinfo/list?"+q, nil, false, "xxl")
		require.EqualValues(t, 500, out["code"], q)
		require.Contains(t, out["msg"], "must be from", q)
	}
}
