package pluginapi

import (
	"container/heap"
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// wireWaitMax bounds how long a write of run output waits for the
// transport to put it on the connection.
const wireWaitMax = 20 * time.Millisecond

// wireTracker counts the writes gRPC's transport makes on the plugin's
// connections, so a run's output writer can wait until what it sent has
// reached the kernel: once there, the host receives it even if the plugin
// process crashes right after (a panic in a handler's goroutine).
//
// A finished write wakes only the waiters it releases (a heap by mark), not
// every waiter: in a burst thousands of runs wait at once and the transport
// makes hundreds of writes, so waking them all on each write grows with
// waiters × writes.
type wireTracker struct {
	mu      sync.Mutex
	started uint64 // connection writes begun
	done    uint64 // connection writes finished, in order of beginning
	waiters wireWaiters
	maxWait time.Duration // wireWaitMax
}

func newWireTracker() *wireTracker { return &wireTracker{maxWait: wireWaitMax} }

// mark is called right after a message was handed to gRPC; wait(mark)
// returns once a connection write that began after it has finished, or
// after wireWaitMax (it reports which). The transport writes queued
// messages in order and flushes when its queue is empty, so for output
// smaller than its buffer that write carries the message.
func (t *wireTracker) mark() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

func (t *wireTracker) wait(mark uint64) (released bool) {
	t.mu.Lock()
	if t.done > mark {
		t.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	heap.Push(&t.waiters, wireWaiter{mark: mark, ch: ch})
	t.mu.Unlock()
	// A waiter that times out stays in the heap until a later write
	// releases it; a connection that never writes again is one whose sends
	// fail, and a failed send stops its writer from waiting.
	timer := time.NewTimer(t.maxWait)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		return false
	}
}

func (t *wireTracker) begin() {
	t.mu.Lock()
	t.started++
	t.mu.Unlock()
}

func (t *wireTracker) end() {
	t.mu.Lock()
	t.done++
	for len(t.waiters) > 0 && t.waiters[0].mark < t.done {
		close(heap.Pop(&t.waiters).(wireWaiter).ch)
	}
	t.mu.Unlock()
}

// wireWaiter is a wait for the first write finished after mark.
type wireWaiter struct {
	mark uint64
	ch   chan struct{} // closed when released
}

// wireWaiters is a min-heap of waiters by mark (container/heap).
type wireWaiters []wireWaiter

func (h wireWaiters) Len() int           { return len(h) }
func (h wireWaiters) Less(i, j int) bool { return h[i].mark < h[j].mark }
func (h wireWaiters) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wireWaiters) Push(x any)        { *h = append(*h, x.(wireWaiter)) }
func (h *wireWaiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = wireWaiter{}
	*h = old[:len(old)-1]
	return w
}

// trackedConn reports its writes to a wireTracker.
type trackedConn struct {
	net.Conn
	t *wireTracker
}

func (c trackedConn) Write(p []byte) (int, error) {
	c.t.begin()
	defer c.t.end()
	return c.Conn.Write(p)
}

// trackingCreds are gRPC server credentials that add no security of their
// own (go-plugin's optional TLS wraps the listener below them) and wrap
// each connection in a trackedConn.
type trackingCreds struct {
	credentials.TransportCredentials
	t *wireTracker
}

func newTrackingCreds(t *wireTracker) credentials.TransportCredentials {
	return trackingCreds{TransportCredentials: insecure.NewCredentials(), t: t}
}

func (c trackingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return trackedConn{Conn: conn, t: c.t}, info, nil
}

func (c trackingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
}

func (c trackingCreds) Clone() credentials.TransportCredentials {
	return trackingCreds{TransportCredentials: c.TransportCredentials.Clone(), t: c.t}
}

// grpcServerFunc is go-plugin's GRPCServer constructor with the tracker's
// credentials.
func grpcServerFunc(t *wireTracker) func([]grpc.ServerOption) *grpc.Server {
	return func(opts []grpc.ServerOption) *grpc.Server {
		return grpc.NewServer(append(opts, grpc.Creds(newTrackingCreds(t)))...)
	}
}
