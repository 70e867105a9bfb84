package attempt

import (
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
)

// TestInlineDelayBacksOff: under Prefer: wait=N the delay before the next
// inline retry is the policy's full jitter over a 100 ms base and a 2 s
// ceiling, growing with the number of the attempt just made (contract §3, §4
// "inline retries with a short schedule"), honours Retry-After, and is
// only granted while it and an attempt as long as the last one (here 1 s)
// fit in the wait — so a wait shorter than the attempt limit still allows
// inline retries of a fast-failing upstream.
func TestInlineDelayBacksOff(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	r := &Runner{Config: &config.Config{Policy: policy.Defaults()},
		Now: func() time.Time { return t0 }, Rand: func() float64 { return 0.5 }}
	retry := policy.Completion{Action: policy.ActionRetry}
	tests := []struct {
		name     string
		n        int
		wait     time.Duration
		comp     policy.Completion
		header   http.Header
		want     time.Duration
		wantFits bool
	}{
		{"after attempt 1", 1, time.Minute, retry, nil, 50 * time.Millisecond, true},
		{"after attempt 2", 2, time.Minute, retry, nil, 100 * time.Millisecond, true},
		{"after attempt 4", 4, time.Minute, retry, nil, 400 * time.Millisecond, true},
		{"capped at 2 s", 7, time.Minute, retry, nil, time.Second, true},
		{"Retry-After honoured", 1, time.Minute, retry, http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{"does not fit the wait", 4, time.Second + 399*time.Millisecond, retry, nil, 400 * time.Millisecond, false},
		{"exactly fits the wait", 4, time.Second + 400*time.Millisecond, retry, nil, 400 * time.Millisecond, true},
		{"not a retry", 1, time.Minute, policy.Completion{Action: policy.ActionSucceed}, nil, 0, false},
		{"no wait preference", 1, 0, retry, nil, 0, false},
		{"fast failure under a wait shorter than the attempt limit", 1, 3 * time.Second, retry, nil, 50 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The attempt limit (15 s) is longer than several waits
			// above: the prediction uses the last attempt's 1 s.
			c := Call{Endpoint: &config.Endpoint{AttemptTimeout: 15 * time.Second},
				Claimed: &policy.Claimed{Attempt: tt.n}}
			if tt.wait > 0 {
				c.WaitUntil = t0.Add(tt.wait)
			}
			att := forward.Attempt{Response: &forward.Response{Status: 503, Header: tt.header}, Duration: time.Second}
			d, fits := r.inlineDelay(c, Result{Attempt: att, Completion: tt.comp})
			if d != tt.want || fits != tt.wantFits {
				t.Errorf("inlineDelay(n=%d) = %s, %v; want %s, %v", tt.n, d, fits, tt.want, tt.wantFits)
			}
		})
	}
}
