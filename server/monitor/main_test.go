package monitor

import (
	"os"
	"testing"

	"github.com/cronix/cronix/server/embedetcd/etcdtest"
)

var etcd etcdtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	etcd.Close()
	os.Exit(code)
}
