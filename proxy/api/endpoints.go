package api

import (
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// EndpointDoc is one endpoint of GET /admin/v1/endpoints and
// GET /admin/v1/endpoints/{name} (contract §6, §9): its shared state in Redis
// as read at one moment, and its effective breaker settings. Times are RFC
// 3339 in UTC with millisecond precision and are left out when not set;
// durations are Go duration strings.
type EndpointDoc struct {
	Name string `json:"name"`
	// Gate is what a request meets now: open, half_open (the next request
	// or held callout is the probe), probing (a probe is out until
	// probe_out_until), breaker_open, paused or disabled.
	Gate policy.GateState `json:"gate"`
	// Breaker is the circuit breaker's state: closed, open or half_open.
	Breaker policy.BreakerState `json:"breaker"`
	// ConsecutiveFailures counts retryable failures since the last success
	// (429 and permanent answers never count, and do not reset it).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// OpenedAt is when the breaker opened (written once, by the opener);
	// NextProbeAt when the open breaker lets its single probe through.
	OpenedAt      *time.Time `json:"opened_at,omitempty"`
	NextProbeAt   *time.Time `json:"next_probe_at,omitempty"`
	ProbeOutUntil *time.Time `json:"probe_out_until,omitempty"`
	// LastSuccessAt is the success that last ended a failure streak;
	// OutageStartedAt the first counting failure after a success, from
	// which disable_after is measured.
	LastSuccessAt   *time.Time `json:"last_success_at,omitempty"`
	OutageStartedAt *time.Time `json:"outage_started_at,omitempty"`
	// PausedUntil is the end of a 429 Retry-After pause still in force.
	PausedUntil    *time.Time `json:"paused_until,omitempty"`
	Disabled       bool       `json:"disabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	// BacklogItems counts pending callouts (scheduled, held and in flight),
	// BacklogBytes their request bodies; InFlight the leased ones.
	BacklogItems int64 `json:"backlog_items"`
	BacklogBytes int64 `json:"backlog_bytes"`
	InFlight     int64 `json:"in_flight"`
	// DeadLetters counts the endpoint's dead letters still kept.
	DeadLetters int64 `json:"dead_letters"`
	// BreakerPartition is organisation (each organisation has its own
	// breaker; Gate, Breaker and ConsecutiveFailures above are then the
	// endpoint's own, which opens when two partitions are open) or
	// endpoint (contract §6).
	BreakerPartition string `json:"breaker_partition"`
	// Partitions are the organisations whose breaker has failures or is
	// open (breaker_partition organisation), by issuer.
	Partitions []PartitionDoc `json:"partitions,omitempty"`
	// The effective settings (endpoint overrides, else the policy's).
	BreakerFailures      int    `json:"breaker_failures"`
	BreakerProbeInterval string `json:"breaker_probe_interval"`
	DisableAfter         string `json:"disable_after"`
}

// PartitionDoc is one organisation's breaker partition of an endpoint
// (contract §6).
type PartitionDoc struct {
	Issuer              string              `json:"issuer"`
	Breaker             policy.BreakerState `json:"breaker"`
	ConsecutiveFailures int                 `json:"consecutive_failures"`
	OpenedAt            *time.Time          `json:"opened_at,omitempty"`
	NextProbeAt         *time.Time          `json:"next_probe_at,omitempty"`
}

// EndpointList is the body of GET /admin/v1/endpoints: every configured
// endpoint, by name in ascending byte order.
type EndpointList struct {
	Endpoints []EndpointDoc `json:"endpoints"`
}

// EndpointActionResult is the body of a successful POST
// /admin/v1/endpoints/{name}/enable, /disable or /breaker/reset.
type EndpointActionResult struct {
	// Action is enable, disable or breaker_reset.
	Action string `json:"action"`
	// Changed is false when the action found nothing to do (enabling an
	// enabled endpoint, disabling a disabled one, resetting a closed
	// breaker with no failures and no pause).
	Changed bool `json:"changed"`
	// DeadLettered lists the callouts that disabling turned into dead
	// letters (reason endpoint_disabled).
	DeadLettered []string `json:"dead_lettered,omitempty"`
	// Endpoint is the state after the action; absent when it could not be
	// read back.
	Endpoint *EndpointDoc `json:"endpoint,omitempty"`
}
