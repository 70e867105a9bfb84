//go:build sizing

package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMeasure runs the whole measurement on a small N against a real
// redis-server and the real proxy binary, and checks the figures the
// runbook relies on: the Redis budget (a read to a healthy
// endpoint no round trip, a keyed write one in and one out that other
// requests' completions share, at most 14 commands run), and that records
// cost what a pending callout and an idempotency record must (something,
// and under the 1 KiB target for a bodiless pending callout).
func TestMeasure(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CALLOUT_TEST_REQUIRE_REAL") != "" {
			t.Fatal("redis-server not found and CALLOUT_TEST_REQUIRE_REAL is set")
		}
		t.Skip("redis-server not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := measure(ctx, options{N: 300, Pending: 5000, Concurrency: 4, RedisServer: "redis-server"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.write(&out)
	t.Log("\n" + out.String())

	loads := map[string]loadResult{}
	for _, l := range rep.Loads {
		loads[l.ID] = l
	}
	// The hot path sends only script runs (FCALL, or EVALSHA on the EVAL
	// path): a read to a healthy
	// endpoint none (the gate cache answers it; the first read of the
	// endpoint, or one after a refresh, one), a keyed write two — its
	// create in, its completion out — the completion pipelined with other
	// requests' (redisstore.Completer), so under concurrency fewer round
	// trips than commands sent; and both scripts of a keyed write run at
	// most 14 commands together, the script runs included (TestCommandBudget in
	// proxy/redisstore counts them; 0.5 of slack here for the one-time setup
	// of the first requests: issuer map, endpoint set). The dispatcher's idle polling
	// (ZRANGE) and the gatherer (SMEMBERS) run meanwhile; the report
	// subtracts them pro rata, which a loaded machine makes inexact, so
	// they are left out of the assertion.
	// A keyed write sends one script run in and a share of one out: the
	// completion writer runs the completions of one queue that a pipeline
	// holds in one complete.lua call, so between 1 and 2 per write.
	background := map[string]bool{"zrangebyscore": true, "zrange": true, "smembers": true}
	for _, c := range []struct {
		id                 string
		scripts, slack     float64
		roundTrips, ranAll float64
	}{{"read", 0, 0.1, 0.1, 0.5}, {"write", 1.5, 0.5, 2, 14.5}} {
		t.Run(c.id, func(t *testing.T) {
			l := loads[c.id]
			// a script run is an FCALL on Redis 7+ (Redis Functions,
			// docs/performance.md), an EVALSHA on the EVAL path
			runs := l.Sent["evalsha"] + l.Sent["fcall"]
			if math.Abs(runs-c.scripts) > c.slack {
				t.Errorf("%.2f script runs (FCALL or EVALSHA) per request, want %.1f ± %.1f", runs, c.scripts, c.slack)
			}
			for name, v := range l.Sent {
				if name != "evalsha" && name != "fcall" && !background[name] && v > 0.1 {
					t.Errorf("%.2f %s per request, want none besides the script runs", v, name)
				}
			}
			if l.RoundTrips > c.roundTrips {
				t.Errorf("%.2f round trips per request, want at most %.1f", l.RoundTrips, c.roundTrips)
			}
			if l.Total > c.ranAll {
				t.Errorf("%.2f commands run per request, want at most %.0f", l.Total, c.ranAll)
			}
		})
	}
	bodiless := rep.Pending[0]
	if bodiless.BodyBytes != 0 || bodiless.PerCallout <= bodiless.Record || bodiless.PerCallout >= 1024 {
		t.Errorf("pending callout without body: %d bytes (record %d), want above the record and below 1024",
			bodiless.PerCallout, bodiless.Record)
	}
	if withBody := rep.Pending[1]; withBody.PerCallout < bodiless.PerCallout+int64(withBody.BodyBytes) {
		t.Errorf("pending callout with a %d-byte body: %d bytes, want at least %d",
			withBody.BodyBytes, withBody.PerCallout, bodiless.PerCallout+int64(withBody.BodyBytes))
	}
	if kw := loads["write"].Memory; kw <= bodiless.Record+bodiless.Reservation {
		t.Errorf("a finished keyed write leaves %d bytes, want more than its record and reservation (%d)",
			kw, bodiless.Record+bodiless.Reservation)
	}
}
