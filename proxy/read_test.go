package proxy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

func TestCountDeferred(t *testing.T) {
	tests := []struct {
		state policy.GateState
		want  float64
	}{
		{policy.GateBreakerOpen, 1}, {policy.GateProbing, 1}, {policy.GatePaused, 1},
		{policy.GateDisabled, 0}, {policy.GateOpen, 0}, {policy.GateHalfOpen, 0},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			m, err := metrics.New(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{d: Deps{Metrics: m}}
			s.countDeferred("pay-api", policy.Gate{State: tt.state, Until: time.UnixMilli(1_700_000_000_000)})
			if n := testutil.ToFloat64(m.Deferred.WithLabelValues("pay-api", string(tt.state))); n != tt.want {
				t.Fatalf("callout_deferred_total{reason=%q} = %v, want %v", tt.state, n, tt.want)
			}
		})
	}
}
