// Package etcdtest gives tests a real embedded etcd server in a temp dir.
package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/server/embedetcd"
)

// Start runs an embedded etcd for the test and returns it; it is closed
// when the test ends.
func Start(t testing.TB) *embedetcd.Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := embedetcd.Start(ctx, embedetcd.Config{Dir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// Client runs an embedded etcd for the test and returns a client to it;
// both are closed when the test ends.
func Client(t testing.TB) *clientv3.Client {
	t.Helper()
	e := Start(t)
	c, err := e.Client()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
