// Package wirev2 holds the Go code of protocol version 2 (current) between
// the Cronix node and handler plugins, generated from
// pluginapi/proto/v2/handler.proto. Internal to pluginapi.
//
// Regenerate with protoc 3.21.12, protoc-gen-go v1.36.11 and
// protoc-gen-go-grpc v1.5.1 on PATH:
//
//	go generate ./pluginapi/internal/wirev2
package wirev2

//go:generate protoc -I ../../proto --go_out=../../.. --go_opt=module=github.com/cronix/cronix --go-grpc_out=../../.. --go-grpc_opt=module=github.com/cronix/cronix v2/handler.proto
