package dispatch_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// rfc850Layout is the obsolete RFC 850 form of an HTTP-date (RFC 9110
// §5.6.7), in GMT: time.RFC850 writes the zone's name, UTC. The other two
// forms are Go's http.TimeFormat and time.ANSIC.
const rfc850Layout = "Monday, 02-Jan-06 15:04:05 GMT"

// TestRetryAfterDateHonoured: an upstream answers 503 with a Retry-After
// HTTP-date (RFC 9110 §10.2.3, any §5.6.7 form) computed from the injected
// clock. The dispatcher never re-attempts before that date: at date−1s a
// Round claims nothing, at the date it claims the callout. A date in the
// past counts as absent (contract §3): the wait is the jittered delay alone.
func TestRetryAfterDateHonoured(t *testing.T) {
	forms := []struct {
		name   string
		offset time.Duration // date − now at the 503
		layout string
		wait   time.Duration // expected next attempt − now
	}{
		{"imf-fixdate", 90 * time.Second, http.TimeFormat, 90 * time.Second},
		{"rfc850", 90 * time.Second, rfc850Layout, 90 * time.Second},
		{"asctime", 90 * time.Second, time.ANSIC, 90 * time.Second},
		// jitter 0.5 of base_delay 5s after attempt 1
		{"past", -10 * time.Minute, http.TimeFormat, 2500 * time.Millisecond},
	}
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		var h *harness
		up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			n := proctest.Received(r).PathN
			if n > 1 {
				_, _ = io.WriteString(w, "done")
				return
			}
			for _, f := range forms {
				if r.URL.Path == "/"+f.name {
					w.Header().Set("Retry-After", h.clk.Now().Add(f.offset).UTC().Format(f.layout))
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		h = newHarness(t, b, newConfig(t, nil, ep{name: "ra", url: up.URL}))
		d := h.dispatcher(h.store, dispatchOpts())
		for _, f := range forms {
			t.Run(f.name, func(t *testing.T) {
				start := h.clk.Now()
				id := h.enqueue("ra", http.MethodPost, "/"+f.name, "", time.Time{})
				if n := h.round(d); n != 1 {
					t.Fatalf("first round claimed %d, want 1", n)
				}
				c := h.get(id)
				if c.State != policy.Scheduled || !c.NextAttemptAt.Equal(start.Add(f.wait)) {
					t.Fatalf("after 503: state %s next %v, want scheduled at start+%v (got start+%v)",
						c.State, c.NextAttemptAt, f.wait, c.NextAttemptAt.Sub(start))
				}
				h.clk.Advance(f.wait - time.Millisecond)
				if n := h.round(d); n != 0 {
					t.Fatalf("round 1ms before the date claimed %d, want 0", n)
				}
				if got := up.PathHits("/" + f.name); got != 1 {
					t.Fatalf("upstream saw %d requests before the date, want 1", got)
				}
				h.clk.Advance(time.Millisecond)
				if n := h.round(d); n != 1 {
					t.Fatalf("round at the date claimed %d, want 1", n)
				}
				if c := h.get(id); c.State != policy.Succeeded || c.Attempts != 2 {
					t.Fatalf("after the date: state %s attempts %d, want succeeded after 2", c.State, c.Attempts)
				}
				// next form starts on a whole second, as HTTP-dates are
				h.clk.Advance(start.Add(time.Hour).Sub(h.clk.Now()))
			})
		}
	})
}
