package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// loopbackOK is the handler the tests use: httptest servers are on loopback.
func loopbackOK() pluginapi.Handler {
	return NewWithOptions(Options{Guard: Guard{AllowLoopback: true}})
}

func run(t *testing.T, h pluginapi.Handler, p map[string]any) (pluginapi.Result, string, error) {
	t.Helper()
	params, err := json.Marshal(p)
	require.NoError(t, err)
	var out plugintest.Output
	res, err := h.Run(t.Context(), pluginapi.Request{FireID: "1-1", JobID: 1, Params: params}, &out)
	return res, out.String(), err
}

func TestContract(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	plugintest.CheckContract(t, loopbackOK(), json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL+"/ok")),
		plugintest.LongRunning(json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL+"/slow"))))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h := NewWithOptions(Options{})
	for params, field := range map[string]string{
		`{"url":"https://example.com/x"}`: "-",
		`{"url":"http://example.com","method":"post","headers":{"X-A":"b"},"body":"{}","expected_status":[200,204],"body_regex":"ok","timeout_seconds":5}`: "-",
		`{}`:                                              "url",
		`{"url":""}`:                                      "url",
		`{"url":"ftp://example.com"}`:                     "url",
		`{"url":"http://"}`:                               "url",
		`{"url":"example.com/x"}`:                         "url",
		`{"url":"http://127.0.0.1:8080/"}`:                "url",
		`{"url":"http://169.254.169.254/latest"}`:         "url",
		`{"url":"http://[::1]/"}`:                         "url",
		`{"url":"http://a.b","method":"BREW"}`:            "method",
		`{"url":"http://a.b","body_regex":"("}`:           "body_regex",
		`{"url":"http://a.b","expected_status":[9]}`:      "expected_status",
		`{"url":"http://a.b","expected_status":"200"}`:    "expected_status",
		`{"url":"http://a.b","headers":{"Bad Name":"x"}}`: "headers",
		`{"url":"http://a.b","headers":{"X":"a\nb"}}`:     "headers.X",
		`{"url":"http://a.b","timeout_seconds":-1}`:       "timeout_seconds",
		`{"url":"http://a.b","follow":true}`:              "follow",
		`"http://a.b"`:                                    "",
	} {
		err := h.Validate(t.Context(), json.RawMessage(params))
		if field == "-" {
			require.NoError(t, err, params)
			continue
		}
		ip, ok := pluginapi.AsInvalidParams(err)
		require.True(t, ok, "%s: want InvalidParams, got %v", params, err)
		require.Equal(t, field, ip.Field(), params)
	}
}

func TestRequestAndResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(nethttp.StatusCreated)
		fmt.Fprintf(w, "%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("X-Token"), body)
	}))
	t.Cleanup(srv.Close)
	res, out, err := run(t, loopbackOK(), map[string]any{
		"method": "PUT", "url": srv.URL + "/items/7", "headers": map[string]string{"X-Token": "s3cret"},
		"body": `{"n":1}`, "expected_status": []int{201}, "body_regex": `^PUT /items/7 s3cret \{"n":1\}$`,
	})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
	require.Contains(t, out, "PUT "+srv.URL+"/items/7\nHTTP/1.1 201 Created")
	require.True(t, strings.HasSuffix(out, `PUT /items/7 s3cret {"n":1}`), out)
}

func TestStatusAndBodyChecks(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/fail" {
			nethttp.Error(w, "broken", nethttp.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, `{"status":"degraded"}`)
	}))
	t.Cleanup(srv.Close)
	h := loopbackOK()

	res, out, err := run(t, h, map[string]any{"url": srv.URL + "/fail"})
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 500,
		Message: "unexpected status 500 Internal Server Error (expected 2xx)"}, res)
	require.Contains(t, out, "broken")

	res, _, err = run(t, h, map[string]any{"url": srv.URL + "/fail", "expected_status": []int{500, 503}})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)

	res, _, err = run(t, h, map[string]any{"url": srv.URL + "/ok", "body_regex": `"status":"ok"`})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.Contains(t, res.Message, "does not match body_regex")

	res, _, err = run(t, h, map[string]any{"url": srv.URL + "/ok", "expected_status": []int{204}})
	require.NoError(t, err)
	require.Equal(t, 200, res.ExitCode)
	require.Contains(t, res.Message, "expected 204")
}

func TestLoopbackIsRefusedByDefault(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(http nethttp.ResponseWriter, _ *nethttp.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	h := NewWithOptions(Options{}) // what a node without --http-allow-loopback runs

	// A literal address, and a name that resolves to loopback (only the
	// dial-time check can see that).
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/"} {
		res, _, err := run(t, h, map[string]any{"url": u})
		require.Error(t, err, u)
		require.True(t, pluginapi.IsPermanent(err), u)
		require.Contains(t, err.Error(), "refusing to connect to")
		require.Contains(t, err.Error(), "loopback address (start the node with --http-allow-loopback to allow it)")
		require.Equal(t, pluginapi.StatusFailed, res.Status)
	}
	require.Zero(t, hits.Load(), "the refused requests reached the server")
}

func TestRedirectCannotEscapeTheGuard(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", nethttp.StatusFound)
	}))
	t.Cleanup(srv.Close)
	_, _, err := run(t, NewWithOptions(Options{Guard: Guard{AllowLoopback: true, AllowPrivate: true}}), map[string]any{"url": srv.URL})
	require.ErrorContains(t, err, "refusing to connect to 169.254.169.254: link-local address")
	require.True(t, pluginapi.IsPermanent(err))
}

func TestGuardRanges(t *testing.T) {
	t.Parallel()
	strict, open := Guard{}, Guard{AllowLoopback: true, AllowPrivate: true}
	for addr, want := range map[string]string{
		"8.8.8.8":          "",
		"2606:4700::1111":  "",
		"127.0.0.1":        "loopback",
		"127.8.9.10":       "loopback",
		"::1":              "loopback",
		"::ffff:127.0.0.1": "loopback",
		"10.1.2.3":         "private",
		"172.16.0.1":       "private",
		"192.168.1.1":      "private",
		"100.64.0.1":       "private",
		"fd00::1":          "private",
		"169.254.169.254":  "link-local",
		"fe80::1":          "link-local",
		"0.0.0.0":          "unspecified",
		"::":               "unspecified",
		"224.0.0.1":        "multicast",
	} {
		ip := netip.MustParseAddr(addr)
		err := strict.Check(ip)
		if want == "" {
			require.NoError(t, err, addr)
			continue
		}
		b, ok := asBlocked(err)
		require.True(t, ok, addr)
		require.Equal(t, want, b.Class, addr)
		if want == "loopback" || want == "private" {
			require.NoError(t, open.Check(ip), addr)
		} else {
			require.Error(t, open.Check(ip), "%s can never be allowed", addr)
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{EnvAllowLoopback: "1", EnvAllowPrivate: "no"}
	opts := func() Options { return OptionsFromEnv(func(k string) string { return env[k] }) }
	require.Equal(t, Guard{AllowLoopback: true}, opts().Guard)
	require.Equal(t, DefaultIdleProcs, opts().IdleProcs, "unset")
	for v, want := range map[string]int{"0": 0, " 3 ": 3, "": DefaultIdleProcs, "x": DefaultIdleProcs, "-2": DefaultIdleProcs} {
		env[EnvIdleProcs] = v
		require.Equal(t, want, opts().IdleProcs, "%s=%q", EnvIdleProcs, v)
	}
}

func TestTLSIsVerifiedByDefault(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		_, _ = io.WriteString(w, "secure")
	}))
	t.Cleanup(srv.Close)
	h := loopbackOK()
	res, _, err := run(t, h, map[string]any{"url": srv.URL})
	require.ErrorContains(t, err, "certificate")
	require.Equal(t, pluginapi.StatusFailed, res.Status)

	res, out, err := run(t, h, map[string]any{"url": srv.URL, "insecure_skip_verify": true})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.True(t, strings.HasSuffix(out, "secure"))
}

func TestBodyIsCapped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 40 { // 2.5 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	res, out, err := run(t, loopbackOK(), map[string]any{"url": srv.URL})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Equal(t, DefaultMaxBody, strings.Count(out, "x"))
	require.Contains(t, out, fmt.Sprintf("[response body truncated at %d bytes]", DefaultMaxBody))
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(_ nethttp.ResponseWriter, r *nethttp.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	start := time.Now()
	res, _, err := run(t, loopbackOK(), map[string]any{"url": srv.URL, "timeout_seconds": 1})
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "request timed out after 1s"}, res)
	require.Less(t, time.Since(start), 5*time.Second)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err = loopbackOK().Run(ctx, pluginapi.Request{Params: json.RawMessage(fmt.Sprintf(`{"url":%q}`, srv.URL))}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "killed", res.Message)
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.NotFoundHandler())
	u := srv.URL
	srv.Close()
	_, _, err := run(t, loopbackOK(), map[string]any{"url": u})
	require.Error(t, err)
	require.True(t, pluginapi.IsRetryable(err), "%v", err)
}

// TestConnectionsAreReusedAndFireIDSent: runs calling one host share a
// keep-alive connection instead of dialling each time, and every request
// names its fire in X-Cronix-Fire-Id.
func TestConnectionsAreReusedAndFireIDSent(t *testing.T) {
	t.Parallel()
	var (
		conns atomic.Int32
		mu    sync.Mutex
		ids   []string
	)
	srv := httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get(FireIDHeader))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s nethttp.ConnState) {
		if s == nethttp.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	h := loopbackOK()
	params, err := json.Marshal(map[string]any{"url": srv.URL + "/x", "headers": map[string]string{FireIDHeader: "forged"}})
	require.NoError(t, err)
	for i := range 5 {
		var out plugintest.Output
		res, err := h.Run(t.Context(), pluginapi.Request{FireID: fmt.Sprintf("7-%d", 1000*i), JobID: 7, Params: params}, &out)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, out.String())
	}
	require.Equal(t, int32(1), conns.Load(), "sequential runs to one host should reuse one connection")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"7-0", "7-1000", "7-2000", "7-3000", "7-4000"}, ids,
		"the fire id header is the fire's, not a job header's")
}

// TestPooledConnectionDoesNotBypassTheGuard: a connection kept alive from
// an earlier run does not let a later run's redirect, or a name resolving
// to a refused address, past the Guard: both dial, and every dial is
// checked.
func TestPooledConnectionDoesNotBypassTheGuard(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/redirect" {
			nethttp.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", nethttp.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	h := NewWithOptions(Options{Guard: Guard{AllowLoopback: true, AllowPrivate: true}})
	for range 2 {
		res, out, err := run(t, h, map[string]any{"url": srv.URL + "/ok"}) // leaves a pooled connection
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
		_, _, err = run(t, h, map[string]any{"url": srv.URL + "/redirect"})
		require.ErrorContains(t, err, "refusing to connect to 169.254.169.254: link-local address")
		require.True(t, pluginapi.IsPermanent(err))
	}

	// A handler without loopback: the same name is refused on every run
	// (nothing refused is ever pooled).
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	strict := NewWithOptions(Options{})
	for range 2 {
		_, _, err := run(t, strict, map[string]any{"url": "http://localhost:" + port + "/ok"})
		require.ErrorContains(t, err, "loopback address")
	}
}

// TestInsecureConnectionsAreNotShared: a connection made without
// certificate verification (insecure_skip_verify) is never reused for a
// job that verifies.
func TestInsecureConnectionsAreNotShared(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	h := loopbackOK()
	res, out, err := run(t, h, map[string]any{"url": srv.URL, "insecure_skip_verify": true})
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
	res, _, err = run(t, h, map[string]any{"url": srv.URL})
	require.Error(t, err, "a verifying job must not get the insecure run's connection")
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.ErrorContains(t, err, "certificate")
}

// writesRecorder keeps each Write as one entry (a message to the node).
type writesRecorder struct {
	mu     sync.Mutex
	writes []string
	// wrote is told about each write, for the test to wait on.
	wrote chan string
}

func (w *writesRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes = append(w.writes, string(p))
	w.mu.Unlock()
	if w.wrote != nil {
		w.wrote <- string(p)
	}
	return len(p), nil
}

// TestSmallBodyIsOneWriteWithTheStatus: a response with a small
// Content-Length reaches the output in one write with its status lines (one
// message to the node, not two); an unsized body gets the status lines
// first, before its bytes come, so a slow body still shows its status.
func TestSmallBodyIsOneWriteWithTheStatus(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(nethttp.StatusNoContent)
		case "/stream": // no Content-Length: chunked, the body after release
			w.(nethttp.Flusher).Flush()
			<-release
			_, _ = io.WriteString(w, "late body")
		default:
			_, _ = io.WriteString(w, "small body")
		}
	}))
	t.Cleanup(srv.Close)
	h := loopbackOK()
	runOut := func(path string, out io.Writer) pluginapi.Result {
		params, err := json.Marshal(map[string]any{"url": srv.URL + path, "expected_status": []int{200, 204}})
		require.NoError(t, err)
		res, err := h.Run(t.Context(), pluginapi.Request{FireID: "1-1", JobID: 1, Params: params}, out)
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, res.Message)
		return res
	}

	var small writesRecorder
	runOut("/small", &small)
	require.Len(t, small.writes, 1, "%q", small.writes)
	require.True(t, strings.HasPrefix(small.writes[0], "GET "+srv.URL+"/small\nHTTP/1.1 200 OK ("), small.writes[0])
	require.True(t, strings.HasSuffix(small.writes[0], "ms)\n\nsmall body"), small.writes[0])

	var empty writesRecorder
	runOut("/empty", &empty)
	require.Len(t, empty.writes, 1, "%q", empty.writes)
	require.Contains(t, empty.writes[0], "HTTP/1.1 204 No Content (")

	stream := writesRecorder{wrote: make(chan string, 4)}
	done := make(chan struct{})
	go func() { defer close(done); runOut("/stream", &stream) }()
	select {
	case first := <-stream.wrote:
		require.Contains(t, first, "HTTP/1.1 200 OK (", "the status lines come before the body")
		require.NotContains(t, first, "late body")
	case <-time.After(10 * time.Second):
		t.Fatal("the status lines of an unsized body were not written before its bytes came")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run of the unsized body did not end after its body came")
	}
	require.Equal(t, "late body", strings.Join(stream.writes[1:], ""))
}
