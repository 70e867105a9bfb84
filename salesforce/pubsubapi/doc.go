// Package pubsubapi is the Go code generated from Salesforce's published Pub/Sub API definition,
// pubsub_api.proto (https://github.com/forcedotcom/pub-sub-api, CC0 1.0 Universal), package
// eventbus.v1. Nothing here is hand-written except this file; regenerate with `go generate` after
// installing protoc (Debian protobuf-compiler) and protoc-gen-go / protoc-gen-go-grpc.
//
// The API itself is described in "Pub/Sub API" (Salesforce Developers,
// https://developer.salesforce.com/docs/platform/pub-sub-api/overview).
package pubsubapi

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative pubsub_api.proto
