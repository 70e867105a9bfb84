package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the proxy's Prometheus metrics, registered on the registry the
// composition root passes in (no global registry). Names and labels are part
// of the operating contract: the alert rules in deploy/ depend on them.
type Metrics struct {
	// Attempts counts real upstream dispatches by endpoint, outcome class
	// (SPEC §2) and kind (first|retry|probe|replay): the retry-share alarm
	// is rate(kind="retry") / rate(all).
	Attempts *prometheus.CounterVec
	// AttemptDuration observes one attempt's wall time in seconds, from
	// dispatch to the last body byte or the error.
	AttemptDuration *prometheus.HistogramVec
	// Rejected counts requests refused before dispatch, by endpoint (empty
	// when unknown) and problem code.
	Rejected *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them, with the Go and process
// collectors, on reg. It returns an error if any name is already registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_attempts_total",
			Help: "Upstream attempts by endpoint, outcome class and kind (first|retry|probe|replay).",
		}, []string{"endpoint", "outcome", "kind"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "callout_attempt_duration_seconds",
			Help:    "Duration of one upstream attempt in seconds, by endpoint and outcome class.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
		}, []string{"endpoint", "outcome"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_rejected_total",
			Help: "Requests rejected before dispatch, by endpoint and problem code.",
		}, []string{"endpoint", "code"}),
	}
	for _, c := range []prometheus.Collector{
		m.Attempts, m.AttemptDuration, m.Rejected,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
