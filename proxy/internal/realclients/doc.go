// Package realclients drives the real callout-proxy binary with real client
// libraries, to check that the proxy accepts what they send.
// It is a module of its own, so that the main module does not depend on
// the client libraries; .ci/hostile.sh runs it with the binary it built
// (CALLOUT_PROXY_BINARY), and `go test ./...` in this directory builds one.
//
// stripe-go (github.com/stripe/stripe-go/v82) sends every write with an
// Idempotency-Key of its own making, NewIdempotencyKey:
// "<Unix nanoseconds>_<6 base64url characters>" — a bare key that starts
// with a digit, which the proxy refused before the gate cache.
package realclients
