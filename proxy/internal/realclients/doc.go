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
//
// go-retryablehttp (github.com/hashicorp/go-retryablehttp) and Python's
// requests with urllib3's Retry (urllib3_client.py, run with
// $CALLOUT_PYTHON) are the generic clients of contract §2, "Generic HTTP
// clients": the tests check the table's claims for them — which of the
// proxy's answers each retries by default and with the Callout-Outcome
// recipes given there — and that a caller whose own timeout fires during
// the synchronous attempt waits out its in-flight callout (409 in-flight,
// Retry-After 1: with the recipes, and by default with stripe-go) and gets
// its answer instead of stopping at the refusal.
package realclients
