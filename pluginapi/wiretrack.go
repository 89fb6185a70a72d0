package pluginapi

import (
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
type wireTracker struct {
	mu      sync.Mutex
	cond    *sync.Cond
	started uint64 // connection writes begun
	done    uint64 // connection writes finished, in order of beginning
}

func newWireTracker() *wireTracker {
	t := &wireTracker{}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// mark is called right after a message was handed to gRPC; wait(mark)
// returns once a connection write that began after it has finished, or
// after wireWaitMax. The transport writes queued messages in order and
// flushes when its queue is empty, so for output smaller than its buffer
// that write carries the message.
func (t *wireTracker) mark() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

func (t *wireTracker) wait(mark uint64) {
	deadline := time.AfterFunc(wireWaitMax, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer deadline.Stop()
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.done <= mark && time.Since(start) < wireWaitMax {
		t.cond.Wait()
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
	t.cond.Broadcast()
	t.mu.Unlock()
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
