// Package replay replays dead letters (contract §7, §8): one at a time
// (ReplayOne, for the admin API and the Salesforce reprocess poller) or in
// bulk through replay jobs that survive the replica running them, run in
// one replica at a time and are paced by a rate. It also lists dead letters
// across endpoints with the filters of contract §8 and sweeps the dead-letter
// indexes of expired entries (contract §7 dead_letter_retention).
//
// A replay is a new attempt chain (Store.Enqueue with ReplayOf): a
// fresh attempt count and max_age window, the original request and its
// original Idempotency-Key, whose reservation the chain takes over. The
// dead letter itself is kept, with its history, until its retention ends.
package replay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// Errors of Replay and ReplayOne, the domain's (policy.ErrReplay*)
// re-exported under the names this package's callers know, as os
// re-exports io/fs's errors. Test with errors.Is.
var (
	// ErrNotDeadLetter: no callout with that id, or it is not a dead letter
	// (pending, succeeded, failed, expired or discarded).
	ErrNotDeadLetter = policy.ErrReplayNotDeadLetter
	// ErrUnknownEndpoint: the dead letter's endpoint is no longer
	// configured, so nothing could dispatch a replay.
	ErrUnknownEndpoint = policy.ErrReplayUnknownEndpoint
	// ErrNoSuchEndpoint: a filter names an endpoint that is neither
	// configured nor known to the store.
	ErrNoSuchEndpoint = policy.ErrReplayNoSuchEndpoint
	// ErrEndpointDisabled: the endpoint is disabled; replays are refused
	// until an admin re-enables it (contract §6).
	ErrEndpointDisabled = policy.ErrReplayEndpointDisabled
	// ErrBacklogFull: the endpoint's backlog cap is reached; try later.
	ErrBacklogFull = policy.ErrReplayBacklogFull
	// ErrSuperseded: the dead letter's Idempotency-Key now belongs to a
	// newer dead letter (a later replay of it that failed too);
	// Result.ReplayID names it: replay that one instead.
	ErrSuperseded = policy.ErrReplaySuperseded
	// ErrAlreadyReplayed (ReplayOne only): a replay chain already holds
	// the dead letter's Idempotency-Key and has not dead-lettered; nothing
	// new was created.
	ErrAlreadyReplayed = policy.ErrReplayAlreadyReplayed
	// ErrInvalid: a filter, job spec or cursor is malformed; the error's
	// text says which part.
	ErrInvalid = policy.ErrReplayInvalid
)

// Store is what the service needs of the callout store: the dead letters
// it reads and replays (contract §7, §8), the
// retention sweep of the dead-letter index and the lock that keeps that
// sweep to one replica. *redisstore.Store implements it.
type Store interface {
	Get(ctx context.Context, id string) (*policy.Callout, error)
	Enqueue(ctx context.Context, nc policy.NewCallout, o policy.EnqueueOptions) (policy.EnqueueResult, error)
	Discard(ctx context.Context, id string) error
	Endpoints(ctx context.Context) ([]string, error)
	// PruneDeadLetters drops endpoint's dead-letter index entries past the
	// retention and returns how many.
	PruneDeadLetters(ctx context.Context, endpoint string) (int64, error)
	TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
}

// DeadLetters is what the service needs to list dead letters (contract §7
// "Dead letters") and keep their replay marks (contract §8). *deadletters.Store (proxy/redisstore/deadletters)
// implements it.
type DeadLetters interface {
	// DeadLetters returns one page of an endpoint's dead letters in
	// dead-lettered-at order. Errors: policy.ErrUnavailable, or an error
	// for a malformed cursor.
	DeadLetters(ctx context.Context, q policy.DeadLetterQuery) (policy.DeadLetterPage, error)
	// Summaries reads the dead-letter summaries of ids, in order; an entry
	// is nil when that id is not a dead letter (any more).
	Summaries(ctx context.Context, ids []string) ([]*policy.DeadLetter, error)
	// MarkReplayed notes on dead letter id that replayID is its latest
	// replay chain; false when id is no longer a dead letter.
	MarkReplayed(ctx context.Context, id, replayID string) (bool, error)
	// ReplayMarkOf reads callout id's replay mark (zero when none).
	ReplayMarkOf(ctx context.Context, id string) (policy.ReplayMark, error)
}

// Options configure a Service. Config, Store, DeadLetters and Jobs are
// required.
type Options struct {
	Config      *config.Config
	Store       Store
	DeadLetters DeadLetters
	// Jobs is the replay-job store: jobs, their leases, queues and items.
	Jobs Jobs
	// Logger receives the audit lines (msg "audit") and the runner's
	// warnings. Default: discard.
	Logger *slog.Logger
	// Now is the clock; pacing and the default job window come from it.
	// Default time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx ends (returning ctx's error): the pacing
	// of replay jobs. Tests pass one that advances their clock. Default: a
	// timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Owner is this replica's token in job leases and locks (random,
	// unique per replica). Required for Run.
	Owner string
	// Wake, optional, starts this replica's dispatcher at once after a
	// replay chain was created.
	Wake func()
	// Metrics, optional, counts replays held behind a shut gate
	// (callout_deferred_total).
	Metrics *metrics.Metrics
	// OnReplay, optional, is told of every replay chain created (the
	// Salesforce writer marks the dead letter's record Reprocessing,
	// contract §8). It must not block.
	OnReplay func(ctx context.Context, r Result)
	// PollEvery is how often Run looks for jobs to run. Default 2s.
	PollEvery time.Duration
	// MaxJobs bounds the jobs one replica runs at a time. Default 4.
	MaxJobs int
	// SweepEvery is how often one replica prunes the dead-letter indexes
	// of entries past the retention. Default 1h.
	SweepEvery time.Duration
	// TracerProvider, optional, makes a span of every replay, a child of
	// the dead letter's stored trace context, and gives the new chain that
	// span's context, so its attempts join the original callout's trace
	// (docs/tracing.md). nil or a no-op provider: tracing off (the chain
	// still keeps the dead letter's context).
	TracerProvider trace.TracerProvider
}

// Service replays dead letters and runs replay jobs. It is safe for
// concurrent use.
type Service struct {
	o       Options
	wake    chan struct{}
	mu      sync.Mutex
	running map[string]bool // job ids this replica is running
	swept   time.Time       // last retention sweep by this replica
	tr      *tracing.Tracer // nil: tracing off
}

// New returns a Service over o, filling its defaults.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 2 * time.Second
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = 4
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Hour
	}
	return &Service{o: o, wake: make(chan struct{}, 1), running: map[string]bool{},
		tr: tracing.New(o.TracerProvider, nil)}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Result is what a replay did.
type Result struct {
	DeadLetterID string
	Endpoint     string
	// ReplayID is the new chain's callout id when Created; otherwise the
	// callout already holding the dead letter's Idempotency-Key (an
	// earlier replay; or, with ErrSuperseded, a newer dead letter).
	ReplayID string
	// Created is true when this call created a replay chain.
	Created bool
	// State is ReplayID's state: scheduled or held for a new chain.
	State policy.State
	// Gate is the gate a new chain met: shut (breaker open, probing,
	// paused) when it is held.
	Gate policy.Gate
	// TraceContext is the dead letter's stored trace context (its caller's,
	// policy.Callout.TraceContext): the trace_id of the log lines about it
	// (contract §12 "log fields").
	TraceContext string
}

// ReplayOne replays dead letter id on behalf of by (an admin token's name,
// or e.g. "salesforce:<user id>" for the reprocess poller) and returns the
// new chain's callout id. The audit log gets one line. Errors:
// ErrNotDeadLetter, ErrUnknownEndpoint, ErrEndpointDisabled,
// ErrBacklogFull, ErrSuperseded (newID is then the newer dead letter to
// replay instead), ErrAlreadyReplayed (newID is then the chain already
// replaying it), policy.ErrUnavailable.
func (s *Service) ReplayOne(ctx context.Context, id, by string) (newID string, err error) {
	r, err := s.Replay(ctx, id, by, "")
	if err != nil {
		return r.ReplayID, err
	}
	if !r.Created {
		return r.ReplayID, &policy.Error{Code: ErrAlreadyReplayed, ID: id, Other: r.ReplayID, State: r.State}
	}
	return r.ReplayID, nil
}

// Replay replays dead letter id (contract §8) on behalf of by, as part of job
// jobID ("" when alone): a new chain with the original request and
// Idempotency-Key, replay_of id, a fresh attempt count and window, due at
// once (held when the endpoint's breaker is open). When a chain that has
// not dead-lettered already holds the key, nothing is created and Result
// names that chain (Created false, no error). Every call is audit-logged
// with by. Errors as ReplayOne's, except ErrAlreadyReplayed.
func (s *Service) Replay(ctx context.Context, id, by, jobID string) (Result, error) {
	r, err := s.replay(ctx, id, false)
	result := replayResult(r, err)
	attrs := []slog.Attr{slog.String("token", by), slog.String("action", "replay"),
		slog.String("endpoint", r.Endpoint), slog.String("result", result),
		slog.String("dead_letter_id", id), slog.String("replay_id", r.ReplayID)}
	if jobID != "" {
		attrs = append(attrs, slog.String("job_id", jobID))
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("detail", err.Error()))
	}
	s.o.Logger.LogAttrs(logx.WithTraceContext(ctx, r.TraceContext), level, "audit", attrs...)
	if err == nil && r.Created && r.State == policy.Held && s.o.Metrics != nil {
		s.o.Metrics.Deferred.WithLabelValues(r.Endpoint, string(r.Gate.State)).Inc()
	}
	return r, err
}

// Preview says what Replay of dead letter id would do now, changing
// nothing and logging nothing: the same checks in the same order, and the
// same store script in its dry mode (Store.Enqueue with DryRun), so a
// dry run can never disagree with the real run about a rule (contract §8
// --dry-run). Result.Created reports that a chain would be created
// (ReplayID is then ""), State the state it would start in (held behind
// a shut gate). It starts no span: nothing happens to trace. Errors as
// Replay's.
func (s *Service) Preview(ctx context.Context, id string) (Result, error) {
	return s.replay(ctx, id, true)
}

// replay does Replay's work, or with dry Preview's: every rule of a replay
// is here once, for both. Traced (and not dry), the replay's span is a
// child of the dead letter's trace context and the chain is created under
// it.
func (s *Service) replay(ctx context.Context, id string, dry bool) (r Result, err error) {
	c, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, policy.ErrNotFound) {
		return Result{DeadLetterID: id}, &policy.Error{Code: ErrNotDeadLetter, ID: id}
	}
	if err != nil {
		return Result{DeadLetterID: id}, err
	}
	r = Result{DeadLetterID: id, Endpoint: c.Endpoint, TraceContext: c.TraceContext}
	traceContext := c.TraceContext
	if s.tr != nil && !dry {
		var span *tracing.Span
		ctx, span = s.tr.StartReplay(ctx, c.TraceContext, id, c.Endpoint)
		traceContext = s.tr.Encode(ctx)
		defer func() {
			chain := ""
			if r.Created {
				chain = r.ReplayID
			}
			span.EndReplay(replayResult(r, err), chain)
		}()
	}
	if c.State != policy.DeadLettered {
		return r, &policy.Error{Code: ErrNotDeadLetter, ID: id, State: c.State}
	}
	ep, ok := s.o.Config.Endpoint(c.Endpoint)
	if !ok {
		return r, &policy.Error{Code: ErrUnknownEndpoint, ID: id, Endpoint: c.Endpoint}
	}
	nc := c.Request()
	nc.ReplayOf, nc.TraceContext = c.ID, traceContext
	res, err := s.o.Store.Enqueue(ctx, nc, policy.EnqueueOptions{DryRun: dry,
		Limits: policy.BacklogLimits{MaxItems: ep.MaxBacklogItems, MaxBytes: ep.MaxBacklogBytes}})
	switch {
	case errors.Is(err, policy.ErrDisabled):
		return r, &policy.Error{Code: ErrEndpointDisabled, ID: id, Endpoint: c.Endpoint,
			Detail: "re-enable it to replay its dead letters"}
	case errors.Is(err, policy.ErrBacklogFull):
		return r, &policy.Error{Code: ErrBacklogFull, ID: id, Endpoint: c.Endpoint}
	case err != nil:
		return r, err
	case res.Existing != nil:
		r.ReplayID = res.Existing.ID
		if res.Existing.Callout != nil {
			r.State = res.Existing.Callout.State
		}
		if r.State == policy.DeadLettered {
			return r, &policy.Error{Code: ErrSuperseded, ID: id, Other: r.ReplayID}
		}
		return r, nil
	}
	r.ReplayID, r.Created, r.State, r.Gate = res.ID, true, res.State, res.Gate
	if dry {
		return r, nil
	}
	if _, err := s.o.DeadLetters.MarkReplayed(ctx, id, res.ID); err != nil {
		s.o.Logger.LogAttrs(logx.WithCallout(logx.WithTraceContext(ctx, c.TraceContext), id), slog.LevelWarn,
			"replay: could not note the replay on its dead letter", slog.String("replay_id", res.ID), slog.Any("error", err))
	}
	if s.o.Wake != nil {
		s.o.Wake()
	}
	if s.o.OnReplay != nil {
		s.o.OnReplay(ctx, r)
	}
	return r, nil
}

// replayResult is Replay's audit result word for r and err.
func replayResult(r Result, err error) string {
	switch {
	case err != nil:
		return refusal(err)
	case !r.Created:
		return "already_replayed"
	}
	return "replayed"
}

// refusal is the short code of a replay error, as audit result and job
// item detail.
func refusal(err error) string {
	switch {
	case errors.Is(err, ErrNotDeadLetter):
		return "not_found"
	case errors.Is(err, ErrUnknownEndpoint):
		return "unknown_endpoint"
	case errors.Is(err, ErrEndpointDisabled):
		return "endpoint_disabled"
	case errors.Is(err, ErrBacklogFull):
		return "backlog_full"
	case errors.Is(err, ErrSuperseded):
		return "superseded"
	case errors.Is(err, policy.ErrUnavailable):
		return "store_unavailable"
	}
	return "error"
}

// DeadLetter returns dead letter id's record and replay mark. Errors:
// ErrNotDeadLetter, policy.ErrUnavailable.
func (s *Service) DeadLetter(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error) {
	c, m, err := s.Callout(ctx, id)
	switch {
	case errors.Is(err, policy.ErrNotFound):
		return nil, m, &policy.Error{Code: ErrNotDeadLetter, ID: id}
	case err == nil && c.State != policy.DeadLettered:
		return nil, m, &policy.Error{Code: ErrNotDeadLetter, ID: id, State: c.State}
	}
	return c, m, err
}

// Callout returns callout id's record, whatever its state, and its replay
// mark (zero unless it is a replayed dead letter) with its Resolution.
// Errors: policy.ErrNotFound, policy.ErrUnavailable.
func (s *Service) Callout(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error) {
	c, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return nil, policy.ReplayMark{}, err
	}
	m, err := s.o.DeadLetters.ReplayMarkOf(ctx, id)
	if err == nil && m.ReplayedBy != "" {
		err = s.resolveMark(ctx, id, &m)
	}
	return c, m, err
}

// Discard deletes dead letter id (contract §7 "Discarded ... deletes the
// proxy's copy"). The caller audit-logs it. Errors: ErrNotDeadLetter,
// policy.ErrUnavailable.
func (s *Service) Discard(ctx context.Context, id string) error {
	err := s.o.Store.Discard(ctx, id)
	if errors.Is(err, policy.ErrNotFound) || errors.Is(err, policy.ErrNotDeadLettered) {
		return &policy.Error{Code: ErrNotDeadLetter, ID: id, Detail: err.Error()}
	}
	return err
}
