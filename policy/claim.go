package policy

import "time"

// ClaimOptions are the per-endpoint settings of one claim of due callouts
// under a lease (ARCHITECTURE.md "Redis data model").
type ClaimOptions struct {
	// Batch is the most callouts one claim returns (docs/limits.md: a
	// bounded batch per endpoint per round). Zero or less: 1. At most 1000.
	Batch int
	// Lease is how long each claimed attempt is leased: at least the
	// attempt limit plus a grace period (contract §3). Required (> 0).
	Lease time.Duration
	// Breaker supplies ProbeLease, the probe token's lease.
	Breaker BreakerSettings
	// OrgCap, when > 0, is the most attempts the caller lets run at once
	// on the endpoint but for one kept slot: the claim takes at most OrgCap
	// minus all of OrgInFlight, of any organisations (JWT issuers; ""
	// callouts without one), and beyond that one callout of an
	// organisation with none in flight and none taken in this claim. The
	// dispatcher keeps the last slot of an endpoint that several
	// organisations may call this way, so however many organisations'
	// attempts hang, one with none in flight finds a slot (contract §10
	// "Fair dispatch"). 0: no cap.
	OrgCap int
	// OrgInFlight is the caller's attempts of the endpoint in flight, by
	// issuer (read with OrgCap).
	OrgInFlight map[string]int
}

// ClaimRequest is one endpoint's part of a batched claim (the dispatcher's
// round: one request per endpoint with free slots).
type ClaimRequest struct {
	Endpoint string
	ClaimOptions
}

// ClaimResult is what one claim did for one endpoint.
type ClaimResult struct {
	// Claimed are the leased callouts, at most Batch (exactly one, Kind
	// probe, when the gate was half-open).
	Claimed []*Claimed
	// Gate is the endpoint's gate as the claim saw it. A shut gate claims
	// nothing and touches no callout; Gate.Until says when to look again.
	// GateOpen with nothing claimed can also mean nothing was due (then the
	// gate was not read).
	Gate Gate
	// DeadLettered lists callouts turned into dead letters (reason
	// endpoint_disabled) because the endpoint is disabled and they were due
	// (callouts reaped or returned after Disable). They must be mirrored
	// like any other dead letter.
	DeadLettered []string
	// NextDueAt is the earliest due time after now seen among the
	// endpoint's first waiting callouts (zero: none seen): when to look
	// again if nothing else wakes the dispatcher.
	NextDueAt time.Time
	// LeaseExpiresAt is the earliest lease expiry of the endpoint's callouts
	// in flight (zero: none): when Reap has work.
	LeaseExpiresAt time.Time
	// MoreDue reports that the claim's read saw more callouts due than it
	// claimed (its batch was full, or another replica claimed some first):
	// another claim now may find work.
	MoreDue bool
}
