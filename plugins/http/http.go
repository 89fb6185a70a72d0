// Package http is Cronix's built-in "http" handler: it sends one HTTP(S)
// request per run and succeeds when the response status is expected (any
// 2xx by default) and, optionally, the response body matches a regular
// expression. The response body (up to 1 MiB) is the run's output. Every
// request names its fire in the X-Cronix-Fire-Id header (FireIDHeader),
// and connections are kept alive and reused across runs.
//
// The handler is a pluginapi.EarlyRunner: the SDK calls it as soon as a run
// dispatched ahead arrives, before its start time (Request.StartAt). It
// then builds the request, serialises it and takes an idle keep-alive
// connection to the host (or dials one, through the Guard) at once; at
// StartAt one goroutine writes every request due at that instant in one
// tight loop, and each run reads its own response and judges it exactly
// as on the normal path. Nothing is written before StartAt, and a run
// cancelled before then sends nothing. Only the first request of a run
// goes that way, and only for an http:// URL without credentials in it and
// with a body of at most 16 KiB; a redirect's next hop, https:// URLs and
// other requests go through the normal client once StartAt has come. A
// request's timeout_seconds counts from StartAt. A burst connection idle
// longer than 4 s is closed rather than reused; when a reused one fails
// before any response byte, a GET, HEAD, OPTIONS or TRACE request (or one
// with an Idempotency-Key header) is sent once more on a fresh connection,
// other methods only when nothing was written (net/http's rule). Unlike
// the normal client, the burst path does not ask for gzip. A plugin process
// (New) has every P only while it writes a burst of more than one part,
// and CRONIX_HTTP_IDLE_PROCS (default 1) otherwise: see Options.IdleProcs.
//
// TLS certificates are verified unless a job turns that off. A Guard
// refuses connections to loopback, link-local (including the cloud metadata
// endpoint 169.254.169.254), unspecified and private addresses; it checks
// the resolved address of every connection, so a DNS name pointing inside
// or a redirect cannot get around it. The node allows loopback or private
// destinations through the CRONIX_HTTP_ALLOW_LOOPBACK and
// CRONIX_HTTP_ALLOW_PRIVATE environment variables (its
// --http-allow-loopback and --http-allow-private flags). Environment proxy
// settings are ignored: a proxy would hide the real destination from the
// guard.
package http

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/pluginapi"
)

// Name is the handler's name: what a job puts in its "handler" field.
const Name = "http"

// Version is the handler's version.
const Version = "1.0.0"

const (
	// DefaultMaxBody is the most response body captured per run.
	DefaultMaxBody = 1 << 20
	// maxRedirects bounds the redirects followed.
	maxRedirects = 10
	dialTimeout  = 30 * time.Second
	tlsTimeout   = 15 * time.Second
	// maxIdle and maxIdlePerHost bound the idle keep-alive connections
	// of each shared client; idleTimeout closes an idle one.
	maxIdle        = 8192
	maxIdlePerHost = 4096
	idleTimeout    = 30 * time.Second
)

// FireIDHeader is the request header carrying the fire id (e.g.
// "42-1764062400000", the same on every attempt of a fire), so a receiver
// can recognise a repeated delivery.
const FireIDHeader = "X-Cronix-Fire-Id"

// Options configure the handler.
type Options struct {
	// Guard decides which addresses may be connected to.
	Guard Guard
	// MaxBody is the most response body captured; 0 = DefaultMaxBody.
	MaxBody int64
	// IdleProcs, when above 0 and below the process's GOMAXPROCS, is the
	// GOMAXPROCS the process runs with except while a burst is being
	// written: the writes of a second's requests use every core, and what
	// follows them (reading the responses, sending the results to the
	// node) at most IdleProcs, so it does not take the cores from the
	// peers those requests went to, or from other work on the machine,
	// while they answer. Only a process of its own may set it (it changes
	// the whole process); 0 leaves GOMAXPROCS alone.
	IdleProcs int
}

// EnvIdleProcs sets Options.IdleProcs of a plugin process (New): unset or
// empty means DefaultIdleProcs, 0 leaves GOMAXPROCS alone.
const EnvIdleProcs = "CRONIX_HTTP_IDLE_PROCS"

// DefaultIdleProcs is the plugin process's IdleProcs when EnvIdleProcs is
// not set. On 2 cores it lowered the 1,000/s row's p99 (13.9-15.0 ms
// against 15.5-17.3 without, three pairs of 60-s rows); at 5,000/s it
// moved both ways: over 120-180 s on one day 95-128 ms and 8 % more CPU
// against 86-89 ms without, though that day's make bench held 80.5 ms
// with it, and on a day of slow forks over 45 s 108-132 ms against
// 179-183 (issue 12, stops 49 and 50).
const DefaultIdleProcs = 1

// OptionsFromEnv reads the Guard settings from EnvAllowLoopback and
// EnvAllowPrivate, and IdleProcs from EnvIdleProcs (a value that is not a
// non-negative integer means DefaultIdleProcs), through getenv.
func OptionsFromEnv(getenv func(string) string) Options {
	on := func(k string) bool {
		v, _ := strconv.ParseBool(strings.TrimSpace(getenv(k)))
		return v
	}
	idle, err := strconv.Atoi(strings.TrimSpace(getenv(EnvIdleProcs)))
	if err != nil || idle < 0 {
		idle = DefaultIdleProcs
	}
	return Options{Guard: Guard{AllowLoopback: on(EnvAllowLoopback), AllowPrivate: on(EnvAllowPrivate)}, IdleProcs: idle}
}

type handler struct {
	opts Options
	// clients are shared by every run: [0] verifies TLS certificates, [1]
	// does not (insecure_skip_verify). Each has one Transport with
	// keep-alive and a bounded idle pool, so runs calling the same host
	// reuse connections instead of dialling (and leaving a TIME_WAIT
	// socket) per run. Every new connection goes through the Guard.
	clients [2]*nethttp.Client
	// burstClients serve the runs called before their StartAt: the same
	// redirect rules, their first request through the burst path (see
	// burstTransport), later ones through clients' transports.
	burstClients [2]*nethttp.Client
	burst        *burster
}

var (
	_ pluginapi.Handler     = (*handler)(nil)
	_ pluginapi.EarlyRunner = (*handler)(nil)
	_ io.Closer             = (*handler)(nil)
)

// New returns the http handler configured from this process's environment
// (see OptionsFromEnv): what a plugin process serves. Its bursts change the
// process's GOMAXPROCS (Options.IdleProcs): a handler run inside another
// program should come from NewWithOptions.
func New() pluginapi.Handler { return NewWithOptions(OptionsFromEnv(os.Getenv)) }

// NewWithOptions returns the http handler with explicit options.
func NewWithOptions(opts Options) pluginapi.Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	dialer := &net.Dialer{Timeout: dialTimeout, Control: opts.Guard.control}
	h := &handler{opts: opts, burst: newBurster(dialer.DialContext)}
	h.burst.procs = newProcsGate(opts.IdleProcs)
	for i, insecure := range []bool{false, true} {
		h.clients[i] = newClient(dialer, insecure)
		h.burstClients[i] = &nethttp.Client{
			Transport:     &burstTransport{normal: h.clients[i].Transport, b: h.burst},
			CheckRedirect: checkRedirect,
		}
	}
	return h
}

// RunsBeforeStartAt makes the SDK call Run as soon as a run arrives: Run
// builds the request and readies a connection ahead, and sends it at
// StartAt (see burstTransport).
func (h *handler) RunsBeforeStartAt() bool { return true }

// Close closes the idle connections (the SDK calls it when the plugin
// stops).
func (h *handler) Close() error {
	h.burst.close()
	for _, c := range h.clients {
		c.CloseIdleConnections()
	}
	return nil
}

func (h *handler) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Sends an HTTP(S) request; success is an expected status (default any 2xx) and, optionally, a body matching a regular expression.",
		ParamsSchema: json.RawMessage(paramsSchema),
	}, nil
}

func (h *handler) Validate(_ context.Context, params json.RawMessage) error {
	p, err := parseParams(params)
	if err != nil {
		return err
	}
	return checkLiteralHost(h.opts.Guard, p.url)
}

// Run sends the request. Called before req.StartAt, it prepares the
// request and its connection, sends at StartAt and reports nothing before
// it; when ctx ends before StartAt it sends nothing (the result is then
// "killed" or "timeout"). A response with an unexpected status fails the run
// with the status code as exit code; a body not matching body_regex fails it
// with exit code 1. When ctx is done the run fails with "timeout" or
// "killed". An error comes with a failed result when no response was
// received: permanent for a refused destination or a bad request,
// retryable for network and TLS failures.
func (h *handler) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	h.burst.procs.settle()
	early := time.Until(req.StartAt) > 0
	// hold keeps a result from being reported before StartAt.
	hold := func() bool { return !early || waitctx.Until(ctx, req.StartAt) }
	p, err := parseParams(req.Params)
	if err != nil {
		if !hold() {
			return ctxResult(ctx), nil
		}
		return failed(-1, err.Error()), err
	}
	if ctx.Err() != nil {
		return ctxResult(ctx), nil //nolint:nilerr // a run stopped by its context is a result, not a handler error
	}
	start := time.Now()
	if early {
		start = req.StartAt
	}
	reqCtx := ctx
	if p.TimeoutSeconds > 0 { // counted from the start, not from an early call
		var cancel context.CancelFunc
		reqCtx, cancel = context.WithDeadline(ctx, start.Add(time.Duration(p.TimeoutSeconds)*time.Second))
		defer cancel()
	}
	sendCtx := reqCtx
	if early {
		sendCtx = withBurst(reqCtx, req.StartAt)
	}
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	}
	hreq, err := nethttp.NewRequestWithContext(sendCtx, p.Method, p.url.String(), body)
	if err != nil {
		if !hold() {
			return ctxResult(ctx), nil
		}
		err = pluginapi.Permanent(fmt.Errorf("building the request: %w", err))
		return failed(-1, err.Error()), err
	}
	for k, v := range p.Headers {
		if strings.EqualFold(k, "Host") {
			hreq.Host = v
			continue
		}
		hreq.Header.Set(k, v)
	}
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", "cronix-http/"+Version)
	}
	if req.FireID != "" {
		hreq.Header.Set(FireIDHeader, req.FireID) // the same on every attempt: receivers can dedupe
	}

	clients := &h.clients
	if early {
		clients = &h.burstClients
	}
	client := clients[0]
	if p.InsecureSkipVerify {
		client = clients[1]
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return h.requestFailed(ctx, reqCtx, p, err)
	}
	defer resp.Body.Close()
	head := fmt.Appendf(nil, "%s %s\n%s %s (%d ms)\n\n", p.Method, p.url.Redacted(), resp.Proto, resp.Status, time.Since(start).Milliseconds())
	if resp.ContentLength < 0 || resp.ContentLength > wholeBody {
		_, _ = out.Write(head) // shown while a long or unsized body is read
		head = nil
	}
	captured, truncated, readErr := h.capture(resp.Body, out, head)
	if readErr != nil {
		if ctx.Err() != nil {
			return ctxResult(ctx), nil
		}
		if reqCtx.Err() != nil {
			return failed(-1, fmt.Sprintf("request timed out after %ds while reading the response body", p.TimeoutSeconds)), nil
		}
		err = pluginapi.Retryable(fmt.Errorf("reading the response body: %w", readErr))
		return failed(-1, err.Error()), err
	}
	if truncated {
		fmt.Fprintf(out, "\n[response body truncated at %d bytes]\n", h.opts.MaxBody)
	}
	if !statusExpected(resp.StatusCode, p.ExpectedStatus) {
		return failed(resp.StatusCode, fmt.Sprintf("unexpected status %s (expected %s)", resp.Status, expectedText(p.ExpectedStatus))), nil
	}
	if p.regex != nil && !p.regex.Match(captured) {
		return failed(1, fmt.Sprintf("response body does not match body_regex %q", p.BodyRegex)), nil
	}
	return pluginapi.Result{Status: pluginapi.StatusSuccess, Message: resp.Status}, nil
}

// newClient builds a client whose every new connection (redirects
// included) goes through the guarded dialer, with no proxy. Connections are
// kept alive and reused (up to maxIdlePerHost idle per host, closed after
// idleTimeout); a pooled connection was checked by the Guard when it was
// dialled, and goes to that checked address whatever the host's name
// resolves to later. Runs of the same insecure setting share the client,
// so a connection made without certificate verification never serves a
// job that asks for it.
func newClient(dialer *net.Dialer, insecure bool) *nethttp.Client {
	transport := &nethttp.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: tlsTimeout,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: insecure}, //nolint:gosec // the job asked for it explicitly
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     idleTimeout,
	}
	return &nethttp.Client{Transport: transport, CheckRedirect: checkRedirect}
}

// checkRedirect is the clients' redirect policy.
func checkRedirect(r *nethttp.Request, via []*nethttp.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
		return fmt.Errorf("redirect to unsupported scheme %q", r.URL.Scheme)
	}
	return nil
}

// chunks are capture's read buffers: a fresh 32 KiB per run was most of
// what the plugin allocated at thousands of runs a second (its GC then ran
// a few times a second, right as the next second's responses came in).
// Neither out nor the captured copy keeps a reference to a chunk.
var chunks = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// wholeBody is the largest Content-Length whose body goes to the output
// in one write with the status lines: each write of a run's output is a
// message to the node sent at once (pluginapi), and at 3,000 runs a second
// the second message per run cost the plugin 5-10 % and the node 5 % of
// their CPU, spent right as the targets were answering.
const wholeBody = 16 << 10

// capture copies up to MaxBody bytes of body to out and returns them; it
// reports whether the body was longer. A non-nil head is written before
// the body, in one write with its first bytes.
func (h *handler) capture(body io.Reader, out io.Writer, head []byte) (captured []byte, truncated bool, err error) {
	defer func() {
		if head != nil { // no body bytes came
			_, _ = out.Write(head)
		}
	}()
	var buf []byte
	cp := chunks.Get().(*[]byte)
	defer chunks.Put(cp)
	chunk := *cp
	limit := h.opts.MaxBody
	for {
		n, rerr := body.Read(chunk)
		if n > 0 {
			take := int64(n)
			if room := limit - int64(len(buf)); take > room {
				take = room
				truncated = true
			}
			buf = append(buf, chunk[:take]...)
			if head != nil {
				_, _ = out.Write(append(head, chunk[:take]...))
				head = nil
			} else {
				_, _ = out.Write(chunk[:take])
			}
			if truncated {
				return buf, true, nil
			}
		}
		if errors.Is(rerr, io.EOF) {
			return buf, false, nil
		}
		if rerr != nil {
			return buf, false, rerr
		}
	}
}

// requestFailed maps a failed client.Do to the run's outcome.
func (h *handler) requestFailed(ctx, reqCtx context.Context, p parsed, err error) (pluginapi.Result, error) {
	if b, ok := asBlocked(err); ok {
		err = pluginapi.Permanent(fmt.Errorf("%s %s: %w", p.Method, p.url.Redacted(), b))
		return failed(-1, err.Error()), err
	}
	if ctx.Err() != nil {
		return ctxResult(ctx), nil //nolint:nilerr // the run was stopped: that is its result
	}
	if reqCtx.Err() != nil {
		return failed(-1, fmt.Sprintf("request timed out after %ds", p.TimeoutSeconds)), nil //nolint:nilerr // a timed-out request is a failed run
	}
	err = pluginapi.Retryable(fmt.Errorf("%s %s: %w", p.Method, p.url.Redacted(), unwrapURLError(err)))
	return failed(-1, err.Error()), err
}

// unwrapURLError drops net/url's "Get \"...\": " prefix, which repeats the
// unredacted URL.
func unwrapURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

func statusExpected(code int, expected []int) bool {
	if len(expected) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(expected, code)
}

func expectedText(expected []int) string {
	if len(expected) == 0 {
		return "2xx"
	}
	parts := make([]string, len(expected))
	for i, c := range expected {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ", ")
}

func failed(code int, msg string) pluginapi.Result {
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: code, Message: msg}
}

func ctxResult(ctx context.Context) pluginapi.Result {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return failed(-1, "timeout")
	}
	return failed(-1, "killed")
}
