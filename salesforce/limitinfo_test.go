package salesforce

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestUsageFromDocumentedHeader: the emulator answers Sforce-Limit-Info
// with ";"-separated entries; the usage gauge reads them and
// api_usage_slowdown engages, for the org's allocation (past it: an
// api-bursts entry follows) and for the connected app's own quota.
func TestUsageFromDocumentedHeader(t *testing.T) {
	t.Run("org past its allocation", func(t *testing.T) {
		e := newEnv(t)
		e.emu.SetUsage(15500) // of 15000: the header carries api-bursts too
		e.deadLetters("orders", 1)
		e.drain()
		if got := testutil.ToFloat64(e.metrics.APIUsage); got < 1 {
			t.Errorf("api usage ratio = %v, want > 1", got)
		}
		if e.writer.nextCall().IsZero() {
			t.Error("writes did not slow down")
		}
	})
	t.Run("connected app quota", func(t *testing.T) {
		e := newEnvWith(t, func(o *sfemu.Options) { o.AppName, o.AppLimit = "Callout Proxy", 2 })
		e.deadLetters("orders", 1)
		e.drain()
		if got := e.client.UsageRatio(); got < 0.5 {
			t.Errorf("usage ratio = %v, want the app's share (≥ 0.5 of 2 calls)", got)
		}
		if used, limit := e.client.Usage(); limit != 15000 || used == 0 {
			t.Errorf("org usage = %d/%d", used, limit)
		}
	})
}
