package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/raftha"
	"github.com/cronix/cronix/server/store"
)

// fakeCluster is a ClusterInfo whose raft state the test sets.
type fakeCluster struct {
	mu      sync.Mutex
	st      raftha.Status
	added   []string
	removed []string
}

func (f *fakeCluster) Status() (raftha.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.Servers = append([]raftha.Server(nil), f.st.Servers...)
	return st, nil
}

func (f *fakeCluster) AddNonvoter(_ context.Context, id, address string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.State != "Leader" {
		return fmt.Errorf("add voter: %w", raftha.ErrNotLeader)
	}
	f.added = append(f.added, id+"="+address)
	f.st.Servers = append(f.st.Servers, raftha.Server{ID: id, Address: address, Suffrage: "Nonvoter"})
	return nil
}

func (f *fakeCluster) RemoveServer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st.State != "Leader" {
		return fmt.Errorf("remove: %w", raftha.ErrNotLeader)
	}
	for i, s := range f.st.Servers {
		if s.ID == id {
			f.removed = append(f.removed, id)
			f.st.Servers = append(f.st.Servers[:i], f.st.Servers[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("remove: %w", raftha.ErrUnknownServer)
}

func setupCluster(t *testing.T, fc api.ClusterInfo) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = auth.EnsureAdmin(ctx, st, adminPassword)
	require.NoError(t, err)
	cli := etcdtest.Client(t)
	b := &bundle{t: t, ctx: ctx, store: st, etcd: cli, keys: cluster.NewKeys(""), logs: &syncbuf.Buffer{}}
	b.srv = httptest.NewServer(api.New(api.Config{
		Store: st, Etcd: cli, Keys: b.keys, Location: time.UTC, NodeToken: nodeToken,
		Logger: slog.New(slog.NewTextHandler(b.logs, nil)), Cluster: fc,
	}))
	t.Cleanup(b.srv.Close)
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": adminPassword},
		http.StatusOK, &login)
	b.token = login.Token
	return b
}

func TestClusterStatus(t *testing.T) {
	t.Parallel()
	fc := &fakeCluster{st: raftha.Status{
		ID: "s2", Address: "127.0.0.1:7002", State: "Follower", Term: 7,
		LeaderID: "s1", LeaderAddress: "127.0.0.1:7001",
		Servers: []raftha.Server{
			{ID: "s1", Address: "127.0.0.1:7001", Suffrage: "Voter"},
			{ID: "s2", Address: "127.0.0.1:7002", Suffrage: "Voter"},
			{ID: "s3", Address: "127.0.0.1:7003", Suffrage: "Voter"},
		},
		LastContact: 1500 * time.Millisecond, CommitIndex: 42, AppliedIndex: 41, FSMPending: 1,
	}}
	b := setupCluster(t, fc)
	for _, s := range []cluster.ServerInfo{{ID: "s1", URL: "http://127.0.0.1:8081"}, {ID: "s2", URL: "http://127.0.0.1:8082"}} {
		v, err := json.Marshal(s)
		require.NoError(t, err)
		_, err = b.etcd.Put(b.ctx, cluster.ServerRegistration(s.URL[len("http://"):]), string(v))
		require.NoError(t, err)
	}
	_, err := b.etcd.Put(b.ctx, cluster.ServerRegistration("127.0.0.19:1"), "not json")
	require.NoError(t, err)

	// Logged-in only.
	status, _ := b.do(http.MethodGet, "/api/v1/cluster", "", nil)
	require.Equal(t, http.StatusUnauthorized, status)

	var got map[string]any
	b.doJSON(http.MethodGet, "/api/v1/cluster", b.token, nil, http.StatusOK, &got)
	want := map[string]any{
		"this": "s2", "term": 7.0, "state": "Follower",
		"leader": map[string]any{"id": "s1", "address": "127.0.0.1:7001"},
		"replicas": []any{
			map[string]any{"id": "s1", "address": "127.0.0.1:7001", "suffrage": "Voter", "url": "http://127.0.0.1:8081", "alive": true},
			map[string]any{"id": "s2", "address": "127.0.0.1:7002", "suffrage": "Voter", "url": "http://127.0.0.1:8082", "alive": true},
			map[string]any{"id": "s3", "address": "127.0.0.1:7003", "suffrage": "Voter", "url": "", "alive": false},
		},
		"raft": map[string]any{"last_contact_ms": 1500.0, "commit_index": 42.0, "applied_index": 41.0, "fsm_pending": 1.0},
	}
	require.Equal(t, want, got)

	// Membership changes need the leader.
	e := b.errorOf(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": "s4", "address": "127.0.0.1:7004"}, http.StatusConflict)
	require.Contains(t, e.Error, "not the raft leader")
	require.Contains(t, e.Error, "s1")

	fc.mu.Lock()
	fc.st.State, fc.st.LeaderID = "Leader", "s2"
	fc.mu.Unlock()
	e = b.errorOf(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": "", "address": "nope"}, http.StatusBadRequest)
	require.Equal(t, map[string]string{"id": "is required", "address": "must be host:port (the new replica's --raft-addr)"}, e.Fields)
	var after api.ClusterStatus
	b.doJSON(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": "s4", "address": "127.0.0.1:7004"}, http.StatusOK, &after)
	require.Len(t, after.Replicas, 4)
	require.Equal(t, api.ClusterReplica{ID: "s4", Address: "127.0.0.1:7004", Suffrage: "Nonvoter"}, after.Replicas[3])
	// One id or one address twice: refused with the reason, nothing changed.
	e = b.errorOf(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": "s4", "address": "127.0.0.1:7005"}, http.StatusConflict)
	require.Contains(t, e.Error, `server "s4" is already in the raft configuration`)
	e = b.errorOf(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": "s5", "address": "127.0.0.1:7004"}, http.StatusConflict)
	require.Contains(t, e.Error, `address 127.0.0.1:7004 already belongs to server "s4"`)

	b.doJSON(http.MethodDelete, "/api/v1/cluster/servers/s3", b.token, nil, http.StatusNoContent, nil)
	b.errorOf(http.MethodDelete, "/api/v1/cluster/servers/s3", b.token, nil, http.StatusNotFound)
	fc.mu.Lock()
	require.Equal(t, []string{"s4=127.0.0.1:7004"}, fc.added)
	require.Equal(t, []string{"s3"}, fc.removed)
	fc.mu.Unlock()

	// Both changes are audited: who, from where, which server and its
	// raft address. The refused requests (not leader, bad input, unknown
	// id) are not.
	entries, total, err := b.store.FindAudit(b.ctx, store.AuditFilter{ObjectType: "cluster_server"}, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 2, total)
	type change struct{ user, address, action, id, diff string }
	var got2 []change
	for _, e := range entries {
		got2 = append(got2, change{e.Username, e.Address, e.Action, e.ObjectID, string(e.Diff)})
	}
	require.ElementsMatch(t, []change{
		{"admin", "127.0.0.1", "create", "s4", `{"address":"127.0.0.1:7004","id":"s4"}`},
		{"admin", "127.0.0.1", "delete", "s3", `{"address":"127.0.0.1:7003","id":"s3"}`},
	}, got2)
}

func TestClusterWithoutRaft(t *testing.T) {
	t.Parallel()
	b := setupCluster(t, nil)
	b.errorOf(http.MethodGet, "/api/v1/cluster", b.token, nil, http.StatusServiceUnavailable)
}

// TestClusterAddServerValidation: POST /api/v1/cluster/servers takes only an
// id it can later remove (DELETE /cluster/servers/{id}) and an address
// other replicas can dial; anything else is a 400 on id or address that
// leaves the raft configuration and the audit log as they were. Every id a
// replica gives itself is accepted: "standalone", its --raft-addr by
// default (IPv4, IPv6, a host name).
func TestClusterAddServerValidation(t *testing.T) {
	t.Parallel()
	fc := &fakeCluster{st: raftha.Status{ID: "s1", Address: "127.0.0.1:7001", State: "Leader", LeaderID: "s1",
		Servers: []raftha.Server{{ID: "s1", Address: "127.0.0.1:7001", Suffrage: "Voter"}}}}
	b := setupCluster(t, fc)
	for _, tc := range []struct {
		body  string
		field string
		msg   string
	}{
		{`{"id":"s9","address":"bad host:notaport"}`, "address", `"bad host" is neither an IP address nor a host name`},
		{`{"id":"s9","address":"good-host:notaport"}`, "address", `the port must be a number from 1 to 65535, not "notaport"`},
		{`{"id":"s8","address":"127.0.0.1:99999"}`, "address", "from 1 to 65535"},
		{`{"id":"s8","address":"127.0.0.1:0"}`, "address", "from 1 to 65535"},
		{`{"id":"s8","address":"127.0.0.1:+80"}`, "address", "from 1 to 65535"},
		{`{"id":"s8","address":"0.0.0.0:7946"}`, "address", "no address other replicas can dial"},
		{`{"id":"s8","address":"-bad.example.com:7946"}`, "address", "neither an IP address nor a host name"},
		{`{"id":"s8","address":"a..b:7946"}`, "address", "neither an IP address nor a host name"},
		{`{"id":"s8","address":"::1:7946"}`, "address", "must be host:port"},
		{`{"id":"s8","address":"127.0.0.1"}`, "address", "must be host:port"},
		{`{"id":"` + strings.Repeat("x", 3000) + `","address":"127.0.0.9:7"}`, "id", "at most 260 characters"},
		{`{"id":"s/x","address":"127.0.0.3:7"}`, "id", "letters, digits"},
		{`{"id":"s x","address":"127.0.0.3:7"}`, "id", "letters, digits"},
		{`{"id":"s%2Fx","address":"127.0.0.3:7"}`, "id", "letters, digits"},
		{`{"id":"..","address":"127.0.0.3:7"}`, "id", "letters, digits"},
		{`{"id":"s\u0000","address":"127.0.0.1:1"}`, "id", "NUL"},
		{`{"id":"","address":"127.0.0.3:7"}`, "id", "is required"},
	} {
		e := b.errorOf(http.MethodPost, "/api/v1/cluster/servers", b.token, tc.body, http.StatusBadRequest)
		require.Contains(t, e.Fields, tc.field, tc.body)
		require.Contains(t, e.Fields[tc.field], tc.msg, tc.body)
	}
	fc.mu.Lock()
	require.Empty(t, fc.added, "a refused request changes no raft configuration")
	require.Len(t, fc.st.Servers, 1)
	fc.mu.Unlock()
	_, total, err := b.store.FindAudit(b.ctx, store.AuditFilter{ObjectType: "cluster_server"}, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Zero(t, total)
	require.NotContains(t, b.logs.String(), "audit entry not written")

	// Ids the replicas give themselves, and addresses of every kind; each
	// can be removed again through its URL.
	for i, id := range []string{"standalone", "127.0.0.1:7946", "[::1]:7946", "cronix-2.example.com:7946", "s_2.a-b"} {
		addr := []string{"127.0.0.2:7946", "[::1]:7946", "[fe80::1]:7946", "cronix-2.example.com:7946", "cronix_2:65535"}[i]
		b.doJSON(http.MethodPost, "/api/v1/cluster/servers", b.token, map[string]string{"id": id, "address": addr},
			http.StatusOK, nil)
		b.doJSON(http.MethodDelete, "/api/v1/cluster/servers/"+url.PathEscape(id), b.token, nil, http.StatusNoContent, nil)
	}
	fc.mu.Lock()
	require.Len(t, fc.added, 5)
	require.Len(t, fc.removed, 5)
	fc.mu.Unlock()
}
