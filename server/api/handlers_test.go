package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
)

// shellSchema is a handler schema like the shell plugin's.
const shellSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "script": {"type": "string", "minLength": 1},
    "interpreter": {"type": "string", "enum": ["sh", "bash", "python3"]}
  },
  "required": ["script"],
  "additionalProperties": false
}`

func putHandler(t *testing.T, b *bundle, h cluster.HandlerInfo) {
	t.Helper()
	v, err := json.Marshal(h)
	require.NoError(t, err)
	_, err = b.etcd.Put(b.ctx, b.keys.Handler(h.Name, h.Node), string(v))
	require.NoError(t, err)
}

func TestListHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t) // node n1 of group "default" lists shell 1.0.0 in its registration
	b.errorOf(http.MethodGet, "/api/v1/handlers", "", nil, http.StatusUnauthorized)

	// A handler a node registers, before it publishes a description.
	var list api.HandlerList
	b.doJSON(http.MethodGet, "/api/v1/handlers", b.token, nil, http.StatusOK, &list)
	require.Equal(t, []api.HandlerItem{{Name: "shell", Version: "1.0.0", ParamsSchema: json.RawMessage(`{}`), Nodes: 1,
		Groups: []string{"default"}}}, list.Items)

	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "batch", Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.2.0"}}, Started: time.Now()})
	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: "1.0.0", Description: "old", ParamsSchema: json.RawMessage(`{"type":"object"}`), Node: "n1"})
	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: "1.2.0", Description: "Runs a script", ParamsSchema: json.RawMessage(shellSchema), Node: "n2"})
	putHandler(t, b, cluster.HandlerInfo{Name: "http", Version: "1.0.0", Node: "n1"})
	_, err := b.etcd.Put(b.ctx, b.keys.Handler("broken", "n1"), "{not json")
	require.NoError(t, err)

	b.doJSON(http.MethodGet, "/api/v1/handlers", b.token, nil, http.StatusOK, &list)
	require.Len(t, list.Items, 2)
	require.Equal(t, "http", list.Items[0].Name)
	require.Equal(t, 1, list.Items[0].Nodes)
	require.JSONEq(t, `{}`, string(list.Items[0].ParamsSchema))
	sh := list.Items[1]
	require.Equal(t, "shell", sh.Name)
	require.Equal(t, "1.2.0", sh.Version)
	require.Equal(t, "Runs a script", sh.Description)
	require.Equal(t, 2, sh.Nodes)
	require.Equal(t, []string{"batch", "default"}, sh.Groups)
	require.JSONEq(t, shellSchema, string(sh.ParamsSchema))

	// ?group= counts that group's nodes; a handler none of them offers is
	// still listed (known), with no nodes.
	b.doJSON(http.MethodGet, "/api/v1/handlers?group=batch", b.token, nil, http.StatusOK, &list)
	require.Len(t, list.Items, 2)
	require.Equal(t, 0, list.Items[0].Nodes, "http: no node of batch offers it")
	require.Empty(t, list.Items[0].Groups)
	require.Equal(t, 1, list.Items[1].Nodes)
	require.Equal(t, []string{"batch"}, list.Items[1].Groups)

	// The nodes go away: the handlers stay known (the catalog), with no nodes.
	_, err = b.etcd.Delete(b.ctx, b.keys.NodePrefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	b.doJSON(http.MethodGet, "/api/v1/handlers", b.token, nil, http.StatusOK, &list)
	require.Len(t, list.Items, 2)
	for _, h := range list.Items {
		require.Zero(t, h.Nodes, h.Name)
	}

	// The raw JSON has the documented field names.
	_, raw := b.do(http.MethodGet, "/api/v1/handlers", b.token, nil)
	var fields struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal(raw, &fields))
	for _, k := range []string{"name", "version", "description", "params_schema", "nodes", "groups"} {
		require.Contains(t, fields.Items[1], k)
	}
}

// TestListHandlersOfTheCallersGroups: a user limited to some groups sees
// the handlers offered by nodes of those groups, counted over them only.
func TestListHandlersOfTheCallersGroups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n2", Group: "batch", Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}, {Name: "secret-etl", Version: "2.0.0"}}, Started: time.Now()})
	var batch api.Group
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]string{"appname": "batch"}, http.StatusCreated, &batch)
	b.doJSON(http.MethodPost, "/api/v1/users", b.token, map[string]any{"username": "ops", "password": "ops-password-1",
		"role": "viewer", "groups": []int64{}}, http.StatusCreated, nil)
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "ops", "password": "ops-password-1"},
		http.StatusOK, &login)

	names := func() map[string]int {
		var list api.HandlerList
		b.doJSON(http.MethodGet, "/api/v1/handlers", login.Token, nil, http.StatusOK, &list)
		out := map[string]int{}
		for _, h := range list.Items {
			out[h.Name] = h.Nodes
		}
		return out
	}
	require.Empty(t, names(), "a user in no group sees no node's handlers")

	var users api.List[api.User]
	b.doJSON(http.MethodGet, "/api/v1/users", b.token, nil, http.StatusOK, &users)
	var id int64
	for _, u := range users.Items {
		if u.Username == "ops" {
			id = u.ID
		}
	}
	b.doJSON(http.MethodPut, "/api/v1/users/"+strconv.FormatInt(id, 10)+"/groups", b.token,
		map[string]any{"groups": []int64{batch.ID}}, http.StatusOK, nil)
	require.Equal(t, map[string]int{"shell": 1, "secret-etl": 1}, names(), "batch's handlers, counted over batch's node")
}

func TestJobParamsAreValidatedAgainstTheHandlerSchema(t *testing.T) {
	t.Parallel()
	b := setup(t) // node n1 of group "default" offers shell

	// No schema published yet (e.g. an older node): only the handler check applies.
	job := validJob()
	job["params"] = map[string]any{"scipt": "typo"}
	job["name"] = "backup-1" // names are unique in a group
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusCreated, nil)

	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: "1.0.0", ParamsSchema: json.RawMessage(shellSchema), Node: "n1"})
	before := b.jobTotal()
	keysBefore := b.etcdCount()
	for params, want := range map[string]string{
		`{"scipt":"typo"}`:                        "missing property 'script'",
		`{"script":""}`:                           "/script: ",
		`{"script":"x","interpreter":"perl"}`:     "/interpreter: value must be one of",
		`{"script":"x","interpreter":"sh","x":1}`: "additional properties 'x' not allowed",
	} {
		job["params"] = json.RawMessage(params)
		e := b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusBadRequest)
		require.Contains(t, e.Fields["params"], "params do not match the shell handler's schema (version 1.0.0)", params)
		require.Contains(t, e.Fields["params"], want, params)
	}
	require.Equal(t, before, b.jobTotal(), "an invalid job is not saved")
	require.Equal(t, keysBefore, b.etcdCount(), "an invalid job signals nothing")

	job["params"] = json.RawMessage(`{"script":"echo ok","interpreter":"bash"}`)
	var created api.Job
	job["name"] = "backup-2" // names are unique in a group
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusCreated, &created)

	// Updates are checked too.
	job["params"] = json.RawMessage(`{}`)
	e := b.errorOf(http.MethodPut, "/api/v1/jobs/"+strconv.FormatInt(created.ID, 10), b.token, job, http.StatusBadRequest)
	require.Contains(t, e.Fields["params"], "missing property 'script'")

	// A schema published by a node of another group does not apply.
	putNode(t, b.etcd, b.keys, cluster.NodeInfo{UUID: "n9", Group: "batch", Status: "online",
		Plugins: []cluster.PluginInfo{{Name: "shell", Version: "9.0.0"}}, Started: time.Now()})
	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: "9.0.0", Node: "n9",
		ParamsSchema: json.RawMessage(`{"type":"object","required":["never"]}`)})
	job["params"] = json.RawMessage(`{"script":"echo"}`)
	job["name"] = "backup-3" // names are unique in a group
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusCreated, nil)

	// The existing handler check still comes first.
	job["handler"] = "nope"
	e = b.errorOf(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusBadRequest)
	require.Equal(t, `unknown handler "nope": no node has ever offered it (known: shell)`, e.Fields["handler"])
	require.NotContains(t, e.Fields, "params")

	// A node's broken schema does not block saving.
	_, err := b.etcd.Delete(b.ctx, b.keys.HandlerPrefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	putHandler(t, b, cluster.HandlerInfo{Name: "shell", Version: "1.0.0", Node: "n1", ParamsSchema: json.RawMessage(`{"type":"nonsense"}`)})
	job["handler"] = "shell"
	job["params"] = json.RawMessage(`{"anything":1}`)
	job["name"] = "backup-4" // names are unique in a group
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, job, http.StatusCreated, nil)
	require.Contains(t, b.logs.String(), "handler params schema does not compile")
}
