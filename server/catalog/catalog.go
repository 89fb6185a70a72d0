// Package catalog keeps SQL in step with what nodes publish in etcd. Every
// handler a node offers enters the handler catalog (store.CatalogHandler),
// which also holds the built-in handlers, so a job can be validated against
// its handler's params schema and saved while no node offering the handler
// is live. Every group a node registers with exists as an auto group
// (xxl-job's executor auto-registration), so a fresh install lists group
// "default" with its node without any call.
//
// Handlers answers from the catalog merged with the live descriptions and
// persists live ones that changed; Run does the same in the background on
// every change under the node and handler prefixes, so what a node
// published is kept even when nobody saved a job meanwhile. Nothing is ever
// removed from the catalog: a handler once seen stays known.
package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/handlers"
	"github.com/cronix/cronix/server/store"
)

// Store is the SQL the catalog reads and writes (store.Store).
type Store interface {
	HandlerCatalog(ctx context.Context) ([]store.CatalogHandler, error)
	UpsertHandlerCatalog(ctx context.Context, hs []store.CatalogHandler) error
	EnsureGroup(ctx context.Context, appName, title string) (*store.Group, error)
}

// Config configures a Catalog.
type Config struct {
	// Store persists the catalog and the groups.
	Store Store
	// KV reads node registrations and handler descriptions.
	KV clientv3.KV
	// Watcher lets Run follow changes; only Run needs it.
	Watcher clientv3.Watcher
	// Keys locates the etcd keys.
	Keys cluster.Keys
	// Builtins are the handlers built into the release (cmd, shell, http),
	// known before any node publishes them.
	Builtins []handlers.Handler
	// Logger logs sync problems; nil discards.
	Logger *slog.Logger
}

// Catalog is the handler catalog and group auto-registration.
type Catalog struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	written map[string]store.CatalogHandler // what this process knows SQL holds, by name
	groups  map[string]bool                 // groups this process has ensured
}

// New returns a Catalog over cfg.
func New(cfg Config) *Catalog {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Catalog{cfg: cfg, log: log.With(slog.String("component", "catalog")), groups: map[string]bool{}}
}

// Handlers returns every known handler sorted by name: the live
// descriptions (newest version, with the nodes offering it), then for names
// no live node offers the persisted entry, then the built-in one (both with
// no nodes). Live descriptions that SQL does not hold yet are persisted
// first.
func (c *Catalog) Handlers(ctx context.Context) ([]handlers.Handler, error) {
	descs, err := handlers.Descriptions(ctx, c.cfg.KV, c.cfg.Keys, c.log)
	if err != nil {
		return nil, err
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return nil, err
	}
	// A node lists its handlers in its registration too; one that published
	// no description (an older node) still makes its handlers known.
	described := map[string]bool{}
	for _, d := range descs {
		described[d.Name+"\x00"+d.Node] = true
	}
	for _, n := range nodes {
		for _, p := range n.Plugins {
			if p.Name != "" && !described[p.Name+"\x00"+n.UUID] {
				descs = append(descs, cluster.HandlerInfo{Name: p.Name, Version: p.Version, Node: n.UUID})
			}
		}
	}
	live := handlers.Merge(descs)
	stored, err := c.persist(ctx, live)
	if err != nil {
		return nil, err
	}
	byName := map[string]handlers.Handler{}
	for _, h := range c.cfg.Builtins {
		byName[h.Name] = handlers.Handler{Name: h.Name, Version: h.Version, Description: h.Description, ParamsSchema: h.ParamsSchema}
	}
	for _, h := range stored {
		byName[h.Name] = handlers.Handler{Name: h.Name, Version: h.Version, Description: h.Description, ParamsSchema: h.ParamsSchema}
	}
	for _, h := range live {
		byName[h.Name] = h
	}
	out := make([]handlers.Handler, 0, len(byName))
	for _, h := range byName {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b handlers.Handler) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Builtin reports whether name is a handler built into the release.
func (c *Catalog) Builtin(name string) bool {
	for _, h := range c.cfg.Builtins {
		if h.Name == name {
			return true
		}
	}
	return false
}

// Names lists the names of hs, for messages.
func Names(hs []handlers.Handler) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

// persist writes the live handlers whose stored entry differs and returns
// the catalog as stored.
func (c *Catalog) persist(ctx context.Context, live []handlers.Handler) ([]store.CatalogHandler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil || c.changed(live) {
		stored, err := c.cfg.Store.HandlerCatalog(ctx)
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		c.written = map[string]store.CatalogHandler{}
		for _, h := range stored {
			c.written[h.Name] = h
		}
	}
	var upd []store.CatalogHandler
	for _, h := range live {
		if !c.same(h) {
			upd = append(upd, store.CatalogHandler{Name: h.Name, Version: h.Version, Description: h.Description, ParamsSchema: h.ParamsSchema})
		}
	}
	if len(upd) > 0 {
		if err := c.cfg.Store.UpsertHandlerCatalog(ctx, upd); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		for _, h := range upd {
			c.written[h.Name] = h
		}
	}
	out := make([]store.CatalogHandler, 0, len(c.written))
	for _, h := range c.written {
		out = append(out, h)
	}
	return out, nil
}

// changed reports whether a live handler differs from what this process
// last knew SQL to hold: another replica may have written since, so the
// catalog is read again before writing.
func (c *Catalog) changed(live []handlers.Handler) bool {
	for _, h := range live {
		if !c.same(h) {
			return true
		}
	}
	return false
}

func (c *Catalog) same(h handlers.Handler) bool {
	w, ok := c.written[h.Name]
	return ok && w.Version == h.Version && w.Description == h.Description && bytes.Equal(w.ParamsSchema, h.ParamsSchema)
}

// Sync persists what live nodes publish: their handlers into the catalog,
// and their groups as auto groups.
func (c *Catalog) Sync(ctx context.Context) error {
	if _, err := c.Handlers(ctx); err != nil {
		return err
	}
	nodes, err := c.nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Group == "" {
			continue
		}
		if err := c.EnsureGroup(ctx, n.Group); err != nil {
			return err
		}
	}
	return nil
}

// nodes reads the node registrations; undecodable ones are skipped.
func (c *Catalog) nodes(ctx context.Context) ([]cluster.NodeInfo, error) {
	resp, err := c.cfg.KV.Get(ctx, c.cfg.Keys.NodePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("catalog: read nodes from etcd: %w", err)
	}
	out := make([]cluster.NodeInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var n cluster.NodeInfo
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			continue
		}
		if n.UUID == "" {
			n.UUID = cluster.LastSegment(string(kv.Key))
		}
		out = append(out, n)
	}
	return out, nil
}

// EnsureGroup makes group exist (address type auto) unless this process
// already did so.
func (c *Catalog) EnsureGroup(ctx context.Context, group string) error {
	c.mu.Lock()
	done := c.groups[group]
	c.mu.Unlock()
	if done {
		return nil
	}
	if _, err := c.cfg.Store.EnsureGroup(ctx, group, group); err != nil {
		return fmt.Errorf("catalog: register group %q of a node: %w", group, err)
	}
	c.mu.Lock()
	c.groups[group] = true
	c.mu.Unlock()
	return nil
}

// resync is how often Run syncs without a change, in case a watch missed one.
const resync = time.Minute

// Run syncs now and after every change under the node and handler
// prefixes, until ctx ends (then it returns nil). Sync errors are logged
// and retried on the next change or resync.
func (c *Catalog) Run(ctx context.Context) error {
	if c.cfg.Watcher == nil {
		return fmt.Errorf("catalog: Run needs a Watcher")
	}
	sync := func() {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "syncing the handler catalog and groups failed", slog.Any("error", err))
		}
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		nodes := c.cfg.Watcher.Watch(wctx, c.cfg.Keys.NodePrefix(), clientv3.WithPrefix())
		hs := c.cfg.Watcher.Watch(wctx, c.cfg.Keys.HandlerPrefix(), clientv3.WithPrefix())
		sync()
		c.follow(ctx, nodes, hs, tick.C, sync)
		cancel()
		select { // a watch ended (compaction, lost connection): re-watch soon
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// follow calls sync on every watch event or tick until a watch ends or ctx does.
func (c *Catalog) follow(ctx context.Context, nodes, hs clientv3.WatchChan, tick <-chan time.Time, sync func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			sync()
		case resp, ok := <-nodes:
			if !ok || resp.Err() != nil {
				return
			}
			sync()
		case resp, ok := <-hs:
			if !ok || resp.Err() != nil {
				return
			}
			sync()
		}
	}
}
