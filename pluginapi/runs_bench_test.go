package pluginapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// quickHandler writes one line and succeeds: the per-run cost of the wire
// is all there is to measure.
type quickHandler struct{}

func (quickHandler) Info(context.Context) (Info, error) {
	return Info{Name: "quick", Version: "1", ParamsSchema: json.RawMessage(`{}`)}, nil
}
func (quickHandler) Validate(context.Context, json.RawMessage) error { return nil }
func (quickHandler) Run(_ context.Context, req Request, out io.Writer) (Result, error) {
	_, _ = io.WriteString(out, "HTTP/1.1 200 OK "+req.FireID+"\n")
	return Result{Status: StatusSuccess}, nil
}

// BenchmarkBurst runs bursts of 1,000 concurrent runs over a loopback
// connection, as a node hands a second's fires to a plugin, on the Runs
// stream and on a stream per run. The plugin side is served as a plugin
// process serves it (with the wire tracker), in this process. One op is
// one run; compare ns/op, B/op and allocs/op between the two.
//
//	go test ./pluginapi -run '^$' -bench Burst -benchmem
func BenchmarkBurst(b *testing.B) {
	const burst = 1000
	for _, mux := range []bool{true, false} {
		name := "stream per run"
		if mux {
			name = "runs stream"
		}
		b.Run(name, func(b *testing.B) {
			h := serveBench(b, mux)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += burst {
				n := min(burst, b.N-done)
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						res, err := h.Run(context.Background(), Request{FireID: "1-1700000000000"}, io.Discard)
						if err != nil || res.Status != StatusSuccess {
							b.Errorf("run: %v %+v", err, res)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

// serveBench serves quickHandler on a loopback gRPC server with the
// plugin side's tracking credentials and returns the host-side Handler.
func serveBench(b *testing.B, mux bool) Handler {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &handlerPlugin{impl: quickHandler{}, tracker: newWireTracker()}
	srv := grpcServerFunc(p.tracker)(nil)
	if err := p.GRPCServer(nil, srv); err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(func() {
		cancel()
		_ = conn.Close()
		srv.Stop()
	})
	raw, err := p.GRPCClient(ctx, nil, conn)
	if err != nil {
		b.Fatal(err)
	}
	h := raw.(*grpcClient)
	if _, err := h.Info(ctx); err != nil {
		b.Fatal(err)
	}
	h.mux.Store(mux)
	return h
}
