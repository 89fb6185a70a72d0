// Package wirev2 holds the Go code of protocol version 2 (current) between
// the Cronix node and handler plugins, generated from
// pluginapi/proto/v2/handler.proto. Internal to pluginapi.
package wirev2
