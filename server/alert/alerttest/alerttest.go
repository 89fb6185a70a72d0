// Package alerttest gives alerting tests real receivers in the test
// process: an SMTP server (github.com/emersion/go-smtp) with optional
// STARTTLS and AUTH, and a webhook receiver that checks Standard Webhooks
// signatures with its own implementation of the documented algorithm.
package alerttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Mail is one message the SMTP server accepted.
type Mail struct {
	From string
	To   []string
	// Data is the whole message (headers and body) as received.
	Data string
	// TLS tells whether the session was encrypted (STARTTLS).
	TLS bool
	// User is the authenticated user name, "" without AUTH.
	User string
}

// SMTPOptions configure StartSMTP.
type SMTPOptions struct {
	// STARTTLS offers STARTTLS with a certificate for 127.0.0.1 signed by a
	// fresh CA (see SMTPServer.CAFile, SMTPServer.RootCAs).
	STARTTLS bool
	// Username and Password, when set, are required through AUTH PLAIN.
	Username string
	Password string
}

// SMTPServer is a running SMTP server on a loopback port.
type SMTPServer struct {
	// Host and Port to connect to.
	Host string
	Port int
	// CAFile is a PEM file of the CA that signed the server certificate
	// (STARTTLS only): give it to a child process as SSL_CERT_FILE.
	CAFile string
	// RootCAs trusts that CA.
	RootCAs *x509.CertPool

	opts  SMTPOptions
	mu    sync.Mutex
	mails []Mail
	got   chan struct{}
}

// StartSMTP starts an SMTP server stopped at the end of the test.
func StartSMTP(t testing.TB, opts SMTPOptions) *SMTPServer {
	t.Helper()
	s := &SMTPServer{opts: opts, got: make(chan struct{}, 1)}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.AllowInsecureAuth = !opts.STARTTLS
	if opts.STARTTLS {
		cert, pool, caPEM, err := selfSigned()
		if err != nil {
			t.Fatalf("alerttest: certificate: %v", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.RootCAs = pool
		s.CAFile = filepath.Join(t.TempDir(), "smtp-ca.pem")
		if err := os.WriteFile(s.CAFile, caPEM, 0o600); err != nil {
			t.Fatalf("alerttest: %v", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("alerttest: listen: %v", err)
	}
	addr := l.Addr().(*net.TCPAddr)
	s.Host, s.Port = "127.0.0.1", addr.Port
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// Mails returns the messages accepted so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// WaitMails waits until at least n messages arrived and returns them all.
func (s *SMTPServer) WaitMails(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if m := s.Mails(); len(m) >= n {
			return m
		}
		select {
		case <-s.got:
		case <-deadline.C:
			t.Fatalf("alerttest: want %d mails within %s, got %d: %+v", n, timeout, len(s.Mails()), s.Mails())
		}
	}
}

func (s *SMTPServer) add(m Mail) {
	s.mu.Lock()
	s.mails = append(s.mails, m)
	s.mu.Unlock()
	select {
	case s.got <- struct{}{}:
	default:
	}
}

type session struct {
	srv  *SMTPServer
	conn *smtp.Conn
	user string
	from string
	to   []string
}

var _ smtp.AuthSession = (*session)(nil)

func (s *session) AuthMechanisms() []string {
	if s.srv.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.srv.opts.Username || pass != s.srv.opts.Password {
			return errors.New("invalid credentials")
		}
		s.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.srv.opts.Username != "" && s.user == "" {
		return smtp.ErrAuthRequired
	}
	if s.srv.opts.STARTTLS {
		if _, ok := s.conn.TLSConnectionState(); !ok {
			return &smtp.SMTPError{Code: 530, Message: "must issue STARTTLS first"}
		}
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, encrypted := s.conn.TLSConnectionState()
	s.srv.add(Mail{From: s.from, To: append([]string(nil), s.to...), Data: string(b), TLS: encrypted, User: s.user})
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }

// selfSigned makes a CA and a certificate for 127.0.0.1/localhost signed by it.
func selfSigned() (tls.Certificate, *x509.CertPool, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alerttest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool, caPEM, nil
}

// Hook is one request the webhook receiver got.
type Hook struct {
	ID        string
	Timestamp string
	Signature string
	Body      []byte
	// Status is what the receiver answered.
	Status int
	// SignatureOK: the signature matched the secret (always false without one).
	SignatureOK bool
	// At is when the receiver got the request.
	At time.Time
}

// WebhookReceiver is an HTTP server on a loopback port recording requests.
type WebhookReceiver struct {
	// URL to configure as the webhook's URL.
	URL string
	// Secret the receiver verifies signatures with.
	Secret string

	status func(n int) int
	mu     sync.Mutex
	hooks  []Hook
	got    chan struct{}
}

// StartWebhook starts a receiver; status gives the answer to the n-th
// request (1-based); nil answers 200 always.
func StartWebhook(t testing.TB, secret string, status func(n int) int) *WebhookReceiver {
	t.Helper()
	w := &WebhookReceiver{Secret: secret, status: status, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(srv.Close)
	w.URL = srv.URL + "/hook"
	return w
}

func (w *WebhookReceiver) serve(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := Hook{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
		Signature: r.Header.Get("webhook-signature"), Body: body, At: time.Now()}
	h.SignatureOK = w.Secret != "" && Verify(w.Secret, h.ID, h.Timestamp, body, h.Signature)
	w.mu.Lock()
	n := len(w.hooks) + 1
	h.Status = http.StatusOK
	if w.status != nil {
		h.Status = w.status(n)
	}
	w.hooks = append(w.hooks, h)
	w.mu.Unlock()
	rw.WriteHeader(h.Status)
	select {
	case w.got <- struct{}{}:
	default:
	}
}

// Hooks returns the requests so far.
func (w *WebhookReceiver) Hooks() []Hook {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Hook(nil), w.hooks...)
}

// WaitFor waits until cond holds for the requests so far and returns them.
func (w *WebhookReceiver) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]Hook) bool) []Hook {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if h := w.Hooks(); cond(h) {
			return h
		}
		select {
		case <-w.got:
		case <-time.After(200 * time.Millisecond): // cond may depend on time
		case <-deadline.C:
			t.Fatalf("alerttest: webhook: %s: not within %s; got %d requests", what, timeout, len(w.Hooks()))
		}
	}
}

// Verify checks a Standard Webhooks signature header (space-separated
// "v1,<base64>" entries): HMAC-SHA256 over "<id>.<timestamp>.<body>" keyed
// with the base64-decoded part of a "whsec_" secret, or the secret's bytes.
func Verify(secret, id, timestamp string, body []byte, header string) bool {
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return false
		}
		key = k
	}
	if _, err := strconv.ParseInt(timestamp, 10, 64); err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, part := range strings.Fields(header) {
		v, sig, ok := strings.Cut(part, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}
