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
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// receiver is an httptest server that records when each request arrived
// and counts the connections made to it.
type receiver struct {
	*httptest.Server
	conns atomic.Int32
	mu    sync.Mutex
	hits  map[string][]time.Time // by path
}

func newReceiver(t *testing.T, h nethttp.HandlerFunc) *receiver {
	t.Helper()
	rc := &receiver{hits: map[string][]time.Time{}}
	rc.Server = httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		now := time.Now()
		rc.mu.Lock()
		rc.hits[r.URL.Path] = append(rc.hits[r.URL.Path], now)
		rc.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	rc.Config.ConnState = func(_ net.Conn, s nethttp.ConnState) {
		if s == nethttp.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) arrivals(path string) []time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]time.Time(nil), rc.hits[path]...)
}

// runAt runs p with StartAt at (zero: the normal path).
func runAt(ctx context.Context, t *testing.T, h pluginapi.Handler, p map[string]any, at time.Time) (pluginapi.Result, string, error) {
	t.Helper()
	params, err := json.Marshal(p)
	require.NoError(t, err)
	var out plugintest.Output
	res, err := h.Run(ctx, pluginapi.Request{FireID: "1-1", JobID: 1, Params: params, StartAt: at}, &out)
	return res, out.String(), err
}

func newLoopbackHandler(t *testing.T) *handler {
	t.Helper()
	h, _ := NewWithOptions(Options{Guard: Guard{AllowLoopback: true}}).(*handler)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// TestBurst: runs called before one StartAt all arrive at the receiver no
// earlier than it, each on its own connection dialled ahead; the next
// burst reuses those connections.
func TestBurst(t *testing.T) {
	t.Parallel()
	const n = 40
	rc := newReceiver(t, nil)
	h := newLoopbackHandler(t)
	for round := range 2 {
		at := time.Now().Add(500 * time.Millisecond)
		runAllAt(t.Context(), t, h, n, at, rc.URL, func(int) string { return fmt.Sprintf("/b%d", round) }, false)
		arr := rc.arrivals(fmt.Sprintf("/b%d", round))
		require.Len(t, arr, n)
		for _, a := range arr {
			require.False(t, a.Before(at), "a request arrived %s before its StartAt", at.Sub(a))
		}
		require.Equal(t, int32(n), rc.conns.Load(), "round %d: one connection per concurrent run, and the second burst reuses them", round)
		require.Equal(t, n, h.burst.idleConns())
	}
}

// The SDK calls the handler before StartAt (it is an EarlyRunner) over
// real gRPC, and the request still arrives no earlier than StartAt.
func TestBurstThroughTheSDK(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h := plugintest.Connect(t, loopbackOK())
	at := time.Now().Add(300 * time.Millisecond)
	res, out, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/x"}, at)
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
	arr := rc.arrivals("/x")
	require.Len(t, arr, 1)
	require.False(t, arr[0].Before(at))
}

// A run cancelled before its StartAt sends nothing, even with its
// connection dialled; the connection stays pooled.
func TestBurstCancelledBeforeStartAtSendsNothing(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h := newLoopbackHandler(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan pluginapi.Result, 1)
	go func() {
		res, _, _ := runAt(ctx, t, h, map[string]any{"url": rc.URL + "/never", "method": "POST", "body": "x"}, time.Now().Add(time.Hour))
		done <- res
	}()
	require.Eventually(t, func() bool { return h.burst.waiting() == 1 }, 10*time.Second, 5*time.Millisecond, "the run waits for its burst")
	// The server counts the connection when its accept loop gets to it,
	// which may be after the client's dial returned.
	require.Eventually(t, func() bool { return rc.conns.Load() == 1 }, 10*time.Second, 5*time.Millisecond,
		"with its connection dialled ahead")
	cancel()
	res := <-done
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "killed"}, res)
	require.Empty(t, rc.arrivals("/never"))
	require.Equal(t, 1, h.burst.idleConns())
	require.Zero(t, h.burst.waiting())
	h.burst.gmu.Lock()
	require.Empty(t, h.burst.groups, "nothing of a cancelled run stays until its instant")
	h.burst.gmu.Unlock()

	// https stays on the normal transport, held until StartAt: cancelled
	// before, it does not even connect.
	tls := httptest.NewUnstartedServer(nethttp.NotFoundHandler())
	var tlsConns atomic.Int32
	tls.Config.ConnState = func(net.Conn, nethttp.ConnState) { tlsConns.Add(1) }
	tls.StartTLS()
	t.Cleanup(tls.Close)
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	res, _, err := runAt(ctx, t, h, map[string]any{"url": tls.URL, "insecure_skip_verify": true}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, "timeout", res.Message)
	require.Zero(t, tlsConns.Load())
}

// The burst path dials through the Guard: a loopback target is refused
// (permanently, before anything is sent) unless the node allows it.
func TestBurstGoesThroughTheGuard(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	strict := NewWithOptions(Options{})
	for _, u := range []string{rc.URL, "http://localhost:" + port} {
		_, _, err := runAt(t.Context(), t, strict, map[string]any{"url": u + "/x"}, time.Now().Add(100*time.Millisecond))
		require.ErrorContains(t, err, "refusing to connect to")
		require.ErrorContains(t, err, "loopback address")
		require.True(t, pluginapi.IsPermanent(err))
	}
	require.Zero(t, rc.conns.Load())
	require.Empty(t, rc.arrivals("/x"))

	res, _, err := runAt(t.Context(), t, newLoopbackHandler(t), map[string]any{"url": rc.URL + "/x"}, time.Now().Add(100*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
}

// A redirect is followed by the normal transport: the first request is
// sent once, the next hop once, and the next hop is checked by the Guard.
func TestBurstFollowsRedirectsOnce(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/r":
			nethttp.Redirect(w, r, "/ok", nethttp.StatusFound)
		case "/meta":
			nethttp.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", nethttp.StatusFound)
		default:
			_, _ = io.WriteString(w, "landed")
		}
	})
	h := newLoopbackHandler(t)
	res, out, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/r", "body_regex": "^landed$"}, time.Now().Add(100*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
	require.Len(t, rc.arrivals("/r"), 1)
	require.Len(t, rc.arrivals("/ok"), 1)

	_, _, err = runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/meta"}, time.Now().Add(100*time.Millisecond))
	require.ErrorContains(t, err, "refusing to connect to 169.254.169.254: link-local address")
	require.True(t, pluginapi.IsPermanent(err))
}

// A response with Connection: close is read in full and its connection is
// not kept; the next run dials anew.
func TestBurstConnectionClose(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	h := newLoopbackHandler(t)
	for i := range 2 {
		res, out, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/c", "body_regex": "^bye$"}, time.Now().Add(100*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
		require.Zero(t, h.burst.idleConns())
		require.Equal(t, int32(i+1), rc.conns.Load())
	}
}

// A pooled connection the server closed meanwhile: a GET is sent again on
// a fresh connection.
func TestBurstRetriesAClosedPooledConnection(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	h := newLoopbackHandler(t)
	res, _, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/a"}, time.Now().Add(50*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status)
	require.Equal(t, 1, h.burst.idleConns())
	rc.CloseClientConnections()
	res, out, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/a"}, time.Now().Add(50*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, pluginapi.StatusSuccess, res.Status, out)
	require.Len(t, rc.arrivals("/a"), 2)
	require.Equal(t, int32(2), rc.conns.Load())
}

// The timeout counts from StartAt, not from the early call, with the same
// message as on the normal path.
func TestBurstTimeoutCountsFromStartAt(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	rc := newReceiver(t, func(_ nethttp.ResponseWriter, r *nethttp.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	h := newLoopbackHandler(t)
	at := time.Now().Add(1500 * time.Millisecond)
	res, _, err := runAt(t.Context(), t, h, map[string]any{"url": rc.URL + "/slow", "timeout_seconds": 1}, at)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: -1, Message: "request timed out after 1s"}, res)
	require.False(t, time.Now().Before(at.Add(time.Second)), "timed out before StartAt + 1s")
	require.Len(t, rc.arrivals("/slow"), 1)
}

// The burst path and the normal path give the same results and output
// (but for the response time) for the same responses.
func TestBurstAndNormalPathsAgree(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/fail":
			nethttp.Error(w, "broken", nethttp.StatusInternalServerError)
		case "/big":
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 40 { // 2.5 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(nethttp.StatusCreated)
			fmt.Fprintf(w, "%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("X-Token"), body)
		case "/head":
			w.Header().Set("Content-Length", "10")
		default:
			_, _ = io.WriteString(w, `{"status":"degraded"}`)
		}
	})
	big := strings.Repeat("y", burstMaxBody+1)
	cases := []map[string]any{
		{"url": rc.URL + "/ok"},
		{"url": rc.URL + "/fail"},
		{"url": rc.URL + "/fail", "expected_status": []int{500, 503}},
		{"url": rc.URL + "/ok", "body_regex": `"status":"ok"`},
		{"url": rc.URL + "/ok", "body_regex": `"status":"degraded"`},
		{"url": rc.URL + "/ok", "expected_status": []int{204}},
		{"url": rc.URL + "/big"},
		{"url": rc.URL + "/head", "method": "HEAD"},
		{"method": "PUT", "url": rc.URL + "/echo", "headers": map[string]string{"X-Token": "s3cret"}, "body": `{"n":1}`, "expected_status": []int{201}},
		{"method": "POST", "url": rc.URL + "/echo", "body": big, "expected_status": []int{201}, "body_regex": "y{16385}"},
		{"url": "http://user:pw@" + strings.TrimPrefix(rc.URL, "http://") + "/ok"},
	}
	took := regexp.MustCompile(`\(\d+ ms\)`)
	h := newLoopbackHandler(t)
	for _, c := range cases {
		wantRes, wantOut, wantErr := runAt(t.Context(), t, h, c, time.Time{})
		for range 2 { // a fresh connection, then a pooled one
			res, out, err := runAt(t.Context(), t, h, c, time.Now().Add(50*time.Millisecond))
			require.Equal(t, wantErr, err, c)
			require.Equal(t, wantRes, res, c)
			require.Equal(t, took.ReplaceAllString(wantOut, ""), took.ReplaceAllString(out, ""), c)
		}
	}
	require.Len(t, rc.arrivals("/big"), 3, "each case ran once normally and twice through the burst")
}

// A run called early whose params are bad reports so at StartAt, not
// before.
func TestBurstReportsNothingBeforeStartAt(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(300 * time.Millisecond)
	res, _, err := runAt(t.Context(), t, newLoopbackHandler(t), map[string]any{"url": "ftp://x"}, at)
	require.Error(t, err)
	require.Equal(t, pluginapi.StatusFailed, res.Status)
	require.False(t, time.Now().Before(at), "reported before StartAt")
}

// TestLargeBurstIsWrittenInParallelParts: a burst large enough to be split
// among parallel writers still sends every request once, none before its
// StartAt, and each run gets its own response.
func TestLargeBurstIsWrittenInParallelParts(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, burstWriters(burstMinPerWriter*2-1, 1), "one CPU: one writer")
	require.Equal(t, 1, burstWriters(burstMinPerWriter*2-1, 2), "too few for two")
	require.Equal(t, 2, burstWriters(burstMinPerWriter*2, 2))
	require.Equal(t, 4, burstWriters(10_000, 4))
	const n = burstMinPerWriter*3 + 7 // three parts on 3+ CPUs, two on 2: parts of unequal length
	rc := newReceiver(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	h := newLoopbackHandler(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	at := time.Now().Add(time.Second)
	runAllAt(ctx, t, h, n, at, rc.URL, func(i int) string { return fmt.Sprintf("/p%d", i) }, true)
	for i := range n {
		arr := rc.arrivals(fmt.Sprintf("/p%d", i))
		require.Len(t, arr, 1, "request %d", i)
		require.False(t, arr[0].Before(at), "request %d arrived %s before its StartAt", i, at.Sub(arr[0]))
	}
}

// TestProcsGate: the gate puts the process on its idle Ps at its first
// run, gives it its busy Ps from the first burst in to the last one out,
// and its idle Ps again after; no gate when
// idle is 0 or not below GOMAXPROCS. Not parallel: it sets the test
// process's GOMAXPROCS (while no parallel test runs).
func TestProcsGate(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	require.Nil(t, newProcsGate(0))
	require.Nil(t, newProcsGate(3))
	g := newProcsGate(1)
	require.Equal(t, 3, g.writers())
	g.settle()
	require.Equal(t, 1, runtime.GOMAXPROCS(0), "the first run settles the process on its idle Ps")
	g.enter()
	require.Equal(t, 3, runtime.GOMAXPROCS(0))
	g.enter()
	g.leave()
	require.Equal(t, 3, runtime.GOMAXPROCS(0), "a burst is still being written")
	g.leave()
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	g.enter()
	require.Equal(t, 3, runtime.GOMAXPROCS(0))
	g.leave()
	require.Equal(t, runtime.GOMAXPROCS(0), (*procsGate)(nil).writers(), "no gate: the process's GOMAXPROCS")
}

// procsRecorder records the process's GOMAXPROCS at each write on the
// connections it wraps.
type procsRecorder struct {
	mu     sync.Mutex
	writes []int
}

// dialer wraps dial so that its connections record their writes.
func (r *procsRecorder) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return procsConn{Conn: c, r: r}, nil
	}
}

// take returns the writes recorded so far and forgets them.
func (r *procsRecorder) take() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

type procsConn struct {
	net.Conn
	r *procsRecorder
}

func (c procsConn) Write(p []byte) (int, error) {
	c.r.mu.Lock()
	c.r.writes = append(c.r.writes, runtime.GOMAXPROCS(0))
	c.r.mu.Unlock()
	return c.Conn.Write(p)
}

// TestBurstWritesOnBusyProcsAndReturnsToIdle: with IdleProcs, the first
// run puts the process on its idle Ps; a burst large enough for parallel
// writers is written with every P and leaves the process on its idle Ps
// again; a burst of one part is written on the idle Ps. Not parallel: it
// sets the test process's GOMAXPROCS.
func TestBurstWritesOnBusyProcsAndReturnsToIdle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	rc := newReceiver(t, func(w nethttp.ResponseWriter, r *nethttp.Request) { _, _ = io.WriteString(w, r.URL.Path) })
	h, _ := NewWithOptions(Options{Guard: Guard{AllowLoopback: true}, IdleProcs: 1}).(*handler)
	t.Cleanup(func() { _ = h.Close() })
	rec := &procsRecorder{}
	h.burst.dial = rec.dialer(h.burst.dial)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	runAllAt(ctx, t, h, 3, time.Now().Add(500*time.Millisecond), rc.URL, func(i int) string { return fmt.Sprintf("/s%d", i) }, true)
	require.Equal(t, []int{1, 1, 1}, rec.take(), "one part: written on the idle Ps the first run settled")

	// A burst of two parts, every request registered before it is fired
	// (its own instant is an hour away), so it cannot split in two.
	const n = burstMinPerWriter * 2
	u, err := url.Parse(rc.URL)
	require.NoError(t, err)
	at := time.Now().Add(time.Hour)
	written := make(chan writeResult, n)
	for i := range n {
		pc, _, err := h.burst.get(ctx, hostPort(u))
		require.NoError(t, err)
		t.Cleanup(pc.close)
		wire := fmt.Appendf(nil, "GET /g%d HTTP/1.1\r\nHost: %s\r\n\r\n", i, u.Host)
		go func() {
			r, _ := h.burst.send(ctx, pc, wire, at)
			written <- r
		}()
	}
	require.Eventually(t, func() bool { return h.burst.waiting() == n }, 10*time.Second, 5*time.Millisecond)
	h.burst.fire(at.UnixNano())
	for range n {
		require.NoError(t, (<-written).err)
	}
	writes := rec.take()
	require.Len(t, writes, n)
	for i, p := range writes {
		require.Equal(t, 2, p, "write %d", i)
	}
	require.Equal(t, 1, runtime.GOMAXPROCS(0), "back to the idle Ps after the burst")
}

// runAllAt runs n runs of h at once, run i a GET of base+path(i) starting
// at at, and fails unless each succeeds; with echoed, each run's output
// must also hold its own path (the receiver echoes it).
func runAllAt(ctx context.Context, t *testing.T, h *handler, n int, at time.Time, base string, path func(int) string, echoed bool) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, out, err := runAt(ctx, t, h, map[string]any{"url": base + path(i)}, at)
			if err == nil && (res.Status != pluginapi.StatusSuccess || echoed && !strings.Contains(out, path(i))) {
				err = fmt.Errorf("run %d: %+v\n%s", i, res, out)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
