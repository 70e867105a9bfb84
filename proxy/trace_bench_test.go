package proxy

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// BenchmarkIngressTracing measures what tracing costs the callout
// listener per request (deploy/bench/BENCHMARKS.md "Tracing"): a read (GET,
// no record) and a keyed write (POST: reservation, attempt, completion),
// each carrying Apex's traceparent (flags 00), with tracing off
// (tracing.endpoint empty: a no-op provider), at sample_ratio 0 (spans made
// but not recorded; the upstream still gets a traceparent and the store a
// trace context) and at sample_ratio 1 (every span recorded and batched to
// an exporter that discards them). The store is miniredis and the upstream
// a loopback server, so the absolute figures are this machine's; the
// differences between the three are tracing's.
func BenchmarkIngressTracing(b *testing.B) {
	for _, kind := range []string{"read", "keyed-write"} {
		for _, p := range tracingtest.Providers() {
			b.Run(kind+"/"+p.Name, func(b *testing.B) {
				mr := miniredis.RunT(b)
				rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
				b.Cleanup(func() { _ = rdb.Close() })
				rig := newBenchRig(b, rdb, "", false, p.New(b))
				h := rig.srv.Handler()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					var req *http.Request
					if kind == "read" {
						req = httptest.NewRequest(http.MethodGet, "/callout/api/v1/status", nil)
					} else {
						req = httptest.NewRequest(http.MethodPost, "/callout/api/v1/charges", strings.NewReader(`{"amount":1}`))
						req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
					}
					req.Header.Set("Authorization", "Bearer "+rig.token)
					req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("%s: %d %s", kind, rec.Code, rec.Body)
					}
				}
			})
		}
	}
}
