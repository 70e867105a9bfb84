package policy_test

import (
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// The delay before attempt n+1 with the default policy: full jitter under
// the ceiling 5 s·2^(n−1), and with a Retry-After at least that (capped at
// 1 h). The random source is fixed here; the dispatcher passes
// math/rand/v2's Float64.
func ExampleNextDelay() {
	p := policy.Defaults()
	half := func() float64 { return 0.5 }

	fmt.Println(policy.Ceiling(p, 3))
	fmt.Println(policy.NextDelay(p, 3, 0, false, half))
	fmt.Println(policy.NextDelay(p, 3, 2*time.Minute, true, half))
	fmt.Println(policy.NextDelay(p, 3, 5*time.Hour, true, half))
	fmt.Println(policy.NextDelay(p, 1000, 0, false, half))
	// Output:
	// 20s
	// 10s
	// 2m0s
	// 1h0m0s
	// 3h0m0s
}

// A Retry-After value as delta-seconds or as any of the three HTTP-date
// forms; a past or malformed value counts as absent.
func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 29, 21, 30, 0, 0, time.UTC)
	for _, v := range []string{
		"120",
		"Sun, 29 Nov 2026 21:31:30 GMT",  // IMF-fixdate
		"Sunday, 29-Nov-26 21:31:30 GMT", // obsolete RFC 850
		"Sun Nov 29 21:31:30 2026",       // asctime
		"Sun, 29 Nov 2026 21:20:00 GMT",  // past
		"-5",
	} {
		d, ok := policy.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 1m30s true
	// 1m30s true
	// 1m30s true
	// 0s false
	// 0s false
}

// The envelope GET /v1/policy publishes for the default policy.
func ExampleBackoffEnvelope() {
	e := policy.BackoffEnvelope(policy.Defaults())
	fmt.Println(e.Gaps, e.Shortest, e.Mean, e.Longest)
	// Output: 11 0s 1h25m17.5s 2h50m35s
}
