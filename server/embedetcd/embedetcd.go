// Package embedetcd runs a single-member etcd server inside the Cronix
// process (etcd's server/embed), for standalone mode and for tests.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config says where the embedded etcd keeps its data and listens.
type Config struct {
	// Dir is the etcd data directory.
	Dir string
	// ClientAddr is host:port for clients; "127.0.0.1:0" picks a free port.
	ClientAddr string
	// PeerAddr is host:port for peers; "127.0.0.1:0" picks a free port.
	PeerAddr string
	// MaxTxnOps is the largest number of operations in one transaction
	// (etcd's default is 128; Cronix batches dispatches, so it raises it).
	MaxTxnOps uint
	// UnsafeNoFsync skips fsync: for tests only.
	UnsafeNoFsync bool
}

// DefaultMaxTxnOps is the per-transaction operation limit of embedded etcd.
const DefaultMaxTxnOps = 8192

// Etcd is a running embedded etcd server.
type Etcd struct {
	e         *embed.Etcd
	endpoint  string
	closeOnce sync.Once
}

// Start starts etcd and waits until it serves (at most 60 s or ctx). When an
// address asks for a free port (":0"), a port taken between choosing and
// binding it is retried with another one.
func Start(ctx context.Context, cfg Config) (*Etcd, error) {
	auto := cfg.ClientAddr == "" || cfg.PeerAddr == "" || strings.HasSuffix(cfg.ClientAddr, ":0") || strings.HasSuffix(cfg.PeerAddr, ":0")
	for attempt := 1; ; attempt++ {
		e, err := start(ctx, cfg)
		if err == nil || !auto || attempt == 5 || !addrInUse(err) {
			return e, err
		}
	}
}

func start(ctx context.Context, cfg Config) (*Etcd, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedetcd: Dir is required")
	}
	clientAddr, err := resolveAddr(cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client address: %w", err)
	}
	peerAddr, err := resolveAddr(cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer address: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = "cronix"
	ec.Dir = cfg.Dir
	ec.Logger = "zap"
	// etcd logs expected shutdown errors at "error"; Cronix reports real failures itself.
	ec.LogLevel = "fatal"
	ec.LogOutputs = []string{"stderr"}
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	ec.ListenClientUrls = []url.URL{cu}
	ec.AdvertiseClientUrls = []url.URL{cu}
	ec.ListenPeerUrls = []url.URL{pu}
	ec.AdvertisePeerUrls = []url.URL{pu}
	ec.InitialCluster = ec.Name + "=" + pu.String()
	ec.MaxTxnOps = cfg.MaxTxnOps
	if ec.MaxTxnOps == 0 {
		ec.MaxTxnOps = DefaultMaxTxnOps
	}
	ec.MaxRequestBytes = 8 << 20
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: start in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedetcd: waiting for ready: %w", ctx.Err())
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedetcd: not ready after 60s")
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %w", err)
	}
	return &Etcd{e: e, endpoint: cu.String()}, nil
}

// Endpoint is the client URL, e.g. "http://127.0.0.1:2379".
func (e *Etcd) Endpoint() string { return e.endpoint }

// Client opens a new client to this server; the caller closes it.
func (e *Etcd) Client() (*clientv3.Client, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      nopLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client: %w", err)
	}
	return c, nil
}

// Close stops the server. It is idempotent.
func (e *Etcd) Close() {
	if e == nil || e.e == nil {
		return
	}
	e.closeOnce.Do(e.e.Close)
}

// resolveAddr turns "host:0" into a concrete free port, since etcd must
// advertise the URL it listens on.
func resolveAddr(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port != "0" {
		return addr, nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}
