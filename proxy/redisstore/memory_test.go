package redisstore

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestPendingCalloutMemory measures what a pending callout costs on a real
// Redis besides its body: the record, its due-set entry and its
// reservation. The project's target is under 1 KiB. The callout carries
// the trace context tracing stores with it (issue 20: a traceparent of 55
// bytes, as Apex sends it, no tracestate).
func TestPendingCalloutMemory(t *testing.T) {
	const n = 1000
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("MEMORY USAGE and INFO memory are measured on the real single node")
		}
		s := e.store()
		ctx := ctxT(t)
		if err := e.b.Client.Do(ctx, "MEMORY", "PURGE").Err(); err != nil {
			t.Logf("MEMORY PURGE: %v", err)
		}
		before := usedMemory(t, e)
		var last string
		for i := range n {
			nc := policy.NewCallout{
				Endpoint: "payment-api", Issuer: "https://example.my.salesforce.com", Method: http.MethodPost,
				Path: "/v1/charges", Header: http.Header{
					"Content-Type": {"application/json"}, "Accept": {"application/json"},
					"User-Agent": {"SFDC-Callout/62.0"},
				},
				IdempotencyKey: fmt.Sprintf("7d3c1f0e-4b8a-4c7e-9f21-%012d", i), SourceRecord: "006000000000001AAA",
				TraceContext: fmt.Sprintf("00-4bf92f3577b34da6%016x-%016x-00", i+1, i+1),
			}
			r, err := s.Enqueue(ctx, nc, enqOpts)
			if err != nil {
				t.Fatal(err)
			}
			last = r.ID
		}
		perCallout := (usedMemory(t, e) - before) / n
		k := keysOf("payment-api")
		record := e.b.Client.MemoryUsage(ctx, k.callout(last), 0).Val()
		nc := policy.NewCallout{Issuer: "https://example.my.salesforce.com"}
		idem := e.b.Client.MemoryUsage(ctx, k.idem(nc.Issuer, fmt.Sprintf("7d3c1f0e-4b8a-4c7e-9f21-%012d", n-1)), 0).Val()
		due := e.b.Client.MemoryUsage(ctx, k.due, 0).Val() / n
		t.Logf("pending callout, 0-byte body, with a 55-byte trace context: %d bytes by used_memory delta "+
			"(record %d + reservation %d + due entry ~%d by MEMORY USAGE)", perCallout, record, idem, due)
		if perCallout >= 1024 {
			t.Fatalf("a pending callout costs %d bytes besides its body, target < 1024", perCallout)
		}

		// For the record: the same callouts after one failed attempt each
		// (attempt log, last response of 11 body bytes, scheduled again).
		before = usedMemory(t, e)
		failed := 0
		for range n / 100 {
			for _, c := range mustClaim(t, s, "payment-api", ClaimOptions{Batch: 100, Lease: testLease}).Claimed {
				comp := failure(e.clk.Now().Add(time.Hour))
				comp.CountsTowardBreaker = false // keep the breaker closed for the measurement
				mustComplete(t, s, c, comp)
				failed++
			}
		}
		if failed != n {
			t.Fatalf("failed %d callouts, want %d", failed, n)
		}
		t.Logf("after one failed attempt: +%d bytes per callout (%d in all)",
			(usedMemory(t, e)-before)/n, perCallout+(usedMemory(t, e)-before)/n)
	})
}

func usedMemory(t *testing.T, e *env) int64 {
	t.Helper()
	info, err := e.b.Client.Info(ctxT(t), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
