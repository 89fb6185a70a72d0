package pluginapi

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	wirev1 "github.com/cronix/cronix/pluginapi/internal/wire"
	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// Protocol version 1, the previous major, next to the current one: a host
// talks to v1 plugins and a plugin serves v1 hosts. Version 2 only renamed
// Info to Describe and added DescribeResponse.sdk; every other message has
// the same fields and numbers, so messages convert by re-decoding their
// bytes (recast).

// recast converts between the v1 and v2 forms of one message.
func recast[T proto.Message](in proto.Message, out T) T {
	b, err := proto.Marshal(in)
	if err == nil {
		err = proto.Unmarshal(b, out)
	}
	if err != nil {
		// Same fields, same numbers: cannot fail short of a bug.
		panic("pluginapi: converting between protocol versions: " + err.Error())
	}
	return out
}

// handlerPluginV1 is the go-plugin GRPCPlugin for protocol version 1.
type handlerPluginV1 struct {
	*handlerPlugin
}

var _ plugin.GRPCPlugin = handlerPluginV1{}

func (p handlerPluginV1) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("pluginapi: no handler to serve")
	}
	wirev1.RegisterHandlerServer(s, &v1Server{v2: &grpcServer{impl: p.impl, runs: &p.runs, tracker: p.tracker}})
	return nil
}

func (p handlerPluginV1) GRPCClient(doneCtx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return newGRPCClient(v1Client{wirev1.NewHandlerClient(c)}, doneCtx, false), nil
}

// v1Server serves protocol v1 with the v2 implementation.
type v1Server struct {
	wirev1.UnimplementedHandlerServer
	v2 *grpcServer
}

func (s *v1Server) Info(ctx context.Context, _ *wirev1.InfoRequest) (*wirev1.InfoResponse, error) {
	resp, err := s.v2.Describe(ctx, &wire.DescribeRequest{})
	if err != nil {
		return nil, statusToV1(err)
	}
	return recast(resp, &wirev1.InfoResponse{}), nil
}

func (s *v1Server) Validate(ctx context.Context, req *wirev1.ValidateRequest) (*wirev1.ValidateResponse, error) {
	if _, err := s.v2.Validate(ctx, recast(req, &wire.ValidateRequest{})); err != nil {
		return nil, statusToV1(err)
	}
	return &wirev1.ValidateResponse{}, nil
}

func (s *v1Server) Run(req *wirev1.RunRequest, stream grpc.ServerStreamingServer[wirev1.RunEvent]) error {
	return s.v2.Run(recast(req, &wire.RunRequest{}), v1RunStream{stream})
}

// v1RunStream sends v2 run events on a v1 stream.
type v1RunStream struct {
	grpc.ServerStreamingServer[wirev1.RunEvent]
}

func (s v1RunStream) Send(ev *wire.RunEvent) error {
	return s.ServerStreamingServer.Send(recast(ev, &wirev1.RunEvent{}))
}

// statusToV1 rewrites the v2 Error detail of a handler error status as
// the v1 Error.
func statusToV1(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	out := status.New(st.Code(), st.Message())
	for _, d := range st.Details() {
		if we, ok := d.(*wire.Error); ok {
			if ds, derr := out.WithDetails(recast(we, &wirev1.Error{})); derr == nil {
				out = ds
			}
		}
	}
	return out.Err()
}

// v1Client calls a v1 plugin through the v2 client interface.
type v1Client struct {
	c wirev1.HandlerClient
}

var _ wire.HandlerClient = v1Client{}

func (c v1Client) Describe(ctx context.Context, _ *wire.DescribeRequest, opts ...grpc.CallOption) (*wire.DescribeResponse, error) {
	resp, err := c.c.Info(ctx, &wirev1.InfoRequest{}, opts...)
	if err != nil {
		return nil, err
	}
	d := recast(resp, &wire.DescribeResponse{})
	d.MultiplexesRuns = false // v1 has no Runs
	return d, nil
}

func (c v1Client) Validate(ctx context.Context, req *wire.ValidateRequest, opts ...grpc.CallOption) (*wire.ValidateResponse, error) {
	if _, err := c.c.Validate(ctx, recast(req, &wirev1.ValidateRequest{}), opts...); err != nil {
		return nil, err
	}
	return &wire.ValidateResponse{}, nil
}

func (c v1Client) Run(ctx context.Context, req *wire.RunRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[wire.RunEvent], error) {
	stream, err := c.c.Run(ctx, recast(req, &wirev1.RunRequest{}), opts...)
	if err != nil {
		return nil, err
	}
	return v1RunClientStream{stream}, nil
}

// Runs is not in v1.
func (c v1Client) Runs(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[wire.RunsRequest, wire.RunsEvents], error) {
	return nil, status.Error(codes.Unimplemented, "protocol v1 has no Runs")
}

// v1RunClientStream receives v1 run events as v2 ones.
type v1RunClientStream struct {
	grpc.ServerStreamingClient[wirev1.RunEvent]
}

func (s v1RunClientStream) Recv() (*wire.RunEvent, error) {
	ev, err := s.ServerStreamingClient.Recv()
	if err != nil {
		return nil, err
	}
	return recast(ev, &wire.RunEvent{}), nil
}
