package catalog_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/catalog"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/handlers"
	"github.com/cronix/cronix/server/store"
)

type bundle struct {
	ctx   context.Context
	store *store.Store
	etcd  *clientv3.Client
	keys  cluster.Keys
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &bundle{ctx: ctx, store: st, etcd: etcdtest.Client(t), keys: cluster.NewKeys("/t" + t.Name())}
}

func (b *bundle) put(t *testing.T, key string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	_, err = b.etcd.Put(b.ctx, key, string(raw))
	require.NoError(t, err)
}

func TestHandlersMergesBuiltinsStoredAndLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	builtin := handlers.Handler{Name: "shell", Version: "1.0.0", ParamsSchema: json.RawMessage(`{"type":"object"}`)}
	c := catalog.New(catalog.Config{Store: b.store, KV: b.etcd, Keys: b.keys, Builtins: []handlers.Handler{builtin}})

	hs, err := c.Handlers(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"shell"}, catalog.Names(hs), "built-ins are known before any node")

	b.put(t, b.keys.Node("n1"), cluster.NodeInfo{UUID: "n1", Group: "g", Plugins: []cluster.PluginInfo{{Name: "shell", Version: "2.0.0"}, {Name: "legacy", Version: "0.1"}}})
	b.put(t, b.keys.Handler("shell", "n1"), cluster.HandlerInfo{Name: "shell", Version: "2.0.0", Node: "n1",
		ParamsSchema: json.RawMessage(`{"type":"object","required":["script"]}`)})
	hs, err = c.Handlers(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"legacy", "shell"}, catalog.Names(hs))
	require.Equal(t, "2.0.0", hs[1].Version, "the live description wins over the built-in")
	require.Equal(t, []string{"n1"}, hs[1].Nodes)

	// Persisted: a new catalog over the same SQL knows them with no node live.
	_, err = b.etcd.Delete(b.ctx, b.keys.Node(""), clientv3.WithPrefix())
	require.NoError(t, err)
	_, err = b.etcd.Delete(b.ctx, b.keys.HandlerPrefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	fresh := catalog.New(catalog.Config{Store: b.store, KV: b.etcd, Keys: b.keys, Builtins: []handlers.Handler{builtin}})
	hs, err = fresh.Handlers(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"legacy", "shell"}, catalog.Names(hs))
	require.Equal(t, "2.0.0", hs[1].Version, "the stored entry wins over the built-in")
	require.JSONEq(t, `{"type":"object","required":["script"]}`, string(hs[1].ParamsSchema))
	require.Empty(t, hs[1].Nodes)
}

// TestRunRegistersGroupsAndHandlers: a node registering with a group makes
// the group exist (address type auto) and its handlers enter the catalog,
// with no save or list call in between.
func TestRunRegistersGroupsAndHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := catalog.New(catalog.Config{Store: b.store, KV: b.etcd, Watcher: b.etcd, Keys: b.keys})
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	b.put(t, b.keys.Node("n1"), cluster.NodeInfo{UUID: "n1", Group: "billing", Plugins: []cluster.PluginInfo{{Name: "report", Version: "3"}}})
	require.Eventually(t, func() bool {
		g, err := b.store.GroupByName(b.ctx, "billing")
		if err != nil || g.AddressType != store.AddressAuto {
			return false
		}
		hs, err := b.store.HandlerCatalog(b.ctx)
		return err == nil && len(hs) == 1 && hs[0].Name == "report" && hs[0].Version == "3"
	}, 30*time.Second, 20*time.Millisecond)

	// A schema published later replaces the entry.
	b.put(t, b.keys.Handler("report", "n1"), cluster.HandlerInfo{Name: "report", Version: "3", Node: "n1",
		ParamsSchema: json.RawMessage(`{"type":"object"}`)})
	require.Eventually(t, func() bool {
		hs, err := b.store.HandlerCatalog(b.ctx)
		return err == nil && len(hs) == 1 && string(hs[0].ParamsSchema) == `{"type":"object"}`
	}, 30*time.Second, 20*time.Millisecond)
}
