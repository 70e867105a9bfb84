package policy

import "time"

// DisableResult is what Disable did.
type DisableResult struct {
	// Newly is true when this call disabled the endpoint (its reason and
	// time were written); false when it already was disabled. The owner is
	// notified once per disable (contract §6): only when Newly.
	Newly bool
	// DeadLettered are the pending callouts turned into dead letters with
	// reason endpoint_disabled; mirror them like any dead letter.
	DeadLettered []string
}

// EndpointState is an endpoint's shared state (the cp:{sN}:ep hash) and its
// queue sizes, as read at one moment.
type EndpointState struct {
	Endpoint string
	// Gate is what a claim would see now.
	Gate Gate
	// Breaker is closed, open or half_open.
	Breaker BreakerState
	// ConsecutiveFailures counts counting failures since the last success.
	ConsecutiveFailures int
	// OpenedAt is when the breaker opened (written once by the opener).
	OpenedAt time.Time
	// ProbeAt is when the open breaker admits its probe.
	ProbeAt time.Time
	// ProbeOut is true while a probe holds the token, until ProbeUntil.
	ProbeOut   bool
	ProbeUntil time.Time
	// PausedUntil is the end of an endpoint-wide 429 pause (may be past).
	PausedUntil time.Time
	// Disabled, with its reason and time (contract §6 auto-disable or admin).
	Disabled       bool
	DisabledReason string
	DisabledAt     time.Time
	// LastSuccessAt is the success that last ended a failure streak (a
	// success while nothing fails writes nothing, so it can be older than
	// the latest success).
	LastSuccessAt time.Time
	// OutageStartedAt is the first counting failure after a success (zero:
	// no outage); auto-disable measures disable_after from it.
	OutageStartedAt time.Time
	// OutageNotified is true once the owner heard of the current outage.
	OutageNotified bool
	// Due (scheduled and held), Leased (in flight) and DeadLetters (index
	// entries) are queue sizes; BacklogBytes is what the endpoint's pending
	// callouts and dead letters store, as max_backlog_bytes counts it.
	Due, Leased, DeadLetters int64
	BacklogBytes             int64
	// Partitions are the breaker partitions with a breaker of their own
	// (contract §6, breaker.partition organisation): the organisations
	// whose callouts or reads failed since their last success, by issuer.
	// Gate, Breaker and ConsecutiveFailures above are the endpoint's own,
	// which opens when two organisations' partitions are open.
	Partitions []PartitionState
}

// PartitionState is one organisation's breaker partition of an endpoint
// (contract §6), as read with EndpointState.
type PartitionState struct {
	// Issuer is the organisation (JWT iss); its issuer tag when the store
	// has no record of the issuer.
	Issuer string
	// Breaker is closed, open or half_open.
	Breaker BreakerState
	// ConsecutiveFailures counts the organisation's counting failures
	// since its last success.
	ConsecutiveFailures int
	// OpenedAt is when its breaker opened; ProbeAt when the open breaker
	// lets its single probe through (zero when closed).
	OpenedAt, ProbeAt time.Time
}

// BreakerSettings is an endpoint's circuit-breaker settings (contract §6; per endpoint in
// config.Endpoint, defaults in Policy).
type BreakerSettings struct {
	// Failures is the number of consecutive counting failures that opens the
	// breaker (breaker_failures, default 20). Zero or less: 20.
	Failures int
	// ProbeInterval is how long the breaker stays open before one probe is
	// let through, and again after a failed probe (breaker_probe_interval,
	// default 5m). Zero or less: 5m.
	ProbeInterval time.Duration
	// ProbeLease is how long the probe token is held before another probe
	// may be taken, so a dead prober cannot wedge the breaker. Zero or less:
	// the attempt's lease.
	ProbeLease time.Duration
}

// GateState says whether an endpoint currently admits attempts.
type GateState string

// Gate is an endpoint's gate as a script saw it.
type Gate struct {
	State GateState
	// Until is when the gate may open again (probe time, pause end, probe
	// token expiry); zero for GateOpen, GateHalfOpen and GateDisabled.
	Until time.Time
	// Partition is the organisation (JWT issuer) whose own breaker
	// partition the gate is (contract §6), "" when it is the endpoint's:
	// its breaker, pause or disable. Set by reads that report it
	// (redisstore Store.ReadGates, Store.Admit).
	Partition string
}

// The gate states, from the endpoint hash (contract §3 pause, §6 breaker and
// disable).
const (
	// GateOpen: attempts may be made.
	GateOpen GateState = "open"
	// GateHalfOpen: the breaker's probe interval has passed; the first
	// claimer takes the single probe token and makes one attempt.
	GateHalfOpen GateState = "half_open"
	// GateProbing: half-open, and another worker holds the probe token
	// until Gate.Until.
	GateProbing GateState = "probing"
	// GateBreakerOpen: the breaker is open until Gate.Until (the probe time).
	GateBreakerOpen GateState = "breaker_open"
	// GatePaused: a 429 with Retry-After paused the endpoint until Gate.Until.
	GatePaused GateState = "paused"
	// GateDisabled: the endpoint is disabled until an admin enables it.
	GateDisabled GateState = "disabled"
)

func (b BreakerSettings) WithDefaults(lease time.Duration) BreakerSettings {
	if b.Failures <= 0 {
		b.Failures = 20
	}
	if b.ProbeInterval <= 0 {
		b.ProbeInterval = 5 * time.Minute
	}
	if b.ProbeLease <= 0 {
		b.ProbeLease = lease
	}
	return b
}

// Shut reports whether the gate refuses attempts (paused, breaker open, a
// probe out, or disabled).
func (g Gate) Shut() bool {
	return g.State != GateOpen && g.State != GateHalfOpen && g.State != ""
}
