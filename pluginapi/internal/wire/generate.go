// Package wire holds the gRPC protocol between the Cronix node and handler
// plugins. It is generated from handler.proto and internal to pluginapi.
package wire

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative handler.proto
