package agent

import (
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
	"github.com/cronix/cronix/internal/waitctx"
)

// serverSet is the list of server base URLs results are posted to: either
// a static list or the seed-004 registry in etcd, kept current by a watch.
type serverSet struct {
	etcd   *clientv3.Client
	log    *slog.Logger
	static []string

	mu     sync.RWMutex
	byKey  map[string]string // registry data key → URL
	sorted []string

	bg background // the registry watch
}

func newServerSet(etcd *clientv3.Client, static []string, logger *slog.Logger) *serverSet {
	s := &serverSet{etcd: etcd, log: logger, byKey: map[string]string{}}
	for _, u := range static {
		s.static = append(s.static, strings.TrimRight(u, "/"))
	}
	return s
}

// URLs returns the known server base URLs in a stable order.
func (s *serverSet) URLs() []string {
	if len(s.static) > 0 {
		return s.static
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sorted
}

// start loads the registry and keeps watching it; a static list needs nothing.
func (s *serverSet) start(ctx context.Context) error {
	if len(s.static) > 0 {
		return nil
	}
	rev, err := s.load(ctx)
	if err != nil {
		return err
	}
	s.bg.start(context.WithoutCancel(ctx), func(ctx context.Context) { s.watch(ctx, rev) })
	return nil
}

func (s *serverSet) stop() { s.bg.stop() }

// load replaces the set with the registry's content and returns its revision.
func (s *serverSet) load(ctx context.Context) (int64, error) {
	resp, err := s.etcd.Get(ctx, cluster.RegistryRoot, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("agent: list servers under %s: %w", cluster.RegistryRoot, err)
	}
	byKey := map[string]string{}
	for _, kv := range resp.Kvs {
		if u, ok := s.parse(kv.Key, kv.Value); ok {
			byKey[string(kv.Key)] = u
		}
	}
	s.mu.Lock()
	s.byKey = byKey
	s.resortLocked()
	s.mu.Unlock()
	return resp.Header.Revision, nil
}

// parse reads a registry data value; other keys of a replica (status,
// config) and values without a URL are skipped.
func (s *serverSet) parse(key, value []byte) (string, bool) {
	if cluster.LastSegment(string(key)) != "data" {
		return "", false
	}
	var info cluster.ServerInfo
	if err := json.Unmarshal(value, &info); err != nil || info.URL == "" {
		s.log.Warn("agent: ignoring unreadable server registration", "key", string(key), "error", err)
		return "", false
	}
	return strings.TrimRight(info.URL, "/"), true
}

func (s *serverSet) resortLocked() {
	urls := make([]string, 0, len(s.byKey))
	for _, u := range s.byKey {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	s.sorted = slices.Compact(urls)
}

// watch applies registry changes from rev+1 on; when the watch breaks it
// reloads the registry and watches again.
func (s *serverSet) watch(ctx context.Context, rev int64) {
	var bo backoff
	for ctx.Err() == nil {
		wch := s.etcd.Watch(clientv3.WithRequireLeader(ctx), cluster.RegistryRoot,
			clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				s.log.Warn("agent: server registry watch failed", "error", err)
				break
			}
			bo.reset()
			s.mu.Lock()
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if ev.Type == clientv3.EventTypeDelete {
					delete(s.byKey, key)
				} else if u, ok := s.parse(ev.Kv.Key, ev.Kv.Value); ok {
					s.byKey[key] = u
				}
			}
			s.resortLocked()
			s.mu.Unlock()
			rev = resp.Header.Revision
		}
		for ctx.Err() == nil {
			if !waitctx.Sleep(ctx, bo.next()) {
				return
			}
			r, err := s.load(ctx)
			if err == nil {
				rev = r
				break
			}
			s.log.Warn("agent: reloading server registry", "error", err)
		}
	}
}

// backoff is an exponential delay from 100ms to 5s.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	switch {
	case b.d == 0:
		b.d = 100 * time.Millisecond
	case b.d < 5*time.Second:
		b.d = min(2*b.d, 5*time.Second)
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }
