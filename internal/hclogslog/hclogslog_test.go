package hclogslog_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/internal/hclogslog"
	"github.com/cronix/cronix/internal/syncbuf"
)

func TestFormatValuesAreRendered(t *testing.T) {
	t.Parallel()
	var buf syncbuf.Buffer
	l := hclogslog.New(slog.New(slog.NewTextHandler(&buf, nil)), "raft")
	l.With("peer", hclog.Fmt("%s:%d", "a", 1)).Info("hello",
		"servers", hclog.Fmt("%+v", []struct{ ID string }{{"n1"}}),
		"hex", hclog.Hex(255), "oct", hclog.Octal(8), "bin", hclog.Binary(5), "q", hclog.Quote("x y"),
		"plain", 3)
	out := buf.String()
	require.Contains(t, out, "servers=[{ID:n1}]")
	require.Contains(t, out, "peer=a:1")
	require.Contains(t, out, "hex=0xff")
	require.Contains(t, out, "oct=010")
	require.Contains(t, out, "bin=0b101")
	require.Contains(t, out, `q="\"x y\""`)
	require.Contains(t, out, "plain=3")
	require.Contains(t, out, "component=raft")
	require.NotContains(t, out, "%+v")
}

// TestRaftInitialConfigurationLogsItsServers: raft's own "initial
// configuration" line shows the servers, not "[%+v ...]".
func TestRaftInitialConfigurationLogsItsServers(t *testing.T) {
	t.Parallel()
	var buf syncbuf.Buffer
	cfg := raft.DefaultConfig()
	cfg.LocalID = "srv-1"
	cfg.Logger = hclogslog.New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	logs, stable := raft.NewInmemStore(), raft.NewInmemStore()
	snaps := raft.NewDiscardSnapshotStore()
	addr, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: addr}}}
	require.NoError(t, raft.BootstrapCluster(cfg, logs, stable, snaps, trans, conf))
	r, err := raft.NewRaft(cfg, &nopFSM{}, logs, stable, snaps, trans)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Shutdown().Error()) })

	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "initial configuration") {
			line = l
		}
	}
	require.NotEmpty(t, line, "raft logs its initial configuration at start: %s", buf.String())
	require.NotContains(t, line, "%+v")
	require.Contains(t, line, "ID:srv-1")
	require.Contains(t, line, "Address:"+string(addr))
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, io.EOF }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }
