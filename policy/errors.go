package policy

import (
	"errors"
	"fmt"
)

// Errors of the replay-job store. Test with errors.Is.
var (
	// ErrJobNotFound: no replay job with that id (or a malformed id, or one
	// whose record expired after the job retention).
	ErrJobNotFound = errors.New("replay job not found")
	// ErrJobCancelled: an admin asked to cancel the job; the caller must
	// stop and end it with Finish(JobCancelled). Nothing was changed.
	ErrJobCancelled = errors.New("replay job cancel requested")
	// ErrJobLost: the caller no longer holds the job's lease (another
	// replica took it over after the lease expired, or the job ended); the
	// caller must stop working on it. Nothing was changed.
	ErrJobLost = errors.New("replay job lease lost")
	// ErrJobBusy: another replica holds a live lease on the job.
	ErrJobBusy = errors.New("replay job held by another replica")
	// ErrJobFinal: the job has ended (completed, cancelled or failed).
	ErrJobFinal = errors.New("replay job has ended")
	// ErrJobFull: the job already holds the most dead letters a job may (jobs.Options.MaxItems).
	ErrJobFull = errors.New("replay job item cap reached")
)

// Errors returned by the store. Test with errors.Is.
var (
	// ErrUnavailable: Redis could not be reached or is not serving (network
	// error, closed client, pool timeout, LOADING, CLUSTERDOWN, MASTERDOWN,
	// TRYAGAIN, READONLY). The ingress answers 503 store-unavailable
	// (contract §4). The underlying error is wrapped too.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotDurable: the store wrote a callout but the durability its
	// configuration asks for (redis.durability replicated or fsync: a
	// replica's or the append-only file's confirmation) did not come in
	// time, so a failover may still lose it. The callout may exist: a retry
	// with the same Idempotency-Key answers from it (contract §11). It
	// matches ErrUnavailable too: 503 store-unavailable.
	ErrNotDurable = fmt.Errorf("write not confirmed durable: %w", ErrUnavailable)
	// ErrNotFound: no callout with that id (or a malformed id).
	ErrNotFound = errors.New("callout not found")
	// ErrStaleLease: the lease token is no longer the callout's current one
	// (the lease expired and was reaped, or the callout finished); nothing
	// was changed. A worker getting it must drop the result.
	ErrStaleLease = errors.New("stale lease")
	// ErrDisabled: the endpoint is disabled; nothing was created (contract §4, §6).
	ErrDisabled = errors.New("endpoint disabled")
	// ErrBacklogFull: the endpoint's backlog cap (Limits) is reached;
	// nothing was created (docs/limits.md).
	ErrBacklogFull = errors.New("endpoint backlog full")
	// ErrIssuerBacklogFull: one caller organisation (JWT issuer) used its
	// share of the endpoint's backlog (BacklogLimits.MaxItemsPerIssuer,
	// MaxBytesPerIssuer). It matches ErrBacklogFull too.
	ErrIssuerBacklogFull = fmt.Errorf("organisation's share of the %w", ErrBacklogFull)
	// ErrNotDeadLettered: Discard of a callout that is not a dead letter.
	ErrNotDeadLettered = errors.New("callout is not a dead letter")
)
