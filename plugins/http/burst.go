package http

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronix/cronix/internal/waitctx"
)

// The burst path: a run handed over before its start time (Request.StartAt,
// see pluginapi.EarlyRunner) builds and serialises its request at once and
// takes (or dials) a connection ahead; at StartAt one tight loop per CPU
// writes its share of the requests due at that instant, and each run then
// reads its own response. Thousands of requests due at one second then
// leave within a few milliseconds instead of each going through
// net/http's transport (pool lock, hand-offs between its read and write
// goroutines) at the second.
const (
	// burstStaleAfter: a raw connection idle longer than this is closed
	// rather than reused (servers commonly close idle keep-alive
	// connections after 5 s, Node.js's default); dialling a new one
	// happens before the second, so it costs the run nothing.
	burstStaleAfter = 4 * time.Second
	// burstWriteTimeout bounds the writes of one burst.
	burstWriteTimeout = 2 * time.Second
	// burstMaxBody: a request with a larger (or unknown-length) body goes
	// through the normal transport at StartAt, so one slow write does not
	// hold up the burst.
	burstMaxBody = 16 << 10
)

// burstKey is the context key of a run's burstSlot.
type burstKey struct{}

// burstSlot marks the request of a run called before its StartAt; only
// the first round trip of the run (not a redirect's) claims it.
type burstSlot struct {
	at      time.Time
	claimed atomic.Bool
}

func withBurst(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, burstKey{}, &burstSlot{at: at})
}

// burstTransport is the RoundTripper of the clients used for runs called
// before their StartAt. The first request of such a run goes out in its
// StartAt's burst (http:// with a small body) or through the normal
// transport once StartAt has come (https://, credentials in the URL, a
// large body); every other request (a redirect's next hop, a run without
// a future StartAt) goes to the normal transport at once. The Client
// around it follows redirects with the same rules as the normal one.
type burstTransport struct {
	normal nethttp.RoundTripper
	b      *burster
}

func (t *burstTransport) RoundTrip(req *nethttp.Request) (*nethttp.Response, error) {
	slot, _ := req.Context().Value(burstKey{}).(*burstSlot)
	if slot == nil || !slot.claimed.CompareAndSwap(false, true) {
		return t.normal.RoundTrip(req)
	}
	if !burstable(req) {
		if !waitctx.Until(req.Context(), slot.at) {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, req.Context().Err()
		}
		return t.normal.RoundTrip(req)
	}
	return t.b.roundTrip(req, slot.at)
}

// burstable reports whether req can be sent raw: plain http, no
// credentials for the transport to turn into a header, a known small body.
func burstable(req *nethttp.Request) bool {
	if req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	if req.Body == nil || req.Body == nethttp.NoBody {
		return true
	}
	return req.ContentLength > 0 && req.ContentLength <= burstMaxBody
}

// replayable: net/http's rule for resending a request on a fresh
// connection after a reused one failed.
func replayable(req *nethttp.Request) bool {
	switch req.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// rawConn is a keep-alive connection of the burst path.
type rawConn struct {
	conn      net.Conn
	br        *bufio.Reader
	cr        *countingReader
	addr      string
	idleSince time.Time
}

func (pc *rawConn) close() { _ = pc.conn.Close() }

// countingReader counts the bytes read from a connection, so a failure
// before any response byte can be told apart.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Entry states.
const (
	entryPending int32 = iota
	entryWriting
	entryCancelled
)

type writeResult struct {
	n   int
	err error
}

// burstEntry is one request registered for a burst.
type burstEntry struct {
	conn  net.Conn
	wire  []byte
	state atomic.Int32
	done  chan writeResult // buffered: the burst never blocks on it
}

// burster owns the burst path's idle connections (per host:port, at most
// maxIdlePerHost each and maxIdle in all, closed once idle longer than
// burstStaleAfter) and the bursts waiting for their instant.
type burster struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	idle   map[string][]*rawConn // oldest first
	nidle  int
	reaper *time.Timer // armed while idle connections exist
	closed bool

	gmu    sync.Mutex
	groups map[int64]*burstGroup // by StartAt (Unix ns)

	procs *procsGate // nil: GOMAXPROCS is left alone (Options.IdleProcs 0)
}

// procsGate sets the process's GOMAXPROCS to busy while a burst is being
// written and back to idle once no burst is (see Options.IdleProcs).
type procsGate struct {
	mu         sync.Mutex
	active     int // bursts being written
	idle, busy int
	settled    sync.Once
}

// newProcsGate returns the gate for idle Ps between bursts and the
// process's current GOMAXPROCS during them; nil (no gate) when idle is 0
// or not below it.
func newProcsGate(idle int) *procsGate {
	busy := runtime.GOMAXPROCS(0)
	if idle <= 0 || idle >= busy {
		return nil
	}
	return &procsGate{idle: idle, busy: busy}
}

// settle puts the process on its idle Ps at its first run (the handler
// is not built only to serve: New also describes it to the server), unless
// a burst is being written.
func (g *procsGate) settle() {
	if g == nil {
		return
	}
	g.settled.Do(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.active == 0 {
			runtime.GOMAXPROCS(g.idle)
		}
	})
}

// writers is the number of CPUs a burst may write with: the gate's busy
// Ps, or without a gate the process's GOMAXPROCS.
func (g *procsGate) writers() int {
	if g == nil {
		return runtime.GOMAXPROCS(0)
	}
	return g.busy
}

// enter is called before a burst's writes: the first one in gives the
// process its busy Ps.
func (g *procsGate) enter() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active == 0 {
		runtime.GOMAXPROCS(g.busy)
	}
	g.active++
}

// leave is called once a burst's runs were told their writes: the last one
// out takes the process back to its idle Ps.
func (g *procsGate) leave() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 {
		runtime.GOMAXPROCS(g.idle)
	}
}

// burstGroup is the requests due at one instant.
type burstGroup struct {
	entries []*burstEntry
	timer   *time.Timer
}

func newBurster(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *burster {
	return &burster{dial: dial, idle: map[string][]*rawConn{}, groups: map[int64]*burstGroup{}}
}

// hostPort is the address a URL's connection goes to.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// roundTrip sends req in the burst of at, from a pooled or freshly dialled
// connection, and reads its response. A request cancelled before at is
// never written.
func (b *burster) roundTrip(req *nethttp.Request, at time.Time) (*nethttp.Response, error) {
	ctx := req.Context()
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil { // closes the body
		return nil, fmt.Errorf("serialising the request: %w", err)
	}
	wire := buf.Bytes()
	addr := hostPort(req.URL)
	pc, reused, err := b.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	r, sent := b.send(ctx, pc, wire, at)
	if !sent {
		b.put(pc) // nothing was written: the connection is as it was
		return nil, r.err
	}
	if r.err != nil {
		pc.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if reused && (r.n == 0 || replayable(req)) {
			return b.retry(ctx, req, addr, wire)
		}
		return nil, fmt.Errorf("writing the request: %w", r.err)
	}
	resp, err := b.read(ctx, pc, req)
	if err != nil && reused && pc.cr.n == 0 && replayable(req) && ctx.Err() == nil {
		return b.retry(ctx, req, addr, wire)
	}
	return resp, err
}

// retry sends wire once more on a fresh connection (the reused one failed
// before answering), at once: StartAt has passed.
func (b *burster) retry(ctx context.Context, req *nethttp.Request, addr string, wire []byte) (*nethttp.Response, error) {
	pc, err := b.dialConn(ctx, addr)
	if err != nil {
		return nil, err
	}
	_ = pc.conn.SetWriteDeadline(time.Now().Add(burstWriteTimeout))
	if _, err := pc.conn.Write(wire); err != nil {
		pc.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("writing the request: %w", err)
	}
	return b.read(ctx, pc, req)
}

// send registers wire on pc for the burst of at and waits until it was
// written (sent) or ctx ended before (not sent: nothing was written).
func (b *burster) send(ctx context.Context, pc *rawConn, wire []byte, at time.Time) (writeResult, bool) {
	e := &burstEntry{conn: pc.conn, wire: wire, done: make(chan writeResult, 1)}
	key := at.UnixNano()
	b.gmu.Lock()
	g := b.groups[key]
	if g == nil {
		g = &burstGroup{}
		b.groups[key] = g
		g.timer = time.AfterFunc(time.Until(at), func() { b.fire(key) })
	}
	g.entries = append(g.entries, e)
	b.gmu.Unlock()
	select {
	case r := <-e.done:
		return r, true
	case <-ctx.Done():
		if e.state.CompareAndSwap(entryPending, entryCancelled) {
			b.unregister(key, e)
			return writeResult{err: ctx.Err()}, false
		}
		return <-e.done, true // being written: bounded by burstWriteTimeout
	}
}

// unregister drops a cancelled entry from its group (and the group when
// it was the last), so nothing of it stays until the instant.
func (b *burster) unregister(key int64, e *burstEntry) {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	g := b.groups[key]
	if g == nil {
		return // firing: it skips cancelled entries
	}
	if i := slices.Index(g.entries, e); i >= 0 {
		g.entries = slices.Delete(g.entries, i, i+1)
	}
	if len(g.entries) == 0 {
		g.timer.Stop()
		delete(b.groups, key)
	}
}

// fire writes every request registered for the instant key, then tells
// their runs. A large burst is split into contiguous parts written by
// parallel loops, one per CPU: a write to a local peer costs the writer
// the kernel's whole send and receive path (tens of µs on a small VM), so
// one loop of 1,000 writes took ~25 ms where two took ~15. With a procs
// gate (Options.IdleProcs), the process has every P only while it writes
// a burst of more than one part.
func (b *burster) fire(key int64) {
	b.gmu.Lock()
	g := b.groups[key]
	delete(b.groups, key)
	b.gmu.Unlock()
	if g == nil {
		return
	}
	entries := g.entries
	deadline := time.Now().Add(burstWriteTimeout)
	results := make([]writeResult, len(entries))
	w := burstWriters(len(entries), b.procs.writers())
	if w > 1 {
		b.procs.enter()
		defer b.procs.leave()
	}
	per := (len(entries) + w - 1) / w
	var wg sync.WaitGroup
	for start := per; start < len(entries); start += per {
		end := min(start+per, len(entries))
		wg.Go(func() { writeEntries(entries[start:end], results[start:end], deadline) })
	}
	writeEntries(entries[:per], results[:per], deadline)
	wg.Wait()
	// Only now are the runs told: what a run does next (read its
	// response, report its result to the node) would otherwise take CPU
	// from the writes still going.
	for i, e := range entries {
		if e.state.Load() == entryWriting {
			e.done <- results[i]
		}
	}
}

// burstMinPerWriter is the fewest requests a burst gives one writer: below
// it a second loop's start costs more than it saves.
const burstMinPerWriter = 64

// burstWriters is how many parallel loops write a burst of n requests.
func burstWriters(n, cpus int) int {
	return max(1, min(cpus, n/burstMinPerWriter))
}

// writeEntries writes each entry not cancelled, in order, into results.
func writeEntries(entries []*burstEntry, results []writeResult, deadline time.Time) {
	for i, e := range entries {
		if !e.state.CompareAndSwap(entryPending, entryWriting) {
			continue // cancelled
		}
		_ = e.conn.SetWriteDeadline(deadline)
		n, err := e.conn.Write(e.wire)
		results[i] = writeResult{n: n, err: err}
	}
}

// read reads pc's response to req. ctx's end closes the connection, which
// ends a read in progress. The response body gives pc back to the pool
// when it was read to its end and the connection may be kept alive.
func (b *burster) read(ctx context.Context, pc *rawConn, req *nethttp.Request) (*nethttp.Response, error) {
	stop := context.AfterFunc(ctx, pc.close)
	resp, err := nethttp.ReadResponse(pc.br, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != nethttp.StatusSwitchingProtocols {
		resp, err = nethttp.ReadResponse(pc.br, req) // skip informational responses
	}
	if err != nil {
		stop()
		pc.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	keep := !resp.Close && !req.Close && resp.StatusCode != nethttp.StatusSwitchingProtocols
	resp.Body = &burstBody{rc: resp.Body, pc: pc, b: b, keep: keep, stop: stop}
	return resp, nil
}

// burstBody is a response body of the burst path.
type burstBody struct {
	rc   io.ReadCloser
	pc   *rawConn
	b    *burster
	keep bool        // the connection may be kept alive
	stop func() bool // unhooks the ctx watch; false once it closed pc
	eof  bool
	once sync.Once
}

func (bb *burstBody) Read(p []byte) (int, error) {
	n, err := bb.rc.Read(p)
	if err == io.EOF { //nolint:errorlint // io.EOF is returned unwrapped by contract
		bb.eof = true
	}
	return n, err
}

// Close gives the connection back when the body was read to its end,
// else closes it (first, so closing the body does not read the rest).
func (bb *burstBody) Close() error {
	bb.once.Do(func() {
		reuse := bb.eof && bb.keep
		if !reuse {
			bb.pc.close()
		}
		err := bb.rc.Close()
		if bb.stop() && reuse && err == nil {
			bb.b.put(bb.pc)
			return
		}
		bb.pc.close()
	})
	return nil
}

// get returns an idle connection to addr that is not stale (reused), or
// dials one.
func (b *burster) get(ctx context.Context, addr string) (*rawConn, bool, error) {
	var stale []*rawConn
	b.mu.Lock()
	if list := b.idle[addr]; len(list) > 0 {
		pc := list[len(list)-1]
		if time.Since(pc.idleSince) <= burstStaleAfter {
			b.idle[addr] = list[:len(list)-1]
			b.nidle--
			b.mu.Unlock()
			return pc, true, nil
		}
		stale = list // the newest is stale: so are the others
		delete(b.idle, addr)
		b.nidle -= len(list)
	}
	b.mu.Unlock()
	for _, pc := range stale {
		pc.close()
	}
	pc, err := b.dialConn(ctx, addr)
	return pc, false, err
}

// dialConn dials addr through the guarded dialer.
func (b *burster) dialConn(ctx context.Context, addr string) (*rawConn, error) {
	c, err := b.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: c}
	return &rawConn{conn: c, br: bufio.NewReader(cr), cr: cr, addr: addr}, nil
}

// put keeps pc for a later run, unless the pool is full or closed.
func (b *burster) put(pc *rawConn) {
	if pc.br.Buffered() > 0 || pc.conn.SetDeadline(time.Time{}) != nil {
		pc.close() // unread bytes: the connection is out of step
		return
	}
	pc.cr.n = 0
	b.mu.Lock()
	if b.closed || len(b.idle[pc.addr]) >= maxIdlePerHost || b.nidle >= maxIdle {
		b.mu.Unlock()
		pc.close()
		return
	}
	pc.idleSince = time.Now()
	b.idle[pc.addr] = append(b.idle[pc.addr], pc)
	b.nidle++
	if b.reaper == nil {
		b.reaper = time.AfterFunc(burstStaleAfter, b.reap)
	}
	b.mu.Unlock()
}

// reap closes the connections idle longer than burstStaleAfter and re-arms
// itself while any stay.
func (b *burster) reap() {
	cutoff := time.Now().Add(-burstStaleAfter)
	var dead []*rawConn
	b.mu.Lock()
	for addr, list := range b.idle {
		i := 0
		for i < len(list) && list[i].idleSince.Before(cutoff) {
			i++
		}
		if i == 0 {
			continue
		}
		dead = append(dead, list[:i]...)
		b.nidle -= i
		if i == len(list) {
			delete(b.idle, addr)
		} else {
			b.idle[addr] = append(list[:0:0], list[i:]...)
		}
	}
	b.reaper = nil
	if b.nidle > 0 && !b.closed {
		b.reaper = time.AfterFunc(burstStaleAfter/2, b.reap)
	}
	b.mu.Unlock()
	for _, pc := range dead {
		pc.close()
	}
}

// idleConns is the number of idle connections (for tests).
func (b *burster) idleConns() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nidle
}

// waiting is the number of requests registered for bursts to come, but
// for cancelled ones (for tests).
func (b *burster) waiting() int {
	b.gmu.Lock()
	defer b.gmu.Unlock()
	n := 0
	for _, g := range b.groups {
		for _, e := range g.entries {
			if e.state.Load() == entryPending {
				n++
			}
		}
	}
	return n
}

// close closes the idle connections; later ones are closed when given back.
func (b *burster) close() {
	b.mu.Lock()
	b.closed = true
	if b.reaper != nil {
		b.reaper.Stop()
		b.reaper = nil
	}
	idle := b.idle
	b.idle, b.nidle = map[string][]*rawConn{}, 0
	b.mu.Unlock()
	for _, list := range idle {
		for _, pc := range list {
			pc.close()
		}
	}
}
