package scheduler

import (
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

// sharedEtcd serves every test of the package, each under its own root.
var sharedEtcd etcdtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	sharedEtcd.Close()
	os.Exit(code)
}

// testEtcd returns the shared etcd client and keys under a root of the test's own.
func testEtcd(t *testing.T) (*clientv3.Client, cluster.Keys) {
	t.Helper()
	return sharedEtcd.Client(t)
}
