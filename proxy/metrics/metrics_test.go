package metrics

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/calloutproxy/callout-proxy/policy"
)

// gathered returns the series of the family name on reg as "label=value,…
// value" lines, sorted, reading what the registry exposes (never creating a
// series through WithLabelValues).
func gathered(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out = append(out, seriesLine(f.GetType(), m))
		}
	}
	slices.Sort(out)
	return out
}

// seriesLine renders one series as "k=v,k=v value" (a histogram's value is
// its sample count).
func seriesLine(typ dto.MetricType, m *dto.Metric) string {
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	var v float64
	switch typ {
	case dto.MetricType_COUNTER:
		v = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		v = m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		v = float64(m.GetHistogram().GetSampleCount())
	}
	return strings.Join(labels, ",") + " " + strconv.FormatFloat(v, 'g', -1, 64)
}

// TestInitCreatesZeroSeries: after Init, the registry exposes, for every
// endpoint, a 0 series for each dead-letter reason, breaker transition,
// deferred reason and attempt outcome × kind — exactly those, so
// increase() sees the first event (Prometheus "Avoid missing metrics").
func TestInitCreatesZeroSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"callout_dead_letters_total", "callout_breaker_transitions_total",
		"callout_deferred_total", "callout_attempts_total"} {
		if got := gathered(t, reg, name); len(got) != 0 {
			t.Fatalf("%s before Init: %q, want no series", name, got)
		}
	}
	m.Init([]string{"pay-api", "crm-api"})
	want := func(labels func(ep string) []string) []string {
		var out []string
		for _, ep := range []string{"pay-api", "crm-api"} {
			for _, l := range labels(ep) {
				out = append(out, l+" 0")
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		name string
		want []string
	}{
		{"callout_dead_letters_total", want(func(ep string) []string {
			return []string{"endpoint=" + ep + ",reason=ambiguous", "endpoint=" + ep + ",reason=endpoint_disabled",
				"endpoint=" + ep + ",reason=exhausted", "endpoint=" + ep + ",reason=permanent"}
		})},
		{"callout_breaker_transitions_total", want(func(ep string) []string {
			return []string{"endpoint=" + ep + ",to=closed", "endpoint=" + ep + ",to=disabled",
				"endpoint=" + ep + ",to=open"}
		})},
		{"callout_deferred_total", want(func(ep string) []string {
			return []string{"endpoint=" + ep + ",reason=breaker_open", "endpoint=" + ep + ",reason=paused",
				"endpoint=" + ep + ",reason=probing"}
		})},
		{"callout_attempts_total", want(func(ep string) []string {
			var out []string
			for _, k := range []string{"first", "probe", "replay", "retry"} {
				for _, o := range []string{"permanent", "rejected", "retryable", "success"} {
					out = append(out, "endpoint="+ep+",kind="+k+",outcome="+o)
				}
			}
			return out
		})},
	} {
		if got := gathered(t, reg, tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("%s after Init:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// TestObserveAttempt: one attempt adds 1 to exactly its endpoint × outcome ×
// kind series and one observation of its duration to its endpoint × outcome
// histogram; the others stay where Init put them.
func TestObserveAttempt(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveAttempt("pay-api", string(policy.KindRetry), policy.Classification{Outcome: policy.Retryable}, 1500*time.Millisecond)
	m.ObserveAttempt("pay-api", string(policy.KindRetry), policy.Classification{Outcome: policy.Retryable}, 20*time.Millisecond)
	m.ObserveAttempt("crm-api", string(policy.KindFirst), policy.Classification{Outcome: policy.Success}, time.Millisecond)
	if got, want := gathered(t, reg, "callout_attempts_total"), []string{
		"endpoint=crm-api,kind=first,outcome=success 1",
		"endpoint=pay-api,kind=retry,outcome=retryable 2",
	}; !slices.Equal(got, want) {
		t.Errorf("attempts:\n got %q\nwant %q", got, want)
	}
	if got, want := gathered(t, reg, "callout_attempt_duration_seconds"), []string{
		"endpoint=crm-api,outcome=success 1",
		"endpoint=pay-api,outcome=retryable 2",
	}; !slices.Equal(got, want) {
		t.Errorf("durations (sample counts):\n got %q\nwant %q", got, want)
	}
}

// TestBuildInfo: callout_build_info is 1 with the last build's labels, one
// series only.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SetBuildInfo("v1", "abc", "2026-03-02T09:00:00Z", "go1.26")
	m.SetBuildInfo("v2", "def", "2026-03-03T09:00:00Z", "go1.26")
	if got, want := gathered(t, reg, "callout_build_info"), []string{
		"build_date=2026-03-03T09:00:00Z,commit=def,goversion=go1.26,version=v2 1",
	}; !slices.Equal(got, want) {
		t.Fatalf("build info:\n got %q\nwant %q", got, want)
	}
}
