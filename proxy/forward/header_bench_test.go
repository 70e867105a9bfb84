package forward

import (
	"net/http"
	"testing"
)

// BenchmarkOutboundHeader: the header of a typical Apex callout as
// net/http's server hands it over (canonical names), forwarded with one
// injected credential; the hot path calls it twice per keyed write
// (the stored request and the attempt).
func BenchmarkOutboundHeader(b *testing.B) {
	in := http.Header{
		"Authorization":    {"Bearer eyJhbGciOi..."},
		"Content-Type":     {"application/json"},
		"Idempotency-Key":  {"0065g00000XyZabQAB-1"},
		"Sfdc_stack_depth": {"1"},
		"User-Agent":       {"SFDC-Callout/62.0"},
		"Accept":           {"application/json"},
		"Traceparent":      {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"Content-Length":   {"31"},
	}
	injected := http.Header{"Authorization": {"Bearer upstream-token"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = OutboundHeader(in, injected)
	}
}
