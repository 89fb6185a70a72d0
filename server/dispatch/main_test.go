package dispatch

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

// One embedded etcd serves every test of the package (each test writes
// under its own root): starting one per test costs time on a small machine
// and races for free ports with other packages' tests.
var roots atomic.Int64

var shared struct {
	once sync.Once
	etcd *embedetcd.Etcd
	cli  *clientv3.Client
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cli != nil {
		_ = shared.cli.Close()
	}
	shared.etcd.Close()
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// testEtcd returns the shared etcd client and keys under a root of the test's own.
func testEtcd(t *testing.T) (*clientv3.Client, cluster.Keys) {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "dispatch-etcd-")
		if shared.err != nil {
			return
		}
		// The embedded etcd picks free ports by listening and closing; a
		// concurrent process may take one in between, so retry a few times.
		for attempt := range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			shared.etcd, shared.err = embedetcd.Start(ctx, embedetcd.Config{
				Dir: shared.dir + "/" + string(rune('a'+attempt)), UnsafeNoFsync: true})
			cancel()
			if shared.err == nil || !strings.Contains(shared.err.Error(), "address already in use") {
				break
			}
		}
		if shared.err == nil {
			shared.cli, shared.err = shared.etcd.Client()
		}
	})
	if shared.err != nil {
		t.Fatalf("embedded etcd: %v", shared.err)
	}
	// A fresh root per call: -count=N reruns a test against the same etcd.
	root := fmt.Sprintf("/%s-%d", strings.NewReplacer("/", "_").Replace(t.Name()), roots.Add(1))
	return shared.cli, cluster.NewKeys(root)
}
