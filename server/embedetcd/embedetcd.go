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

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
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
	// RootPassword, when set, turns etcd authentication on: the user root
	// (role root) gets this password on the first start, and every client
	// must then authenticate (Client does, as root). A data dir whose auth
	// is already on must be given the same password.
	RootPassword string
	// AuthTokenTTL is the idle lifetime of etcd's simple auth tokens, in
	// seconds (0 = etcd's default, 300); clients re-authenticate by
	// themselves after it.
	AuthTokenTTL uint
	// CertFile and KeyFile, when both set, serve clients over TLS (https).
	CertFile, KeyFile string
	// ClientCAFile, with CertFile, requires every client to present a
	// certificate signed by this CA; with auth on, a client that sends no
	// password is the user named by its certificate's common name.
	ClientCAFile string
	// CompactionRetention is the MVCC history kept (periodic
	// auto-compaction); 0 means DefaultCompactionRetention. Only watches
	// resuming from an older revision need history, and every Cronix watch
	// lists again when told its revision was compacted.
	CompactionRetention time.Duration
}

// DefaultMaxTxnOps is the per-transaction operation limit of embedded etcd.
const DefaultMaxTxnOps = 8192

// Raft log and MVCC history bounds of embedded etcd (see Start).
const (
	// SnapshotCount is how many applied entries trigger a snapshot to disk
	// (a backend commit with fsync, a snap file, the WAL released).
	SnapshotCount = 2_000
	// SnapshotCatchUpEntries is how many entries the in-memory raft log
	// keeps after each snapshot. etcd takes an in-memory snapshot every 100
	// applied entries and then drops the log up to this many entries before
	// it; a single member has no follower to catch up, so it keeps few.
	SnapshotCatchUpEntries = 10
	// DefaultCompactionRetention is how much MVCC history (old and deleted
	// revisions) the embedded etcd keeps: it compacts every retention
	// period up to the revision of one period before.
	DefaultCompactionRetention = 10 * time.Second
)

// Etcd is a running embedded etcd server.
type Etcd struct {
	e         *embed.Etcd
	endpoint  string
	password  string
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
	scheme := "http"
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		if cfg.CertFile == "" || cfg.KeyFile == "" {
			return nil, errors.New("embedetcd: CertFile and KeyFile go together")
		}
		scheme = "https"
		ec.ClientTLSInfo = transport.TLSInfo{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
			TrustedCAFile: cfg.ClientCAFile, ClientCertAuth: cfg.ClientCAFile != ""}
	} else if cfg.ClientCAFile != "" {
		return nil, errors.New("embedetcd: ClientCAFile needs CertFile and KeyFile")
	}
	cu := url.URL{Scheme: scheme, Host: clientAddr}
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
	// The raft log stays in memory between etcd's in-memory snapshots
	// (every 100 applied entries), and then the last SnapshotCatchUpEntries
	// are kept: etcd's default of 5,000 held every dispatch batch of the
	// last half hour or so at a few entries per second (~0.6 MB an entry at
	// 1,000 fires/s). This etcd is a single member with no follower to
	// catch up, so it keeps few; disk snapshots stay at SnapshotCount.
	ec.SnapshotCount = SnapshotCount
	ec.SnapshotCatchUpEntries = SnapshotCatchUpEntries
	// Every dispatched fire is a created and then deleted run key: each
	// leaves its revisions in the MVCC index (memory) and in bbolt until a
	// compaction, so history is kept for a short period only (with 1h, at
	// 1,000 fires/s the key index alone grew by ~15 MB a minute).
	retention := cfg.CompactionRetention
	if retention <= 0 {
		retention = DefaultCompactionRetention
	}
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = retention.String()
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.AuthToken = "simple"
	if cfg.AuthTokenTTL > 0 {
		ec.AuthTokenTTL = cfg.AuthTokenTTL
	}
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
	out := &Etcd{e: e, endpoint: cu.String(), password: cfg.RootPassword}
	if cfg.RootPassword != "" {
		if err := out.enableAuth(ctx); err != nil {
			e.Close()
			return nil, err
		}
	}
	return out, nil
}

// RootUser is the etcd user that owns everything once auth is on.
const RootUser = "root"

// enableAuth creates the root user and turns authentication on, unless a
// previous start did; then it checks the password against the data dir's.
// It talks to the server in process, so it needs no client credentials.
func (e *Etcd) enableAuth(ctx context.Context) error {
	srv := e.e.Server
	if srv.AuthStore().IsAuthEnabled() {
		if _, err := srv.AuthStore().CheckPassword(RootUser, e.password); err != nil {
			return fmt.Errorf("embedetcd: etcd auth is on in this data dir but the root password does not match: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := srv.UserAdd(ctx, &pb.AuthUserAddRequest{Name: RootUser, Password: e.password}); err != nil {
		if !errors.Is(err, auth.ErrUserAlreadyExist) {
			return fmt.Errorf("embedetcd: add user root: %w", err)
		}
		if _, err := srv.UserChangePassword(ctx, &pb.AuthUserChangePasswordRequest{Name: RootUser, Password: e.password}); err != nil {
			return fmt.Errorf("embedetcd: set the root password: %w", err)
		}
	}
	if _, err := srv.RoleAdd(ctx, &pb.AuthRoleAddRequest{Name: RootUser}); err != nil && !errors.Is(err, auth.ErrRoleAlreadyExist) {
		return fmt.Errorf("embedetcd: add role root: %w", err)
	}
	if _, err := srv.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: RootUser, Role: RootUser}); err != nil {
		return fmt.Errorf("embedetcd: grant role root: %w", err)
	}
	if _, err := srv.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		return fmt.Errorf("embedetcd: enable auth: %w", err)
	}
	return nil
}

// Endpoint is the client URL, e.g. "http://127.0.0.1:2379".
func (e *Etcd) Endpoint() string { return e.endpoint }

// Client opens a new client to this server, authenticated as root when
// auth is on, with extra gRPC dial options (e.g. metrics interceptors);
// the caller closes it. It does not speak TLS: a server started
// with CertFile is for other processes.
func (e *Etcd) Client(opts ...grpc.DialOption) (*clientv3.Client, error) {
	if strings.HasPrefix(e.endpoint, "https:") {
		return nil, errors.New("embedetcd: Client does not speak TLS; connect with a TLS client config")
	}
	cc := clientv3.Config{
		Endpoints: []string{e.endpoint},
		// Generous: with auth on, dialing authenticates (a bcrypt check).
		DialTimeout: 30 * time.Second,
		Logger:      nopLogger(),
		DialOptions: opts,
	}
	if e.password != "" {
		cc.Username, cc.Password = RootUser, e.password
	}
	c, err := clientv3.New(cc)
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
