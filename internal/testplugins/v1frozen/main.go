// Command v1frozen is a handler plugin built only from a frozen copy of
// protocol v1 (package wirev1) and go-plugin, as a third party would have
// built it against the first SDK: no import of today's pluginapi. The
// compatibility test runs it against the current host. Its "frozen"
// handler echoes its fire id and requires a "text" param.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cronix/cronix/internal/testplugins/v1frozen/wirev1"
)

// handshake is protocol v1's handshake as the first SDK defined it.
var handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "CRONIX_PLUGIN",
	MagicCookieValue: "7c1d5e0a-cronix-handler",
}

type server struct {
	wirev1.UnimplementedHandlerServer
}

func (server) Info(context.Context, *wirev1.InfoRequest) (*wirev1.InfoResponse, error) {
	return &wirev1.InfoResponse{Name: "frozen", Version: "1.0.0", Description: "built from the frozen v1 protocol",
		ParamsSchema: []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}, nil
}

func (server) Validate(_ context.Context, req *wirev1.ValidateRequest) (*wirev1.ValidateResponse, error) {
	var p struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.GetParams(), &p); err != nil || p.Text == "" {
		st, _ := status.New(codes.InvalidArgument, "text: required").WithDetails(&wirev1.Error{
			Kind: wirev1.ErrorKind_ERROR_KIND_INVALID_PARAMS, Field: "text", Message: "required"})
		return nil, st.Err()
	}
	return &wirev1.ValidateResponse{}, nil
}

func (server) Run(req *wirev1.RunRequest, stream grpc.ServerStreamingServer[wirev1.RunEvent]) error {
	out := fmt.Sprintf("frozen v1 plugin ran fire %s (attempt %d)\n", req.GetFireId(), req.GetAttempt())
	if err := stream.Send(&wirev1.RunEvent{Event: &wirev1.RunEvent_Output{Output: []byte(out)}}); err != nil {
		return err
	}
	return stream.Send(&wirev1.RunEvent{Event: &wirev1.RunEvent_Result{Result: &wirev1.RunResult{Status: "success", Message: "v1 ok"}}})
}

type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	wirev1.RegisterHandlerServer(s, server{})
	return nil
}

func (grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("plugin side only")
}

func main() {
	if os.Getenv(handshake.MagicCookieKey) != handshake.MagicCookieValue {
		fmt.Fprintln(os.Stderr, "v1frozen: started by a Cronix node only")
		os.Exit(1)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: map[int]plugin.PluginSet{1: {"handler": grpcPlugin{}}},
		GRPCServer:       plugin.DefaultGRPCServer,
	})
}
