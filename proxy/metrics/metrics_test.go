package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestInitCreatesZeroSeries: after Init, every endpoint has a 0 series for
// each dead-letter reason, breaker transition, deferred reason and attempt
// outcome × kind, so increase() sees the first event.
func TestInitCreatesZeroSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Init([]string{"pay-api", "crm-api"})
	for _, tt := range []struct {
		c    *prometheus.CounterVec
		want int
	}{
		{m.DeadLetters, 2 * 4}, {m.BreakerTransitions, 2 * 4}, {m.Deferred, 2 * 3}, {m.Attempts, 2 * 16},
	} {
		if n := testutil.CollectAndCount(tt.c); n != tt.want {
			t.Errorf("%d series, want %d", n, tt.want)
		}
	}
	if v := testutil.ToFloat64(m.DeadLetters.WithLabelValues("pay-api", "exhausted")); v != 0 {
		t.Fatalf("exhausted = %v, want 0", v)
	}
	if v := testutil.ToFloat64(m.BreakerTransitions.WithLabelValues("crm-api", "enabled")); v != 0 {
		t.Fatalf("enabled = %v", v)
	}
}

// TestBuildInfo: callout_build_info is 1 with the build's labels, one
// series only.
func TestBuildInfo(t *testing.T) {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.SetBuildInfo("v1", "abc", "2026-03-02T09:00:00Z", "go1.26")
	m.SetBuildInfo("v2", "def", "2026-03-03T09:00:00Z", "go1.26")
	if n := testutil.CollectAndCount(m.BuildInfo); n != 1 {
		t.Fatalf("%d series", n)
	}
	if v := testutil.ToFloat64(m.BuildInfo.WithLabelValues("v2", "def", "2026-03-03T09:00:00Z", "go1.26")); v != 1 {
		t.Fatalf("build info = %v", v)
	}
}
