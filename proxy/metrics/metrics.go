// Package metrics holds the proxy's Prometheus metrics. Names and labels are
// part of the operating contract: the alert rules and dashboard in deploy/
// depend on them.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Metrics are registered on the registry the composition root passes in
// (no global registry).
type Metrics struct {
	// Attempts counts real upstream dispatches by endpoint, outcome class
	// (contract §2) and kind (first|retry|probe|replay): the retry-share alarm
	// is rate(kind="retry") / rate(all).
	Attempts *prometheus.CounterVec
	// AttemptDuration observes one attempt's wall time in seconds, from
	// dispatch to the last body byte or the error.
	AttemptDuration *prometheus.HistogramVec
	// Rejected counts requests refused before dispatch, by endpoint (empty
	// when unknown) and problem code.
	Rejected *prometheus.CounterVec
	// RetriesScheduled counts retries put back in the delay queue, by
	// endpoint and the failed attempt's reason (policy reason words).
	RetriesScheduled *prometheus.CounterVec
	// BacklogItems is each endpoint's pending callouts (scheduled, held and
	// in flight), gathered on a timer by one replica at a time.
	BacklogItems *prometheus.GaugeVec
	// ScheduleLag observes, in seconds, how late a due callout was
	// dispatched (claim time minus due time).
	ScheduleLag prometheus.Histogram
	// DeadLetters counts callouts that became dead letters, by endpoint and
	// reason (exhausted|permanent|ambiguous|endpoint_disabled).
	DeadLetters *prometheus.CounterVec
	// Idempotency counts keyed-write handling by result: new, replayed
	// (answered from the record), conflict (409), mismatch (422), missing
	// (a write without a key).
	Idempotency *prometheus.CounterVec
	// BreakerState is 1 for each endpoint's current breaker state
	// (closed|open|half_open|disabled) and 0 for the others, gathered on a
	// timer by one replica at a time.
	BreakerState *prometheus.GaugeVec
	// BreakerPartitions counts each endpoint's organisation breaker
	// partitions (contract §6) by state (open|half_open: not closed), gathered
	// with BreakerState.
	BreakerPartitions *prometheus.GaugeVec
	// BreakerTransitions counts breaker transitions by endpoint and the
	// state entered, in callout_breaker_state's words (open|closed|disabled;
	// an admin's enable of a disabled endpoint enters closed).
	BreakerTransitions *prometheus.CounterVec
	// Deferred counts requests and callouts held back by a shut gate, by
	// endpoint and reason (breaker_open|paused|probing): reads refused and
	// writes held at the front door, retries the ingress or the dispatcher
	// put back held, replays created held, and the waiting callouts a
	// result shut the gate on (counted once, by the result that opened the
	// breaker or began the pause: policy.BreakerChange.Held).
	Deferred *prometheus.CounterVec
	// BuildInfo is 1, labelled with the running build's version, commit,
	// build_date and goversion (SetBuildInfo).
	BuildInfo *prometheus.GaugeVec
	// ClockOffset is this replica's wall clock minus Redis's (TIME), in
	// seconds, measured by proxy/skew every 30 s (contract §1: Redis's clock
	// is the one clock of shared state; docs/operating.md says what a
	// replica's own clock still affects).
	ClockOffset prometheus.Gauge
	// LoginFailures counts failed admin-token checks of the admin API and
	// the console, by result: "unauthorized" (answered 401) or "throttled"
	// (429, auth.LoginThrottle; docs/limits.md "Failed logins").
	LoginFailures *prometheus.CounterVec
}

// New creates the metrics and registers them, with the Go and process
// collectors, on reg. It returns an error if any name is already registered.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Attempts: counterVec("callout_attempts_total",
			"Upstream attempts by endpoint, outcome class and kind (first|retry|probe|replay).",
			"endpoint", "outcome", "kind"),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "callout_attempt_duration_seconds",
			Help:    "Duration of one upstream attempt in seconds, by endpoint and outcome class.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30},
		}, []string{"endpoint", "outcome"}),
		LoginFailures: counterVec("callout_admin_login_failures_total",
			"Failed admin-token checks of the admin API and the console, by result (unauthorized or throttled).",
			"result"),
		Rejected: counterVec("callout_rejected_total",
			"Requests rejected before dispatch, by endpoint and problem code.",
			"endpoint", "code"),
		RetriesScheduled: counterVec("callout_retries_scheduled_total",
			"Retries put in the delay queue, by endpoint and the failed attempt's reason.",
			"endpoint", "reason"),
		BacklogItems: gaugeVec("callout_backlog_items",
			"Pending callouts (scheduled, held, in flight) per endpoint.",
			"endpoint"),
		ScheduleLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "callout_schedule_lag_seconds",
			Help:    "How late due callouts were dispatched, in seconds (claim time minus due time).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		DeadLetters: counterVec("callout_dead_letters_total",
			"Callouts that became dead letters, by endpoint and reason.",
			"endpoint", "reason"),
		Idempotency: counterVec("callout_idempotency_total",
			"Keyed-write handling by result (new|replayed|conflict|mismatch|missing).",
			"result"),
		BreakerState: gaugeVec("callout_breaker_state",
			"1 for the endpoint's current breaker state (closed|open|half_open|disabled), 0 for the others.",
			"endpoint", "state"),
		BreakerPartitions: gaugeVec("callout_breaker_partitions",
			"Organisations whose breaker partition of the endpoint is open or half_open, by state.",
			"endpoint", "state"),
		BreakerTransitions: counterVec("callout_breaker_transitions_total",
			"Circuit-breaker transitions by endpoint and the state entered (open|closed|disabled).",
			"endpoint", "to"),
		Deferred: counterVec("callout_deferred_total",
			"Requests and callouts held back by a shut gate, by endpoint and reason (breaker_open|paused|probing).",
			"endpoint", "reason"),
		BuildInfo: gaugeVec("callout_build_info",
			"1, labelled with the running build's version, commit, build date and Go version.",
			"version", "commit", "build_date", "goversion"),
		ClockOffset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "callout_clock_offset_seconds",
			Help: "This replica's wall clock minus Redis's clock (TIME), in seconds; positive when the replica is ahead.",
		}),
	}
	for _, c := range []prometheus.Collector{
		m.Attempts, m.AttemptDuration, m.Rejected, m.RetriesScheduled, m.BacklogItems,
		m.ScheduleLag, m.DeadLetters, m.Idempotency, m.BreakerState, m.BreakerPartitions, m.BreakerTransitions, m.Deferred,
		m.BuildInfo, m.ClockOffset, m.LoginFailures,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"unauthorized", "throttled"} {
		m.LoginFailures.WithLabelValues(r) // exported at 0 before the first failure
	}
	return m, nil
}

// counterVec is the counter family name, with help, by labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// gaugeVec is the gauge family name, with help, by labels.
func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// ObserveAttempt counts one attempt with its class (contract §2), kind
// (first|retry|probe|replay) and duration.
func (m *Metrics) ObserveAttempt(endpoint, kind string, cls policy.Classification, d time.Duration) {
	m.Attempts.WithLabelValues(endpoint, string(cls.Outcome), kind).Inc()
	m.AttemptDuration.WithLabelValues(endpoint, string(cls.Outcome)).Observe(d.Seconds())
}

// SetBuildInfo sets callout_build_info{version, commit, build_date,
// goversion} to 1 for the running build.
func (m *Metrics) SetBuildInfo(version, commit, buildDate, goVersion string) {
	m.BuildInfo.Reset()
	m.BuildInfo.WithLabelValues(version, commit, buildDate, goVersion).Set(1)
}

// The label values Init creates series for.
var (
	// deadLetterReasons are callout_dead_letters_total's reasons.
	deadLetterReasons = []policy.DeadLetterReason{policy.DeadLetterExhausted, policy.DeadLetterPermanent,
		policy.DeadLetterAmbiguous, policy.DeadLetterEndpointDisabled}
	// transitionsTo are callout_breaker_transitions_total's states entered.
	transitionsTo = []string{"open", "closed", "disabled"}
	// deferredReasons are callout_deferred_total's reasons: the shut gates.
	deferredReasons = []policy.GateState{policy.GateBreakerOpen, policy.GatePaused, policy.GateProbing}
	// attemptOutcomes and attemptKinds are callout_attempts_total's.
	attemptOutcomes = []policy.Outcome{policy.Success, policy.Retryable, policy.Permanent, policy.Rejected}
	attemptKinds    = []policy.Kind{policy.KindFirst, policy.KindRetry, policy.KindProbe, policy.KindReplay}
)

// Init creates, at 0, the series of every endpoint for every known label
// value of the counters alerts compute increase() or rate() on (dead
// letters by reason, breaker transitions, deferred, attempts), so the first
// dead letter of an endpoint is an increase from 0, not a series appearing
// that increase() cannot see (Prometheus "Avoid missing metrics").
func (m *Metrics) Init(endpoints []string) {
	for _, ep := range endpoints {
		for _, r := range deadLetterReasons {
			m.DeadLetters.WithLabelValues(ep, string(r))
		}
		for _, to := range transitionsTo {
			m.BreakerTransitions.WithLabelValues(ep, to)
		}
		for _, r := range deferredReasons {
			m.Deferred.WithLabelValues(ep, string(r))
		}
		for _, o := range attemptOutcomes {
			for _, k := range attemptKinds {
				m.Attempts.WithLabelValues(ep, string(o), string(k))
			}
		}
	}
}
