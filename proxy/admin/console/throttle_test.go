package console_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestLoginThrottle: with the defaults (10 failures a minute from one
// address), 12 wrong console logins are 10 × 401 and 2 × 429 with
// Retry-After 60, and one audit line; the right token still logs in from
// that address while it is throttled; a minute later a wrong login is a
// 401 again, and the minute's failures are one line with their count.
func TestLoginThrottle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		b := e.browser(t)
		codes := map[int]int{}
		for i := range 12 {
			p := b.postLogin("wrong-"+strconv.Itoa(1000+i)+"-0123456789abcdef", nil)
			codes[p.Status]++
			if p.Status == http.StatusTooManyRequests {
				p.wantBody(t, "Too many failed logins")
				if got := p.Header.Get("Retry-After"); got != "60" {
					t.Errorf("Retry-After %q, want 60", got)
				}
			}
		}
		if codes[http.StatusUnauthorized] != 10 || codes[http.StatusTooManyRequests] != 2 {
			t.Fatalf("statuses %v, want 10 × 401, 2 × 429", codes)
		}
		failed := 0
		for _, a := range e.logs.Audits() {
			if a["action"] == "console.login" && a["result"] != "ok" {
				failed++
			}
		}
		if failed != 1 {
			t.Fatalf("%d audit lines of failed logins, want 1: %v", failed, e.logs.Audits())
		}
		b.login(writeToken) // accepted while throttled

		e.clk.Advance(time.Minute)
		b2 := e.browser(t)
		b2.postLogin("wrong-after-0123456789abcdef", nil).
			wantStatus(t, http.StatusUnauthorized)
		var summary map[string]any
		for _, a := range e.logs.Audits() {
			if a["result"] == "unauthorized_repeated" {
				summary = a
			}
		}
		if summary == nil || summary["failures"] != 12.0 || summary["throttled"] != 2.0 {
			t.Fatalf("the minute's line %v, want 12 failures, 2 throttled", summary)
		}
	})
}
