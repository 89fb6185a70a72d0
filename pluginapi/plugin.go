package pluginapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	wire "github.com/cronix/cronix/pluginapi/internal/wirev2"
)

// PluginName is the name under which a plugin process serves its Handler
// in go-plugin's plugin set.
const PluginName = "handler"

// ProtocolVersion is the current version of the host-plugin protocol
// (pluginapi/proto/v2/handler.proto). Hosts and plugins built with this SDK
// also speak PreviousProtocolVersion (pluginapi/proto/v1, frozen); go-plugin
// picks the highest version both sides offer.
const ProtocolVersion = 2

// PreviousProtocolVersion is the previous major version, still supported
// on both sides.
const PreviousProtocolVersion = 1

// SDKVersion is this SDK's version, sent in Describe as
// "cronix-pluginapi-go/<SDKVersion>".
const SDKVersion = "1.3.0"

// Handshake is the go-plugin handshake shared by the host and every handler
// plugin. The magic cookie only tells a plugin binary it was started by a
// Cronix host; it is not a security measure (checksums are, see
// SecureConfig in the host).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "CRONIX_PLUGIN",
	MagicCookieValue: "7c1d5e0a-cronix-handler",
}

// VersionedPlugins is the host's plugin set per protocol version (the
// current and the previous major), for go-plugin's
// ClientConfig.VersionedPlugins. Treat it as read-only.
var VersionedPlugins = map[int]plugin.PluginSet{
	PreviousProtocolVersion: {PluginName: handlerPluginV1{&handlerPlugin{}}},
	ProtocolVersion:         {PluginName: &handlerPlugin{}},
}

// handlerPlugin is the go-plugin GRPCPlugin for a Handler. impl is set on
// the plugin side only.
type handlerPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl    Handler
	runs    sync.WaitGroup // Runs in flight, so Serve can let them stop
	tracker *wireTracker   // set when served by serveConfig
}

var _ plugin.GRPCPlugin = (*handlerPlugin)(nil)

func (p *handlerPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("pluginapi: no handler to serve")
	}
	wire.RegisterHandlerServer(s, &grpcServer{impl: p.impl, runs: &p.runs, tracker: p.tracker})
	return nil
}

// GRPCClient gets doneCtx from go-plugin: it is cancelled when the plugin
// process exits, and every call is merged with it.
func (p *handlerPlugin) GRPCClient(doneCtx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return newGRPCClient(wire.NewHandlerClient(c), doneCtx, true), nil
}

// ErrNotStartedByHost is returned by Serve when the binary was run directly
// rather than started by a Cronix node.
var ErrNotStartedByHost = errors.New("this is a Cronix handler plugin: it is started by a cronix node, not run directly")

// stopGrace bounds how long Serve waits, once the host stopped the plugin,
// for Runs still in flight (their ctx is cancelled) to stop what they
// started.
const stopGrace = 5 * time.Second

// Serve serves h over go-plugin gRPC on this process's stdio handshake. Call
// it from a plugin binary's main; it returns when the host stops the plugin,
// after the Runs still in flight returned (at most a few seconds; their ctx
// is cancelled), or ErrNotStartedByHost at once when there is no host.
// A handler that is also an io.Closer is closed before Serve returns.
func Serve(h Handler) error {
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		return ErrNotStartedByHost
	}
	p := &handlerPlugin{impl: h}
	plugin.Serve(serveConfig(p))
	stopped := make(chan struct{})
	go func() {
		p.runs.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(stopGrace):
	}
	if c, ok := h.(io.Closer); ok {
		_ = c.Close()
	}
	return nil
}

// Main is a plugin binary's whole main function: it serves h (Serve) and,
// when that fails (the binary was run directly, not by a node), prints the
// error on stderr and exits with status 1.
//
//	func main() { pluginapi.Main(myHandler{}) }
func Main(h Handler) {
	if err := Serve(h); err != nil {
		fmt.Fprintln(os.Stderr, filepath.Base(os.Args[0])+":", err)
		os.Exit(1)
	}
}

// ServeConfig is the go-plugin ServeConfig Serve uses, for a plugin that
// needs to adjust it (its logger, go-plugin's test mode) before calling
// plugin.Serve itself.
func ServeConfig(h Handler) *plugin.ServeConfig {
	return serveConfig(&handlerPlugin{impl: h})
}

func serveConfig(p *handlerPlugin) *plugin.ServeConfig {
	p.tracker = newWireTracker()
	return &plugin.ServeConfig{
		HandshakeConfig: Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			PreviousProtocolVersion: {PluginName: handlerPluginV1{p}},
			ProtocolVersion:         {PluginName: p},
		},
		GRPCServer: grpcServerFunc(p.tracker),
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "cronix-plugin",
			Level:      hclog.Info,
			Output:     os.Stderr,
			JSONFormat: true,
		}),
	}
}

// ClientConfig is the go-plugin ClientConfig a host uses to start the plugin
// command cmd: Cronix's handshake and versioned plugin set, gRPC only. The
// caller may set more fields (Logger, SecureConfig, StartTimeout) before
// plugin.NewClient.
func ClientConfig(cmd *exec.Cmd) *plugin.ClientConfig {
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: maps.Clone(VersionedPlugins), // go-plugin may write to it
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
	}
}

// Dispense connects to the plugin process of client (starting it if needed)
// and returns its Handler. The Handler's calls fail with a
// PluginExitedError once the process is gone; Run streams the remote output
// into the local writer.
func Dispense(client *plugin.Client) (Handler, error) {
	rpc, err := client.Client()
	if err != nil {
		return nil, fmt.Errorf("pluginapi: connecting to plugin: %w", err)
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		return nil, fmt.Errorf("pluginapi: dispensing %q: %w", PluginName, err)
	}
	h, ok := raw.(Handler)
	if !ok {
		return nil, fmt.Errorf("pluginapi: plugin dispensed %T, not a Handler", raw)
	}
	return h, nil
}

// GRPCPlugin returns the go-plugin plugin that serves h (plugin side) and
// builds host-side Handlers. It lets tests and custom harnesses wire a
// handler over gRPC without a plugin process; see package plugintest.
func GRPCPlugin(h Handler) plugin.GRPCPlugin {
	return &handlerPlugin{impl: h}
}
