package policy

import "errors"

// Errors of a replay (contract §8), returned by the replay service (which
// re-exports them as replay.Err*, as os re-exports io/fs's errors). They
// live here, with the store's errors, so that the one table turning domain
// errors into problem codes (proxy/problem) sees every one of them without
// importing the replay service. Test with errors.Is; each comes as an
// *Error naming the id, endpoint or state it concerns.
var (
	// ErrReplayNotDeadLetter: no callout with that id, or it is not a dead
	// letter (pending, succeeded, failed, expired or discarded).
	ErrReplayNotDeadLetter = errors.New("replay: no such dead letter")
	// ErrReplayUnknownEndpoint: the dead letter's endpoint is no longer
	// configured, so nothing could dispatch a replay.
	ErrReplayUnknownEndpoint = errors.New("replay: endpoint not configured")
	// ErrReplayNoSuchEndpoint: a filter names an endpoint that is neither
	// configured nor known to the store (it never had a callout).
	ErrReplayNoSuchEndpoint = errors.New("replay: no such endpoint")
	// ErrReplayEndpointDisabled: the endpoint is disabled; replays are
	// refused until an admin re-enables it (contract §6).
	ErrReplayEndpointDisabled = errors.New("replay: endpoint disabled")
	// ErrReplayBacklogFull: the endpoint's backlog cap is reached; try
	// later.
	ErrReplayBacklogFull = errors.New("replay: endpoint backlog full")
	// ErrReplaySuperseded: the dead letter's Idempotency-Key now belongs to
	// a newer dead letter (a later replay of it that failed too); replay
	// that one instead.
	ErrReplaySuperseded = errors.New("replay: idempotency key belongs to a newer dead letter")
	// ErrReplayAlreadyReplayed: a replay chain already holds the dead
	// letter's Idempotency-Key and has not dead-lettered; nothing new was
	// created.
	ErrReplayAlreadyReplayed = errors.New("replay: already replayed")
	// ErrReplayInvalid: a filter, job spec or cursor is malformed; the
	// *Error's Field and Detail say which part and why.
	ErrReplayInvalid = errors.New("replay: invalid request")
)

// Error is a domain error as a value (WTF Dial's habit): which error it is
// (Code, one of the sentinels above or the store's), and the fields the
// answers to it name — so that the one table turning domain errors into
// problems (proxy/problem) reads them instead of parsing the text.
// errors.Is(err, Code) holds for an *Error err; its text is Code's, then
// its fields, for logs.
type Error struct {
	// Code is the sentinel this error is, e.g. ErrReplaySuperseded.
	Code error
	// Endpoint is the endpoint concerned ("" when none).
	Endpoint string
	// ID is the callout (a dead letter) concerned ("" when none).
	ID string
	// State is the callout's state when it is the reason (a replay of a
	// callout that is not a dead letter); "" when none.
	State State
	// Other is the other callout the error names: the newer dead letter
	// that holds the key (ErrReplaySuperseded), the chain already replaying
	// it (ErrReplayAlreadyReplayed); "" when none.
	Other string
	// Field is the malformed part of a request (ErrReplayInvalid), e.g.
	// "filters[0]"; "" for the request as a whole.
	Field string
	// Detail says what is wrong, in words for the caller (ErrReplayInvalid:
	// `"Bad" is not an endpoint name`) or a remark for the log; "" when the
	// fields say it all.
	Detail string
}

// Error is Code's text followed by the fields that are set.
func (e *Error) Error() string {
	s := e.Code.Error()
	add := func(label, v string) {
		if v != "" {
			s += ": " + label + v
		}
	}
	add("", e.Field)
	add("endpoint ", e.Endpoint)
	add("callout ", e.ID)
	add("state ", string(e.State))
	add("other callout ", e.Other)
	add("", e.Detail)
	return s
}

// Unwrap is Code, so errors.Is(err, Code) holds.
func (e *Error) Unwrap() error { return e.Code }
