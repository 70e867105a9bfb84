package salesforce

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Salesforce writer's Prometheus metrics, registered on
// the registry the composition root passes in (no global registry). Names
// and labels are part of the operating contract (deploy/ alert rules).
type Metrics struct {
	// OutboxItems is the number of entries in the outbox (due, being
	// written, or waiting to be retried), summed over every shard. Every
	// replica reports the same total: aggregate with max, not sum.
	OutboxItems prometheus.Gauge
	// Requests counts Salesforce API calls by result: ok, retryable,
	// invalid_session, limit_exceeded, concurrent_limit, rejected (Class);
	// and failed token calls, as auth_failed or retryable.
	Requests *prometheus.CounterVec
	// APIUsage is the last api-usage share of the org's daily API limit
	// Salesforce reported (Sforce-Limit-Info used/limit), 0–1, or the
	// connected app's per-app-api-usage share when that is higher.
	APIUsage prometheus.Gauge
	// WriteErrors counts writes Salesforce refused as they are, by error
	// code: a whole collection refused (INVALID_FIELD, INVALID_TYPE: a
	// field or object the integration user cannot see) once, each refused
	// record (a validation rule, STRING_TOO_LONG) once.
	WriteErrors *prometheus.CounterVec
	// WritesPaused is 1 while this replica has paused every Salesforce
	// write, by reason: api_limit (REQUEST_LIMIT_EXCEEDED, the daily API
	// allocation) or storage_limit (STORAGE_LIMIT_EXCEEDED, the org's data
	// storage full); 0 once the pause ended. The replica that met the error
	// reports it (the others only honour the stored pause): aggregate with
	// max.
	WritesPaused *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them on reg. It returns an
// error if any name is already registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		OutboxItems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "callout_salesforce_outbox_items",
			Help: "Entries in the Salesforce outbox (due, being written or waiting to be retried), all shards.",
		}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_salesforce_requests_total",
			Help: "Salesforce calls by result (ok|retryable|invalid_session|limit_exceeded|concurrent_limit|auth_failed|rejected).",
		}, []string{"result"}),
		APIUsage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "callout_salesforce_api_usage_ratio",
			Help: "Share of the org's daily API limit used, as Salesforce last reported it (Sforce-Limit-Info).",
		}),
		WriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callout_salesforce_write_errors_total",
			Help: "Salesforce writes refused as they are, by error code (a whole collection once, a record once).",
		}, []string{"code"}),
		WritesPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "callout_salesforce_writes_paused",
			Help: "1 while this replica paused every Salesforce write, by reason (api_limit|storage_limit).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.OutboxItems, m.Requests, m.APIUsage, m.WriteErrors, m.WritesPaused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Result counts one call's result; use it as Options.OnResult. A nil
// *Metrics counts nothing.
func (m *Metrics) Result(result string) {
	if m != nil {
		m.Requests.WithLabelValues(result).Inc()
	}
}
