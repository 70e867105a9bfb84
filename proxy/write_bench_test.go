package proxy

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
)

// BenchmarkKeyedWrite measures one synchronous keyed write (POST with a
// fresh Idempotency-Key, 31-byte JSON body, first attempt succeeds) through
// the whole ingress of one replica, as BenchmarkRead does a read: JWT
// check, Begin (create.lua), the upstream round trip, the completion
// through the replica's completion writer (redisstore.Completer, as
// cmd/callout-proxy wires it), the access log and metrics. On the real
// single node when CALLOUT_TEST_REDIS_URL names one, else miniredis (whose
// in-process server adds its own allocations and CPU). allocs/op and B/op
// are the ingress's and the store client's (plus the benchmark's recorder);
// redis-rt/op counts the store's round trips. Benchmarks, not tests:
// `go test -run XXX -bench BenchmarkKeyedWrite -benchmem ./proxy/`.
func BenchmarkKeyedWrite(b *testing.B) {
	be := redistest.SingleOrMini(b)
	b.Run(be.Name, func(b *testing.B) {
		rig := newBenchRig(b, be.Client, "", true, nil)
		c := redisstore.NewCompleter(rig.store, batch.Options{})
		b.Cleanup(c.Close)
		rig.srv.d.Completions = c
		rig.srv = New(rig.srv.d)
		h := rig.srv.Handler()
		prefix := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" // fresh keys across -count runs
		n := 0
		write := func() {
			n++
			req := httptest.NewRequest(http.MethodPost, "/callout/api/v1/charges",
				strings.NewReader(`{"amount":1250,"currency":"EUR"}`))
			req.Header.Set("Authorization", "Bearer "+rig.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", `"`+prefix+strconv.Itoa(n)+`"`)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("keyed write: %d %s", rec.Code, rec.Body)
			}
		}
		for range 10 { // warm: keep-alive connection, scripts loaded, token cached
			write()
		}
		b.ReportAllocs()
		start := rig.rt.n.Load()
		for b.Loop() {
			write()
		}
		b.ReportMetric(float64(rig.rt.n.Load()-start)/float64(b.N), "redis-rt/op")
	})
}
