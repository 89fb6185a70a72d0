package etcdtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/embedetcd"
)

// Shared is one embedded etcd serving every test of a package, each test
// under a key root of its own: starting one per test costs seconds on a
// small machine. Declare it as a package variable and call Close from
// TestMain after m.Run.
type Shared struct {
	once  sync.Once
	etcd  *embedetcd.Etcd
	cli   *clientv3.Client
	dir   string
	err   error
	roots atomic.Int64
}

// Client starts the shared etcd on first use and returns a client to it and
// keys under a fresh root for this call (so -count=N reruns don't collide).
func (s *Shared) Client(t testing.TB) (*clientv3.Client, cluster.Keys) {
	t.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "cronix-etcdtest-"); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if s.etcd, s.err = embedetcd.Start(ctx, embedetcd.Config{Dir: s.dir, UnsafeNoFsync: true}); s.err == nil {
			s.cli, s.err = s.etcd.Client()
		}
	})
	if s.err != nil {
		t.Fatalf("etcdtest: embedded etcd: %v", s.err)
	}
	root := fmt.Sprintf("/%s-%d", strings.NewReplacer("/", "_").Replace(t.Name()), s.roots.Add(1))
	return s.cli, cluster.NewKeys(root)
}

// Close stops the shared etcd and removes its data.
func (s *Shared) Close() {
	if s.cli != nil {
		_ = s.cli.Close()
	}
	s.etcd.Close()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
