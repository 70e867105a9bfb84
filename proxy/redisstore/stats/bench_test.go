package stats

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// BenchmarkAttempt is the hot path's cost of counting one attempt: no
// Redis, a mutex and a map lookup (docs/console.md "Charts").
func BenchmarkAttempt(b *testing.B) {
	r := New(nil, Options{Now: func() time.Time { return t0 }})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Attempt("payment-api", policy.Success, 42*time.Millisecond)
		}
	})
}
