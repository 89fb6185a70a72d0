// Package authzmatrix is the authorization matrix of the access model as a
// reusable check: every route of the router × every kind of caller
// (anonymous, viewer and operator of group A, admin, an API token of group
// A, the node token) × an object in group A and one in group B, each
// status checked against server/authz's table and the roles. The api
// package runs it in process; the integration suite runs it against a real
// "cronix standalone".
package authzmatrix

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/store"
)

// Principals of the matrix.
const (
	pAnon     = "anonymous"
	pViewer   = "viewer of A"
	pOperator = "operator of A"
	pAdmin    = "admin"
	pToken    = "API token of A"
	pNode     = "node token"
)

var matrixPrincipals = []string{pAnon, pViewer, pOperator, pAdmin, pToken, pNode}

// outcome is what a request should get.
type outcome string

const (
	ok        outcome = "2xx"
	unauth    outcome = "401"
	forbidden outcome = "403"
	notFound  outcome = "404"
)

// matrix is the running server and the objects the matrix acts on.
type matrix struct {
	t      *testing.T
	ctx    context.Context
	st     *store.Store
	etcd   *clientv3.Client
	keys   cluster.Keys
	tg     Target
	fc     Membership
	nodes  map[string]string       // "A", "B" → node uuid
	groups map[string]*store.Group // "A", "B"
	jobs   map[string]*store.Job
	runs   map[string]*store.Run
	seq    atomic.Int64
	// creds are the bearer secrets of the principals.
	creds map[string]string
}

// sessionOf logs a user in and returns its session token.
func (m *matrix) sessionOf(username, password string) string {
	var login api.LoginResponse
	m.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": username, "password": password}, &login)
	return login.Token
}

func (m *matrix) doJSON(method, path, token string, body, out any) {
	m.t.Helper()
	status, raw := m.send(method, path, token, body)
	require.True(m.t, status/100 == 2, "%s %s: %d %s", method, path, status, raw)
	if out != nil {
		require.NoError(m.t, json.Unmarshal(raw, out))
	}
}

func (m *matrix) send(method, path, token string, body any) (int, []byte) {
	m.t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch v := body.(type) {
	case nil:
	case url.Values:
		rd, ct = strings.NewReader(v.Encode()), "application/x-www-form-urlencoded"
	default:
		b, err := json.Marshal(v)
		require.NoError(m.t, err)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(m.ctx, method, m.tg.Base+path, rd)
	require.NoError(m.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := m.tg.Client.Do(req)
	require.NoError(m.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(m.t, err)
	return resp.StatusCode, raw
}

func (m *matrix) next() int64 { return m.seq.Add(1) }

// newJob stores a job of side ("A" or "B").
func (m *matrix) newJob(side string) *store.Job {
	j := &store.Job{Name: fmt.Sprintf("job-%s-%d", side, m.next()), Group: m.groups[side].AppName, ScheduleType: "none",
		Handler: "shell", Params: json.RawMessage(`{"script":"true"}`), RouteStrategy: cluster.RouteFirst,
		BlockStrategy: cluster.BlockSerial, MisfirePolicy: cluster.MisfireFireOnceNow}
	require.NoError(m.t, m.st.CreateJob(m.ctx, j))
	return j
}

// newRun stores a running run of a job of side on its group's node.
func (m *matrix) newRun(side string) *store.Run {
	j := m.jobs[side]
	fire := cluster.FireID(j.ID, time.Now().Add(time.Duration(m.next())*time.Second))
	_, err := m.st.InsertRuns(m.ctx, []store.Run{{FireID: fire, JobID: j.ID, Status: cluster.StatusRunning,
		Node: m.nodes[side], ScheduledAt: time.Now()}})
	require.NoError(m.t, err)
	r, err := m.st.RunByFireID(m.ctx, fire)
	require.NoError(m.t, err)
	return r
}

// matrixPassword is every matrix user's password; its hash is computed once
// at bcrypt's lowest cost, so that the hundred users the matrix creates do
// not cost a hundred default-cost hashes (slow under -race).
const matrixPassword = "matrix-password"

var matrixHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(matrixPassword), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
})

// newUser stores a user and returns it with its password.
func (m *matrix) newUser(role string, groups []int64) (*store.User, string) {
	pw := matrixPassword
	u := &store.User{Username: fmt.Sprintf("%su%d", m.tg.Prefix, m.next()), PasswordHash: matrixHash(), Role: role, Groups: groups}
	require.NoError(m.t, m.st.CreateUser(m.ctx, u))
	return u, pw
}

// freshPrincipal is a principal like p whose credentials a request may
// spend (logout, password change).
func (m *matrix) freshPrincipal(p string) (token, password string) {
	a := []int64{m.groups["A"].ID}
	switch p {
	case pViewer:
		u, pw := m.newUser(store.RoleViewer, a)
		return m.sessionOf(u.Username, pw), pw
	case pOperator:
		u, pw := m.newUser(store.RoleOperator, a)
		return m.sessionOf(u.Username, pw), pw
	case pAdmin:
		u, pw := m.newUser(store.RoleAdmin, nil)
		return m.sessionOf(u.Username, pw), pw
	case pToken:
		u, pw := m.newUser(store.RoleOperator, a)
		secret, hash := auth.NewAPIToken()
		require.NoError(m.t, m.st.CreateAccessToken(m.ctx, &store.AccessToken{TokenHash: hash, UserID: u.ID, Name: "t",
			Role: store.RoleOperator, Groups: a}))
		return secret, pw
	}
	return m.creds[p], ""
}

// userOf is the user id behind a principal's credentials.
func (m *matrix) userOf(token string) int64 {
	var me api.MeResponse
	m.doJSON(http.MethodGet, "/api/v1/auth/me", token, nil, &me)
	return me.ID
}

// request is one call of the matrix.
type request struct {
	path string
	body any
	// sided: side B is an object outside the caller's groups (404), or a
	// group the caller may not create in (createIn: 403).
	sided    bool
	createIn bool
	// spends: the call uses up its principal's credentials.
	spends bool
	// compat: the xxl-job envelope; not found is HTTP 200 with code 500.
	compat bool
}

// build returns the request for route key, principal p and side.
func (m *matrix) build(key, p, side string) (request, string) {
	cred := m.creds[p]
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	g, j, r := m.groups[side], m.jobs[side], m.runs[side]
	jobBody := map[string]any{"name": fmt.Sprintf("m%d", m.next()), "group": g.AppName, "schedule_type": "none",
		"handler": "shell", "params": map[string]string{"script": "true"}}
	xxlJob := func(jobID int64) url.Values {
		v := url.Values{"jobGroup": {id(g.ID)}, "jobDesc": {fmt.Sprintf("x%d", m.next())}, "scheduleType": {"NONE"},
			"glueType": {"GLUE_SHELL"}, "glueSource": {"true"}, "executorRouteStrategy": {"FIRST"},
			"executorBlockStrategy": {"SERIAL_EXECUTION"}, "author": {"m"}}
		if jobID != 0 {
			v.Set("id", id(jobID))
		}
		return v
	}
	switch key {
	case "GET /healthz", "HEAD /healthz":
		return request{path: "/healthz"}, cred
	case "GET /readyz", "HEAD /readyz":
		return request{path: "/readyz"}, cred
	case "GET /metrics":
		return request{path: "/metrics"}, cred
	case "GET /api/v1/openapi.json":
		return request{path: "/api/v1/openapi.json"}, cred
	case "POST /api/v1/auth/login":
		return request{path: "/api/v1/auth/login", body: map[string]string{"username": "admin", "password": m.tg.AdminPassword}}, cred
	case "POST /api/v1/auth/logout":
		tok, _ := m.freshPrincipal(p)
		return request{path: "/api/v1/auth/logout", spends: true}, tok
	case "GET /api/v1/auth/me":
		return request{path: "/api/v1/auth/me"}, cred
	case "POST /api/v1/auth/password":
		tok, pw := m.freshPrincipal(p)
		return request{path: "/api/v1/auth/password", spends: true,
			body: map[string]string{"old_password": pw, "new_password": fmt.Sprintf("new-password-%d", m.next())}}, tok
	case "GET /api/v1/jobs", "GET /api/v1/runs", "GET /api/v1/groups", "GET /api/v1/nodes", "GET /api/v1/handlers",
		"GET /api/v1/cluster", "GET /api/v1/users", "GET /api/v1/tokens", "GET /api/v1/audit", "GET /api/v1/security/events",
		"GET /api/v1/reports/daily", "GET /api/v1/stats/summary":
		return request{path: strings.TrimPrefix(key, "GET ")}, cred
	case "GET /api/v1/schedules/preview":
		return request{path: "/api/v1/schedules/preview?schedule=" + url.QueryEscape("@every 1m")}, cred
	case "POST /api/v1/jobs":
		return request{path: "/api/v1/jobs", body: jobBody, sided: true, createIn: true}, cred
	case "POST /api/v1/jobs/batch":
		second := map[string]any{}
		for k, v := range jobBody {
			second[k] = v
		}
		second["name"] = fmt.Sprintf("m%d", m.next())
		return request{path: "/api/v1/jobs/batch", body: map[string]any{"jobs": []any{jobBody, second}}, sided: true, createIn: true}, cred
	case "GET /api/v1/jobs/{id}", "GET /api/v1/jobs/{id}/runs", "GET /api/v1/jobs/{id}/versions":
		return request{path: strings.Replace(strings.TrimPrefix(key, "GET "), "{id}", id(j.ID), 1), sided: true}, cred
	case "PUT /api/v1/jobs/{id}":
		return request{path: "/api/v1/jobs/" + id(j.ID), body: jobBody, sided: true}, cred
	case "DELETE /api/v1/jobs/{id}":
		return request{path: "/api/v1/jobs/" + id(m.newJob(side).ID), sided: true}, cred
	case "POST /api/v1/jobs/{id}/trigger":
		return request{path: "/api/v1/jobs/" + id(j.ID) + "/trigger", sided: true}, cred
	case "GET /api/v1/runs/{id}", "GET /api/v1/runs/{id}/output":
		return request{path: strings.Replace(strings.TrimPrefix(key, "GET "), "{id}", id(r.ID), 1), sided: true}, cred
	case "POST /api/v1/runs/{id}/kill":
		return request{path: "/api/v1/runs/" + id(m.newRun(side).ID) + "/kill", sided: true}, cred
	case "POST /api/v1/groups":
		return request{path: "/api/v1/groups", body: map[string]string{"appname": fmt.Sprintf("%sg%d", m.tg.Prefix, m.next())}}, cred
	case "GET /api/v1/groups/{id}":
		return request{path: "/api/v1/groups/" + id(g.ID), sided: true}, cred
	case "PUT /api/v1/groups/{id}":
		return request{path: "/api/v1/groups/" + id(g.ID), body: map[string]string{"appname": g.AppName, "title": "t"}, sided: true}, cred
	case "DELETE /api/v1/groups/{id}":
		fresh := &store.Group{AppName: fmt.Sprintf("%sgone%d", m.tg.Prefix, m.next())}
		require.NoError(m.t, m.st.CreateGroup(m.ctx, fresh))
		return request{path: "/api/v1/groups/" + id(fresh.ID), sided: true}, cred
	case "GET /api/v1/nodes/{uuid}":
		return request{path: "/api/v1/nodes/" + m.nodes[side]}, cred
	case "GET /api/v1/nodes/{uuid}/system":
		return request{path: "/api/v1/nodes/" + m.nodes[side] + "/system"}, cred
	case "POST /api/v1/cluster/servers":
		n := m.next()
		return request{path: "/api/v1/cluster/servers", body: map[string]string{"id": fmt.Sprintf("%ss%d", m.tg.Prefix, n),
			"address": m.deadAddress(n)}}, cred
	case "DELETE /api/v1/cluster/servers/{id}":
		n := m.next()
		sid := fmt.Sprintf("%ss%d", m.tg.Prefix, n)
		require.NoError(m.t, m.fc.AddNonvoter(m.ctx, sid, m.deadAddress(n)))
		return request{path: "/api/v1/cluster/servers/" + sid}, cred
	case "POST /api/v1/users":
		return request{path: "/api/v1/users", body: map[string]any{"username": fmt.Sprintf("%snew%d", m.tg.Prefix, m.next()),
			"password": "long-enough-password", "role": "viewer", "groups": []int64{g.ID}}}, cred
	case "GET /api/v1/users/{id}", "GET /api/v1/users/{id}/groups":
		u, _ := m.newUser(store.RoleViewer, nil)
		return request{path: strings.Replace(strings.TrimPrefix(key, "GET "), "{id}", id(u.ID), 1)}, cred
	case "PATCH /api/v1/users/{id}":
		u, _ := m.newUser(store.RoleViewer, nil)
		return request{path: "/api/v1/users/" + id(u.ID), body: map[string]any{"role": "operator", "groups": []int64{g.ID}}}, cred
	case "DELETE /api/v1/users/{id}":
		u, _ := m.newUser(store.RoleViewer, nil)
		return request{path: "/api/v1/users/" + id(u.ID)}, cred
	case "POST /api/v1/users/{id}/password":
		u, _ := m.newUser(store.RoleViewer, nil)
		return request{path: "/api/v1/users/" + id(u.ID) + "/password", body: map[string]string{"password": "another-long-password"}}, cred
	case "PUT /api/v1/users/{id}/groups":
		u, _ := m.newUser(store.RoleViewer, nil)
		return request{path: "/api/v1/users/" + id(u.ID) + "/groups", body: map[string]any{"groups": []int64{g.ID}}}, cred
	case "POST /api/v1/tokens":
		return request{path: "/api/v1/tokens", body: map[string]any{"name": "t", "role": "viewer", "groups": []int64{}}}, cred
	case "DELETE /api/v1/tokens/{id}":
		// Side A: one of the caller's own tokens; side B: someone else's.
		owner := int64(0)
		if side == "A" && cred != "" && p != pNode {
			owner = m.userOf(cred)
		} else {
			u, _ := m.newUser(store.RoleViewer, nil)
			owner = u.ID
		}
		_, hash := auth.NewAPIToken()
		tok := &store.AccessToken{TokenHash: hash, UserID: owner, Name: "victim", Role: store.RoleViewer}
		require.NoError(m.t, m.st.CreateAccessToken(m.ctx, tok))
		return request{path: "/api/v1/tokens/" + id(tok.ID), sided: true}, cred
	case "GET /api/v1/alerts", "GET /api/v1/settings/alerting":
		return request{path: strings.TrimPrefix(key, "GET ")}, cred
	case "POST /api/v1/alerts/test":
		return request{path: "/api/v1/alerts/test", body: map[string]any{"webhook": m.tg.Webhook}}, cred
	case "PUT /api/v1/settings/alerting":
		return request{path: "/api/v1/settings/alerting", body: map[string]any{}}, cred
	case "POST /api/v1/internal/results":
		return request{path: "/api/v1/internal/results", body: map[string]any{"results": []any{}}}, cred
	case "POST /api/v1/internal/security-events":
		return request{path: "/api/v1/internal/security-events", body: map[string]any{"node": "node-a", "events": []any{}}}, cred
	case "GET /jobgroup/list", "POST /jobgroup/list", "GET /jobinfo/list", "POST /jobinfo/list":
		_, path, _ := strings.Cut(key, " ")
		return request{path: path, compat: true}, cred
	case "POST /jobinfo/add":
		return request{path: "/jobinfo/add", body: xxlJob(0), compat: true, sided: true, createIn: true}, cred
	case "POST /jobinfo/update":
		return request{path: "/jobinfo/update", body: xxlJob(j.ID), compat: true, sided: true}, cred
	case "POST /jobinfo/start", "POST /jobinfo/stop", "POST /jobinfo/trigger":
		_, path, _ := strings.Cut(key, " ")
		return request{path: path, body: url.Values{"id": {id(j.ID)}}, compat: true, sided: true}, cred
	case "POST /jobinfo/remove":
		return request{path: "/jobinfo/remove", body: url.Values{"id": {id(m.newJob(side).ID)}}, compat: true, sided: true}, cred
	}
	m.t.Fatalf("the matrix has no request for route %s: add one to build", key)
	return request{}, ""
}

// deadAddress is a raft address no server listens on, distinct per matrix
// and n (raft refuses one address twice in its configuration).
func (m *matrix) deadAddress(n int64) string {
	return fmt.Sprintf("127.%d.%d.%d:7999", crc32.ChecksumIEEE([]byte(m.tg.Prefix))%250, n/250%250, 2+n%250)
}

// sessionOnly are routes a login session may call and an API token may
// not (403), whatever its role: changing its owner's password, creating
// tokens.
var sessionOnly = map[string]bool{"POST /api/v1/auth/password": true, "POST /api/v1/tokens": true}

// adminOnly are routes the issue reserves to admins, listed here by hand
// so that a mistake in authz.Routes cannot hide behind expected().
var adminOnly = map[string]bool{
	"POST /api/v1/cluster/servers": true, "DELETE /api/v1/cluster/servers/{id}": true,
	"GET /api/v1/users": true, "POST /api/v1/users": true, "GET /api/v1/users/{id}": true,
	"PATCH /api/v1/users/{id}": true, "DELETE /api/v1/users/{id}": true, "POST /api/v1/users/{id}/password": true,
	"GET /api/v1/users/{id}/groups": true, "PUT /api/v1/users/{id}/groups": true,
	"POST /api/v1/groups": true, "PUT /api/v1/groups/{id}": true, "DELETE /api/v1/groups/{id}": true,
	"GET /api/v1/audit": true, "POST /api/v1/alerts/test": true, "GET /api/v1/settings/alerting": true,
	"PUT /api/v1/settings/alerting": true, "GET /api/v1/security/events": true,
}

// expected derives what principal p should get from the route's rule: the
// table says which action the route needs, the roles say who has it.
func expected(rule authz.Rule, req request, p, side string) outcome {
	switch rule.Action {
	case authz.Public:
		return ok
	case authz.Node:
		if p == pNode {
			return ok
		}
		return unauth
	}
	if p == pAnon || p == pNode {
		return unauth
	}
	role := map[string]string{pViewer: store.RoleViewer, pOperator: store.RoleOperator, pAdmin: store.RoleAdmin,
		pToken: store.RoleOperator}[p]
	if !authz.Allows(role, rule.Action) {
		return forbidden
	}
	if side == "B" && req.sided && role != store.RoleAdmin {
		if req.createIn {
			return forbidden
		}
		return notFound
	}
	return ok
}

// Membership is the raft membership the matrix needs: a server to remove
// (added as a non-voter, which costs no quorum) and the count of servers.
type Membership interface {
	AddNonvoter(ctx context.Context, id, address string) error
	Servers(ctx context.Context) (int, error)
}

// Target is the server the matrix runs against and direct access to its
// stores, where the matrix puts its fixtures.
type Target struct {
	// Base is the server's URL (http://host:port); Client calls it.
	Base   string
	Client *http.Client
	Store  *store.Store
	Etcd   *clientv3.Client
	Keys   cluster.Keys
	// Cluster adds a removable server and counts servers.
	Cluster       Membership
	AdminPassword string
	NodeToken     string
	// Webhook names a configured alert webhook (POST /api/v1/alerts/test).
	Webhook string
	// Prefix makes the matrix's group and node names unique, so that two
	// matrices can share one server.
	Prefix string
}

// newMatrix puts groups A and B on tg's server, a fake node (an etcd node
// record no agent holds) and a job and a running run in each, and the
// principals' credentials.
func newMatrix(t *testing.T, tg Target) *matrix {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	m := &matrix{t: t, ctx: ctx, tg: tg, st: tg.Store, etcd: tg.Etcd, keys: tg.Keys, fc: tg.Cluster,
		groups: map[string]*store.Group{}, nodes: map[string]string{}, jobs: map[string]*store.Job{},
		runs: map[string]*store.Run{}, creds: map[string]string{}}
	for _, side := range []string{"A", "B"} {
		g := &store.Group{AppName: tg.Prefix + "group-" + strings.ToLower(side)}
		require.NoError(t, tg.Store.CreateGroup(ctx, g))
		m.groups[side] = g
		m.nodes[side] = tg.Prefix + "node-" + side
		info, err := json.Marshal(cluster.NodeInfo{UUID: m.nodes[side], Group: g.AppName, IP: "127.0.0.1", Port: 1,
			Status: "online", Plugins: []cluster.PluginInfo{{Name: "shell", Version: "1.0.0"}}})
		require.NoError(t, err)
		_, err = tg.Etcd.Put(ctx, tg.Keys.Node(m.nodes[side]), string(info))
		require.NoError(t, err)
	}
	answerSystemInfo(t, ctx, tg.Etcd, tg.Keys, m.nodes)

	for _, side := range []string{"A", "B"} {
		m.jobs[side] = m.newJob(side)
		m.runs[side] = m.newRun(side)
	}
	a := []int64{m.groups["A"].ID}
	viewer, vpw := m.newUser(store.RoleViewer, a)
	operator, opw := m.newUser(store.RoleOperator, a)
	m.creds[pViewer] = m.sessionOf(viewer.Username, vpw)
	m.creds[pOperator] = m.sessionOf(operator.Username, opw)
	m.creds[pAdmin] = m.sessionOf("admin", tg.AdminPassword)
	m.creds[pNode] = tg.NodeToken
	var tok api.TokenCreated
	m.doJSON(http.MethodPost, "/api/v1/tokens", m.creds[pOperator],
		map[string]any{"name": "ops-portal", "role": "operator", "groups": a}, &tok)
	m.creds[pToken] = tok.Secret
	return m
}

// Check calls every route of the router × every kind of caller × an
// object in the caller's group A and one in group B, against the server of
// tg, and checks each status against what authz.Routes and the roles say.
func Check(t *testing.T, tg Target) {
	m := newMatrix(t, tg)
	routes, err := api.Routes()
	require.NoError(t, err)
	cases := 0
	for _, key := range routes {
		method, _, _ := strings.Cut(key, " ")
		if method == "*" {
			continue // catch-alls answer 404/405 in xxl-job's envelope
		}
		rule, found := authz.Lookup(method, strings.TrimPrefix(key, method+" "))
		require.True(t, found, key)
		for _, p := range matrixPrincipals {
			for _, side := range []string{"A", "B"} {
				req, cred := m.build(key, p, side)
				want := expected(rule, req, p, side)
				if sessionOnly[key] && p == pToken && want == ok {
					want = forbidden
				}
				status, raw := m.send(method, req.path, cred, req.body)
				cases++
				name := fmt.Sprintf("%s as %s on %s", key, p, side)
				switch {
				case req.compat && want == notFound:
					require.Equal(t, http.StatusOK, status, "%s: %s", name, raw)
					require.Contains(t, string(raw), `"code":500`, name)
					require.Contains(t, string(raw), "not found", name)
				case req.compat && want == ok:
					require.Equal(t, http.StatusOK, status, "%s: %s", name, raw)
					require.NotContains(t, string(raw), `"code":500`, "%s: %s", name, raw)
				case want == ok:
					require.True(t, status >= 200 && status < 300, "%s: want 2xx, got %d %s", name, status, raw)
				default:
					require.Equal(t, string(want), strconv.Itoa(status), "%s: %s", name, raw)
				}
				// Independently of the table: what the roles promise.
				if p == pViewer && method != http.MethodGet && method != http.MethodHead &&
					rule.Action != authz.Self && rule.Action != authz.Public && rule.Action != authz.Node &&
					!strings.HasSuffix(key, "/list") { // xxl-job lists accept POST
					require.Equal(t, http.StatusForbidden, status, "a viewer may change nothing: %s", name)
				}
				if adminOnly[key] && (p == pOperator || p == pToken) {
					require.Equal(t, http.StatusForbidden, status, "admin only: %s", name)
				}
			}
		}
	}
	t.Logf("%d routes × %d principals × 2 objects: %d requests", len(routes), len(matrixPrincipals), cases)
}

// ViewerChangesNothing sends every unsafe route as a viewer and checks
// that every row count (SQL tables, etcd keys, raft servers) stays as it was.
func ViewerChangesNothing(t *testing.T, tg Target) {
	m := newMatrix(t, tg)
	routes, err := api.Routes()
	require.NoError(t, err)
	// Build every request first (building creates fixtures), then count.
	type call struct {
		method, path, key string
		body              any
	}
	var calls []call
	for _, key := range routes {
		method, path, _ := strings.Cut(key, " ")
		rule, _ := authz.Lookup(method, path)
		if method == "*" || method == http.MethodGet || method == http.MethodHead || rule.Action == authz.Self ||
			rule.Action == authz.Public || rule.Action == authz.Node || strings.HasSuffix(key, "/list") {
			continue
		}
		for _, side := range []string{"A", "B"} {
			req, _ := m.build(key, pViewer, side)
			calls = append(calls, call{method, req.path, key, req.body})
		}
	}
	before := m.rowCounts()
	for _, c := range calls {
		status, raw := m.send(c.method, c.path, m.creds[pViewer], c.body)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", c.key, raw)
	}
	require.Equal(t, before, m.rowCounts())
	require.NotEmpty(t, calls)
}

// rowCounts counts the rows of every table the API writes.
func (m *matrix) rowCounts() map[string]int {
	out := map[string]int{}
	jobs, n, err := m.st.FindJobs(m.ctx, store.JobFilter{}, store.Page{})
	require.NoError(m.t, err)
	out["jobs"] = n
	enabled := 0
	for _, j := range jobs {
		if j.Enabled {
			enabled++
		}
	}
	out["enabled jobs"] = enabled
	_, out["runs"], err = m.st.FindRuns(m.ctx, store.RunFilter{}, store.Page{})
	require.NoError(m.t, err)
	_, out["groups"], err = m.st.FindGroups(m.ctx, store.GroupFilter{}, store.Page{})
	require.NoError(m.t, err)
	_, out["users"], err = m.st.ListUsers(m.ctx, store.Page{})
	require.NoError(m.t, err)
	_, out["tokens"], err = m.st.ListAccessTokens(m.ctx, 0, store.Page{})
	require.NoError(m.t, err)
	_, out["audit"], err = m.st.FindAudit(m.ctx, store.AuditFilter{}, store.Page{})
	require.NoError(m.t, err)
	out["raft servers"], err = m.fc.Servers(m.ctx)
	require.NoError(m.t, err)
	resp, err := m.etcd.Get(m.ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(m.t, err)
	out["etcd keys"] = int(resp.Count)
	return out
}

// answerSystemInfo plays the node agent of the fake nodes for GET
// /nodes/{uuid}/system: it answers their system-info requests with a
// SystemInfo, until ctx ends.
func answerSystemInfo(t *testing.T, ctx context.Context, cli *clientv3.Client, keys cluster.Keys, nodes map[string]string) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	prefix := strings.TrimSuffix(keys.SystemSwitch("x"), "x")
	wch := cli.Watch(wctx, prefix, clientv3.WithPrefix())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for wresp := range wch {
			for _, ev := range wresp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				uuid := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				if uuid != nodes["A"] && uuid != nodes["B"] {
					continue // a real agent answers for itself
				}
				b, _ := json.Marshal(cluster.SystemInfo{})
				_, _ = cli.Put(wctx, keys.SystemGet(uuid), string(b))
			}
		}
	}()
}

// ListsAreFiltered (access issue, acceptance 2): a viewer, an operator and
// an API token of group A see the jobs, runs and groups of group A in every
// list (native and xxl-job's), never those of group B; an admin sees both.
func ListsAreFiltered(t *testing.T, tg Target) {
	m := newMatrix(t, tg)
	type ids struct{ jobs, runs, groups map[int64]bool }
	listed := func(cred string) ids {
		got := ids{jobs: map[int64]bool{}, runs: map[int64]bool{}, groups: map[int64]bool{}}
		var jobs api.List[api.Job]
		m.doJSON(http.MethodGet, "/api/v1/jobs?page_size=500", cred, nil, &jobs)
		for _, j := range jobs.Items {
			got.jobs[j.ID] = true
		}
		var runs api.List[api.Run]
		m.doJSON(http.MethodGet, "/api/v1/runs?page_size=500", cred, nil, &runs)
		for _, r := range runs.Items {
			got.runs[r.ID] = true
		}
		var groups api.List[api.Group]
		m.doJSON(http.MethodGet, "/api/v1/groups?page_size=500", cred, nil, &groups)
		for _, g := range groups.Items {
			got.groups[g.ID] = true
		}
		// xxl-job's list: every group, then group B by id.
		var all struct {
			Data []struct {
				ID int64 `json:"id"`
			} `json:"data"`
		}
		m.doJSON(http.MethodPost, "/jobinfo/list", cred, url.Values{"jobGroup": {"0"}, "length": {"500"}}, &all)
		compat := map[int64]bool{}
		for _, j := range all.Data {
			compat[j.ID] = true
		}
		require.Equal(m.t, got.jobs[m.jobs["A"].ID], compat[m.jobs["A"].ID], "/jobinfo/list agrees with /api/v1/jobs on job A")
		require.Equal(m.t, got.jobs[m.jobs["B"].ID], compat[m.jobs["B"].ID], "/jobinfo/list agrees with /api/v1/jobs on job B")
		var inB struct {
			Data []json.RawMessage `json:"data"`
		}
		m.doJSON(http.MethodPost, "/jobinfo/list", cred,
			url.Values{"jobGroup": {strconv.FormatInt(m.groups["B"].ID, 10)}, "length": {"500"}}, &inB)
		if !got.groups[m.groups["B"].ID] {
			require.Empty(m.t, inB.Data, "/jobinfo/list?jobGroup=B shows nothing to a caller outside B")
		}
		return got
	}
	for _, p := range []string{pViewer, pOperator, pToken} {
		got := listed(m.creds[p])
		require.True(t, got.jobs[m.jobs["A"].ID], "%s sees job A", p)
		require.False(t, got.jobs[m.jobs["B"].ID], "%s does not see job B", p)
		require.True(t, got.runs[m.runs["A"].ID], "%s sees run A", p)
		require.False(t, got.runs[m.runs["B"].ID], "%s does not see run B", p)
		require.True(t, got.groups[m.groups["A"].ID], "%s sees group A", p)
		require.False(t, got.groups[m.groups["B"].ID], "%s does not see group B", p)
	}
	got := listed(m.creds[pAdmin])
	require.True(t, got.jobs[m.jobs["A"].ID] && got.jobs[m.jobs["B"].ID], "admin sees both jobs")
	require.True(t, got.runs[m.runs["A"].ID] && got.runs[m.runs["B"].ID], "admin sees both runs")
	require.True(t, got.groups[m.groups["A"].ID] && got.groups[m.groups["B"].ID], "admin sees both groups")
}
