// Package wire holds the Go code of protocol version 1 (frozen) between the
// Cronix node and handler plugins, generated from
// pluginapi/proto/v1/handler.proto. Internal to pluginapi.
package wire
