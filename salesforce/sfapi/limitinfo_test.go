package sfapi

import (
	"slices"
	"testing"
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
		if info, ok := ParseLimitInfoHeader(in); info.APIUsage != (Usage{25, 5000}) || !ok {
			t.Errorf("ParseLimitInfoHeader(%q).APIUsage = %+v %v, want 25/5000 true", in, info.APIUsage, ok)
		}
	}
}
