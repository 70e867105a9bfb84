package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2EClockOffsetExported: every replica exports how far its clock is
// from Redis's (contract §1); an unskewed process on the embedded store
// reads within a second of it once the first measurement is in.
func TestE2EClockOffsetExported(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, statusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), testEnv())
	deadline := time.Now().Add(10 * time.Second)
	for {
		line := metricLines(metricsText(t, p), "callout_clock_offset_seconds ")
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("callout_clock_offset_seconds: %q", line)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v > 1 || v < -1 {
			t.Fatalf("callout_clock_offset_seconds = %q (%v), want within 1 s", f[1], err)
		}
		// The gauge starts at 0; a measurement of a real offset is never
		// exactly 0 (the round trip's midpoint is in nanoseconds).
		if v != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("callout_clock_offset_seconds never measured (still exactly 0)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
