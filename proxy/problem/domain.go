package problem

import (
	"errors"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// domainError is one row of domainErrors: an error of the domain, the
// problem code it is answered with (its HTTP status is Code.Status), and
// the detail that answer carries, made from the fields of the error's
// *policy.Error (the zero Error when the error is a bare sentinel, wrapped
// with %w as the stores return theirs).
type domainError struct {
	target error
	code   Code
	detail func(e policy.Error) string
	// cause keeps err as the problem's Err (logged, never sent).
	cause bool
}

// domainErrors is the one table from the domain's errors (policy.Err*,
// which the replay service re-exports as replay.Err*) to problem codes,
// for both listeners (WTF Dial keeps its error-code-to-status table in one
// place the same way). Rows are tried in order with errors.Is; none of
// these errors wraps another, so the order only says which row a reader
// meets first. An error no row matches is not the domain's: From answers
// it Internal, FromStore store-unavailable. No detail is parsed out of an
// error's text: the ids and endpoints it names are fields of its
// *policy.Error.
var domainErrors = [...]domainError{
	// The replay service (contract §8).
	{target: policy.ErrReplayInvalid, code: InvalidRequest, detail: func(e policy.Error) string {
		if e.Field == "" {
			return e.Detail
		}
		return e.Field + ": " + e.Detail
	}},
	{target: policy.ErrReplayNotDeadLetter, code: NotFound, detail: func(e policy.Error) string {
		if e.State != "" {
			return "no such dead letter: callout " + e.ID + " is " + string(e.State)
		}
		return "no such dead letter: " + e.ID
	}},
	// The stores.
	{target: policy.ErrNotFound, code: NotFound, detail: fixed("no such callout")},
	{target: policy.ErrJobNotFound, code: NotFound, detail: fixed("no such replay job")},
	// The replay service again: its refusals of one dead letter.
	{target: policy.ErrReplayUnknownEndpoint, code: UnknownEndpoint, detail: func(e policy.Error) string {
		return "the dead letter's endpoint is no longer configured: " + e.Endpoint
	}},
	{target: policy.ErrReplayNoSuchEndpoint, code: UnknownEndpoint, detail: func(e policy.Error) string {
		return "no such endpoint: " + e.Endpoint + " (not configured, and the store has never seen it)"
	}},
	{target: policy.ErrReplayEndpointDisabled, code: EndpointDisabled,
		detail: fixed("the endpoint is disabled; replays are refused until it is re-enabled")},
	{target: policy.ErrReplayBacklogFull, code: BacklogFull,
		detail: fixed("the endpoint's backlog is full; replay later or at a lower rate")},
	{target: policy.ErrReplaySuperseded, code: DeadLettered, detail: func(e policy.Error) string {
		return "its Idempotency-Key now belongs to a newer dead letter, " + e.Other + "; replay that one"
	}},
	// The callout store's refusals of a new callout (contract §4, §6).
	{target: policy.ErrDisabled, code: EndpointDisabled, detail: fixed(disabledDetail)},
	// Before ErrBacklogFull, which it also matches: the organisation's share
	// (contract §10 per-org shares), so the caller knows others are not full.
	{target: policy.ErrIssuerBacklogFull, code: BacklogFull,
		detail: fixed("your organisation's share of the endpoint's backlog is full (pending callouts or their stored bytes); try again later")},
	{target: policy.ErrBacklogFull, code: BacklogFull,
		detail: fixed("the endpoint's backlog of pending callouts is full; try again later")},
	// Before ErrUnavailable, which it also matches (contract §11).
	{target: policy.ErrNotDurable, code: StoreUnavailable, detail: fixed(notDurableDetail), cause: true},
	{target: policy.ErrUnavailable, code: StoreUnavailable, detail: fixed(unreachableDetail), cause: true},
}

// The details shared by a table row and another answer.
const (
	// disabledDetail: a disabled endpoint, met by a new callout (ErrDisabled)
	// or by a read at the gate (FromGate).
	disabledDetail = "the endpoint is disabled; an admin must re-enable it"
	// unreachableDetail: Redis could not be reached (ErrUnavailable, and
	// FromStore's answer to any error of a store call not in the table).
	unreachableDetail = "the callout store (Redis) is unreachable"
	// notDurableDetail: the replicas (or the append-only file) did not
	// confirm a written callout in time (ErrNotDurable, contract §11) —
	// one this request created (then withdrawn, docs/operating.md
	// "Durability") or the one its Idempotency-Key already had (not
	// withdrawn: it may be delivered already).
	notDurableDetail = "Redis did not confirm the callout durable in time (redis.durability); " +
		"this request was not forwarded; a callout it created was withdrawn again, and a callout its " +
		"Idempotency-Key already had stays as it was; should a withdrawal not have held (Redis failed, " +
		"or a failover kept a copy), the callout exists and is delivered like any accepted one; " +
		"retry with the same Idempotency-Key: the answer then comes from the callout if it exists"
)

// fixed is a detail that does not depend on the error.
func fixed(detail string) func(policy.Error) string {
	return func(policy.Error) string { return detail }
}

// lookup is the problem err means: the *Error in err's chain as it is;
// else a new *Error from the first row of domainErrors that err matches.
// ok is false when neither applies.
func lookup(err error) (pe *Error, ok bool) {
	if errors.As(err, &pe) {
		return pe, true
	}
	for _, row := range domainErrors {
		if errors.Is(err, row.target) {
			var fields policy.Error
			if de, ok := errors.AsType[*policy.Error](err); ok {
				fields = *de
			}
			pe = &Error{Code: row.code, Detail: row.detail(fields)}
			if row.cause {
				pe.Err = err
			}
			return pe, true
		}
	}
	return nil, false
}

// FromStore is From for the error of a call to a store (the callout store,
// the replay service over it): an error the table does not know is the
// store failing, answered 503 store-unavailable with the error as cause
// (contract §4 "Redis unreachable"), not 500. A returned *Error that came from
// the table is new; one found in err's chain is err's own.
func FromStore(err error) *Error {
	if pe, ok := lookup(err); ok {
		return pe
	}
	return Wrap(StoreUnavailable, unreachableDetail, err)
}

// FromGate is the refusal of a request meeting a shut gate (contract §4, §6):
// 503 endpoint-disabled, with no Retry-After (only an admin re-enables it);
// or 503 breaker-open (open, or its one probe out) or endpoint-paused (a
// 429 Retry-After pause, itself capped at policy.retry_after_cap when it
// was set, contract §3), each with Retry-After in whole seconds until
// g.Until, rounded up and at least 1: the next probe of the breaker that
// holds the caller (its organisation's partition or the endpoint's, as
// the gate read reports it), or the end of the pause. The detail names
// which breaker: the caller's organisation's partition (g.Partition set)
// or the endpoint's.
func FromGate(g policy.Gate, now time.Time) *Error {
	wait := 0
	if !g.Until.IsZero() {
		wait = max(int((g.Until.Sub(now)+time.Second-1)/time.Second), 1)
	}
	switch g.State {
	case policy.GateDisabled:
		return Errorf(EndpointDisabled, disabledDetail)
	case policy.GatePaused:
		return &Error{Code: EndpointPaused, RetryAfter: wait,
			Detail: "the upstream asked for a pause (429 Retry-After); it ends in " + strconv.Itoa(wait) + " s"}
	default:
		which := "the endpoint's circuit breaker is open"
		if g.Partition != "" {
			which = "your organisation's breaker partition of this endpoint is open (its own failures hold only its own callouts)"
		}
		return &Error{Code: BreakerOpen, RetryAfter: wait, Detail: which + "; the next probe is in " + strconv.Itoa(wait) + " s"}
	}
}
