// Package plugintest lets a handler author test a pluginapi.Handler without
// a Cronix cluster: Connect serves the handler in-process behind a real gRPC
// server and returns the host-side Handler the node would use, and
// CheckContract asserts the pluginapi contract on it.
package plugintest

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cronix/cronix/pluginapi"
)

// Connect serves h on a loopback gRPC server through the same adapters a
// plugin process uses and returns a Handler that calls it the way the node
// does: output streamed in chunks, errors and their kinds carried over the
// wire, ctx deadline and cancellation propagated. Like the node it asks
// for the handler's Info once first, so runs travel as on the node: all on
// one Runs stream. Everything is torn down when the test ends.
func Connect(t testing.TB, h pluginapi.Handler) pluginapi.Handler {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("plugintest: listen: %v", err)
	}
	p := pluginapi.GRPCPlugin(h)
	srv := grpc.NewServer()
	if err := p.GRPCServer(nil, srv); err != nil {
		t.Fatalf("plugintest: register handler: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		<-served
		t.Fatalf("plugintest: dial: %v", err)
	}
	// doneCtx plays go-plugin's "plugin process exited" context.
	doneCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	raw, err := p.GRPCClient(doneCtx, nil, conn)
	if err != nil {
		t.Fatalf("plugintest: client: %v", err)
	}
	h = raw.(pluginapi.Handler)
	// The node asks every plugin process for its Info once, before any
	// run; what it says decides how runs travel (one Runs stream for
	// all, or a stream per run), so do the same. An error here is the
	// test's to find when it calls Info itself.
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_, _ = h.Info(ctx)
	return h
}
