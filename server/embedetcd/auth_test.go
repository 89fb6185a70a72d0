package embedetcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/internal/testcerts"
	"github.com/cronix/cronix/server/embedetcd"
)

func startEtcd(t *testing.T, cfg embedetcd.Config) *embedetcd.Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := embedetcd.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func newClient(t *testing.T, cc clientv3.Config) *clientv3.Client {
	t.Helper()
	if cc.DialTimeout == 0 {
		cc.DialTimeout = 20 * time.Second
	}
	cc.Logger = zap.NewNop()
	c, err := clientv3.New(cc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRootPasswordTurnsAuthOn: with a root password an anonymous client is
// refused, the root client works, a restart with the same password keeps
// working and a restart with another password is refused.
func TestRootPasswordTurnsAuthOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := embedetcd.Config{Dir: dir, UnsafeNoFsync: true, RootPassword: "s3cret"}
	e := startEtcd(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	anon := newClient(t, clientv3.Config{Endpoints: []string{e.Endpoint()}})
	_, err := anon.Put(ctx, "/Cronix/run/n1/f1", "{}")
	require.Error(t, err, "an anonymous write must be refused")
	require.True(t, errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrPermissionDenied), "%v", err)
	_, err = anon.Get(ctx, "/Cronix/", clientv3.WithPrefix())
	require.Error(t, err, "an anonymous read must be refused")

	_, err = clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, Username: "root", Password: "nope",
		DialTimeout: 20 * time.Second, Logger: zap.NewNop()})
	require.ErrorIs(t, err, rpctypes.ErrAuthFailed)

	root, err := e.Client()
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Put(ctx, "/x", "1")
	require.NoError(t, err)

	e.Close()
	e = startEtcd(t, cfg)
	root2, err := e.Client()
	require.NoError(t, err)
	defer root2.Close()
	resp, err := root2.Get(ctx, "/x")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	e.Close()

	cfg.RootPassword = "other"
	_, err = embedetcd.Start(ctx, cfg)
	require.ErrorContains(t, err, "root password does not match")
}

// TestClientReauthenticatesAfterTokenExpiry: simple tokens expire after
// AuthTokenTTL idle seconds; the client fetches a new one by itself, for
// requests and for a watch opened after the expiry.
func TestClientReauthenticatesAfterTokenExpiry(t *testing.T) {
	t.Parallel()
	e := startEtcd(t, embedetcd.Config{Dir: t.TempDir(), UnsafeNoFsync: true, RootPassword: "pw", AuthTokenTTL: 1})
	cli, err := e.Client()
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/a", "1")
	require.NoError(t, err)
	// The behaviour under test is the passage of time itself: stay idle
	// past the 1 s token TTL (etcd checks expiry with 1 s resolution).
	<-time.After(3 * time.Second)
	_, err = cli.Put(ctx, "/a", "2")
	require.NoError(t, err, "the client must re-authenticate after its token expired")
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := cli.Watch(wctx, "/b")
	_, err = cli.Put(ctx, "/b", "x")
	require.NoError(t, err)
	select {
	case wr := <-wch:
		require.NoError(t, wr.Err())
		require.Len(t, wr.Events, 1)
	case <-ctx.Done():
		t.Fatal("no watch event after re-authentication")
	}
}

// TestClientCertificates: with a client CA, a client without a certificate
// cannot connect; with auth on, a client certificate's common name is the
// user, so root's certificate works without a password.
func TestClientCertificates(t *testing.T) {
	t.Parallel()
	ca := testcerts.New(t)
	srv := ca.Server("etcd")
	e := startEtcd(t, embedetcd.Config{Dir: t.TempDir(), UnsafeNoFsync: true, RootPassword: "pw",
		CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.CertFile})
	require.Regexp(t, `^https://127\.0\.0\.1:\d+$`, e.Endpoint())
	_, err := e.Client()
	require.Error(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	noCert := newClient(t, clientv3.Config{Endpoints: []string{e.Endpoint()}, TLS: ca.ClientTLS(), DialTimeout: time.Second})
	ctx1, cancel1 := context.WithTimeout(ctx, 3*time.Second)
	_, err = noCert.Get(ctx1, "/x")
	cancel1()
	require.Error(t, err, "a client without a certificate must not get in")

	pair := ca.Client("root")
	cert, err := tlsPair(pair)
	require.NoError(t, err)
	tc := ca.ClientTLS()
	tc.Certificates = append(tc.Certificates, cert)
	withCert := newClient(t, clientv3.Config{Endpoints: []string{e.Endpoint()}, TLS: tc})
	_, err = withCert.Put(ctx, "/x", "1")
	require.NoError(t, err)
}

func tlsPair(p testcerts.Pair) (tls.Certificate, error) {
	return tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
}
