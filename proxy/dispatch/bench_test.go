package dispatch_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// BenchmarkDispatch measures how fast one replica drains due callouts
// into a fast upstream (a real httptest server answering 200): b.N
// callouts spread over 4 endpoints are enqueued before the timer starts,
// then Round + Wait run until every one has been claimed, dispatched and
// completed (claim.lua, one HTTP request, complete.lua each). One op is
// one attempt; it reports ns/op and attempts/s. It runs on miniredis, and
// on the real single node and cluster when CALLOUT_TEST_REDIS_URL and
// CALLOUT_TEST_REDIS_CLUSTER are set. Round + Wait does not overlap one
// round's completions with the next round's claims, as Run does, so this
// is a lower bound for Run.
func BenchmarkDispatch(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, h *harness, names []string) {
		d := h.dispatcher(h.store, dispatch.Options{Concurrency: 64, PerEndpoint: 32, Batch: 32})
		for i := range b.N {
			h.enqueue(names[i%len(names)], http.MethodPost, "/bench", "", time.Time{})
		}
		b.ResetTimer()
		start := time.Now()
		for done := 0; done < b.N; {
			n := h.round(d)
			if n == 0 {
				b.Fatalf("no progress after %d of %d attempts", done, b.N)
			}
			done += n
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "attempts/s")
		for _, name := range names {
			if st := h.state(name); st.Due != 0 || st.Leased != 0 {
				b.Fatalf("%s not drained: %d due, %d leased", name, st.Due, st.Leased)
			}
		}
	})
}

// forEachBackendB runs fn as a sub-benchmark per backend with a harness
// whose 4 endpoints share one fast upstream.
func forEachBackendB(b *testing.B, fn func(b *testing.B, h *harness, names []string)) {
	for _, be := range redistest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			up := proctest.NewUpstream(b, status(http.StatusOK))
			var eps []ep
			var names []string
			for i := range 4 {
				name := fmt.Sprintf("bench-%d", i)
				eps, names = append(eps, ep{name: name, url: up.URL}), append(names, name)
			}
			h := newHarness(b, be, newConfig(b, nil, eps...))
			fn(b, h, names)
			if got := h.ended.Load(); got != int64(b.N) {
				b.Fatalf("%d endings reported, want %d (every callout succeeded)", got, b.N)
			}
		})
	}
}
