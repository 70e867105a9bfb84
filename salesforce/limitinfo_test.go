package salesforce

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestParseLimitInfoHeader reads every documented form of Sforce-Limit-Info
// ("Limit Info Header", REST API Developer Guide): entries separated by
// ";", with api-bursts and per-app-api-usage(appName=…).
func TestParseLimitInfoHeader(t *testing.T) {
	for _, c := range []struct {
		in   string
		want LimitInfo
		ok   bool
	}{
		{"api-usage=10018/100000", LimitInfo{APIUsage: Usage{10018, 100000}}, true},
		{"api-usage=110018/100000; api-bursts=1/750",
			LimitInfo{APIUsage: Usage{110018, 100000}, APIBursts: Usage{1, 750}}, true},
		{"api-usage=25/5000; per-app-api-usage=17/250(appName=sample-connected-app)",
			LimitInfo{APIUsage: Usage{25, 5000}, PerApp: []AppUsage{{Usage{17, 250}, "sample-connected-app"}}}, true},
		{"per-app-api-usage=17/250(appName=a);api-usage=3/100",
			LimitInfo{APIUsage: Usage{3, 100}, PerApp: []AppUsage{{Usage{17, 250}, "a"}}}, true},
		{"api-usage=3/100, api-bursts=0/750", LimitInfo{APIUsage: Usage{3, 100}, APIBursts: Usage{0, 750}}, true},
		{"api-usage=x/100; api-bursts=1/750", LimitInfo{APIUsage: Usage{}, APIBursts: Usage{1, 750}}, true},
		{"", LimitInfo{}, false}, {"api-usage=1/0", LimitInfo{}, false}, {"nonsense", LimitInfo{}, false},
	} {
		got, ok := ParseLimitInfoHeader(c.in)
		if ok != c.ok || got.APIUsage != c.want.APIUsage || got.APIBursts != c.want.APIBursts ||
			!slices.Equal(got.PerApp, c.want.PerApp) {
			t.Errorf("ParseLimitInfoHeader(%q) = %+v %v, want %+v %v", c.in, got, ok, c.want, c.ok)
		}
	}
	for _, in := range []string{"api-usage=25/5000; per-app-api-usage=17/250(appName=x)",
		"api-usage=25/5000; api-bursts=1/750"} {
		if u, l, ok := ParseLimitInfo(in); u != 25 || l != 5000 || !ok {
			t.Errorf("ParseLimitInfo(%q) = %d %d %v, want 25 5000 true", in, u, l, ok)
		}
	}
}

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
