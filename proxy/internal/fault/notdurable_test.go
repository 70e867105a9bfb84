//go:build fault

package fault

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestNotDurableForwardsNothing: a proxy with durability replicated on a
// Redis whose replica is missing (WAIT answers 0). Keyed writes, both
// synchronous and Prefer: respond-async, are answered 503
// store-unavailable saying the callout was not confirmed durable, the
// upstream receives none of them, and nothing is left in Redis for a
// dispatcher to send later: every callout was withdrawn with its key
// (contract §4, §11).
func TestNotDurableForwardsNothing(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	up, reps, c := payReplicas(t, rs, 1, nil, "  durability: replicated\n  durability_timeout: 50ms\n")
	for i, prefer := range []string{"", "respond-async", "", "respond-async"} {
		hdr := http.Header{"Idempotency-Key": {"nd-" + string(rune('a'+i))}, "Content-Type": {"application/json"}}
		if prefer != "" {
			hdr.Set("Prefer", prefer)
		}
		status, h, body, err := c.do(http.MethodPost, reps[0].URL+"/callout/pay/v1/charges", hdr, `{}`)
		if err != nil || status != http.StatusServiceUnavailable || h.Get("Callout-Outcome") != "rejected" ||
			!strings.Contains(string(body), "store-unavailable") || !strings.Contains(string(body), "durable") {
			t.Fatalf("write %d (Prefer %q) without a replica: %d %v %s, %v; want 503 store-unavailable, not durable",
				i, prefer, status, h, body, err)
		}
	}
	if n := up.Hits(); n != 0 {
		t.Errorf("the upstream received %d requests for writes answered 503", n)
	}
	keys, err := rs.Client.Keys(context.Background(), "cp:{s*}:c:*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("callout records left for a dispatcher: %v (%v); want none", keys, err)
	}
}
