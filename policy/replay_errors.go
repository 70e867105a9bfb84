package policy

import "errors"

// Errors of a replay (contract §8), returned by the replay service (which
// re-exports them as replay.Err*, as os re-exports io/fs's errors). They
// live here, with the store's errors, so that the one table turning domain
// errors into problem codes (proxy/problem) sees every one of them without
// importing the replay service. Test with errors.Is; each is wrapped with
// the id, endpoint or state it concerns.
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
	// error's text after "replay: invalid request: " says which part.
	ErrReplayInvalid = errors.New("replay: invalid request")
)
