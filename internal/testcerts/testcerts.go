// Package testcerts writes a throwaway certificate authority and the
// certificates it signs into a test's temp dir: a serving certificate for
// 127.0.0.1 and localhost, and client certificates named by common name.
// For tests only.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority whose files live in Dir.
type CA struct {
	// Dir holds every file written.
	Dir string
	// CertFile is the CA certificate (PEM), the file clients trust.
	CertFile string

	t      testing.TB
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// Pair names a certificate and its key file.
type Pair struct {
	CertFile, KeyFile string
}

// New creates a CA in a fresh temp dir of t.
func New(t testing.TB) *CA {
	t.Helper()
	ca := &CA{Dir: t.TempDir(), t: t}
	key := ca.newKey()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cronix test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testcerts: CA: %v", err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatalf("testcerts: CA: %v", err)
	}
	ca.key = key
	ca.serial.Store(1)
	ca.CertFile = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a serving certificate for 127.0.0.1, ::1 and localhost
// (also usable as a client certificate) named name.
func (ca *CA) Server(name string) Pair {
	return ca.issue(name, &x509.Certificate{
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client issues a client certificate with common name cn (etcd takes it as
// the user name).
func (ca *CA) Client(cn string) Pair {
	return ca.issue(cn, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// Pool is a cert pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ClientTLS is a TLS client config trusting the CA.
func (ca *CA) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
}

func (ca *CA) issue(cn string, tmpl *x509.Certificate) Pair {
	ca.t.Helper()
	key := ca.newKey()
	tmpl.SerialNumber = big.NewInt(ca.serial.Add(1))
	tmpl.Subject = pkix.Name{CommonName: cn}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatalf("testcerts: certificate %s: %v", cn, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatalf("testcerts: key %s: %v", cn, err)
	}
	return Pair{
		CertFile: ca.write(cn+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(cn+"-key.pem", "EC PRIVATE KEY", kder),
	}
}

func (ca *CA) newKey() *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatalf("testcerts: key: %v", err)
	}
	return key
}

func (ca *CA) write(name, typ string, der []byte) string {
	path := filepath.Join(ca.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatalf("testcerts: %v", err)
	}
	return path
}
