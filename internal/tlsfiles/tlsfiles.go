// Package tlsfiles turns the PEM files named by Cronix's TLS flags into
// crypto/tls configurations: a serving config that picks up a replaced
// certificate without a restart, and client configs trusting a CA bundle.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Server returns a TLS serving config for the certificate and key files.
// The files are read now (so a bad pair fails at start) and read again on
// a handshake after either file's modification time changed: rotating a
// certificate is replacing the files.
func Server(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a TLS certificate needs both its certificate and its key file")
	}
	r := &reloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.load(); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.get}, nil
}

// Listen wraps l to serve TLS with the certificate and key files.
func Listen(l net.Listener, certFile, keyFile string) (net.Listener, error) {
	tc, err := Server(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(l, tc), nil
}

// reloader keeps the current certificate and the files' mtimes.
type reloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certTime time.Time
	keyTime  time.Time
}

func (r *reloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.load()
}

// load returns the cached certificate unless a file changed; a changed pair
// that does not load keeps the previous certificate in service.
func (r *reloader) load() (*tls.Certificate, error) {
	ci, err := os.Stat(r.certFile)
	if err != nil {
		return r.fallback(fmt.Errorf("TLS certificate %s: %w", r.certFile, err))
	}
	ki, err := os.Stat(r.keyFile)
	if err != nil {
		return r.fallback(fmt.Errorf("TLS key %s: %w", r.keyFile, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && ci.ModTime().Equal(r.certTime) && ki.ModTime().Equal(r.keyTime) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil
		}
		return nil, fmt.Errorf("loading TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certTime, r.keyTime = &cert, ci.ModTime(), ki.ModTime()
	return r.cert, nil
}

func (r *reloader) fallback(err error) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil {
		return r.cert, nil
	}
	return nil, err
}

// Client returns a TLS client config trusting the CA bundle in caFile, or
// the system roots when caFile is "".
func Client(caFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return tc, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", caFile)
	}
	tc.RootCAs = pool
	return tc, nil
}

// HTTPClient is an http.Client with the given overall timeout (0 = none)
// whose https connections trust caFile (system roots when "").
func HTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	tc, err := Client(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}
