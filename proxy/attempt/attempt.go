// Package attempt makes one attempt of a claimed callout: the one path every
// attempt takes, whether the callout listener makes it while its caller
// waits (package proxy: the synchronous first attempt and the inline retries
// of Prefer: wait, contract §4) or the dispatcher makes it later
// (proxy/dispatch). Runner.Run sends the request (proxy/forward), classifies
// the outcome (contract §2), decides what follows (policy.Decide, contract
// §3, §6, §7), completes the callout in the store, tells the breaker
// watcher, counts it, logs it (forward.LogAttempt) and ends its span
// (docs/tracing.md). The callers differ only in what they do with the
// Result: answer the caller or go on inline, or free a dispatcher slot.
//
// Both the root proxy package and proxy/dispatch import it; it imports
// neither, and no store package: the interfaces it needs are declared here.
package attempt

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// Upstream makes one attempt. *forward.Forwarder implements it.
type Upstream interface {
	Do(ctx context.Context, ep *config.Endpoint, req *forward.Request) forward.Attempt
}

// Completions applies the completion of an attempt atomically (the
// callout's state, its attempt log, the breaker, the idempotency record:
// ARCHITECTURE.md "Data flow"). *redisstore.Store implements it, and
// *redisstore.Completer by pipelining the completions of concurrent
// attempts. Errors: policy.ErrStaleLease (the lease was lost; nothing was
// changed), policy.ErrUnavailable.
type Completions interface {
	Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error)
}

// Releaser deletes a claimed callout with its idempotency reservation, as if
// it had never been recorded (policy.ReleasesRefusal). *redisstore.Store
// implements it.
type Releaser interface {
	Release(ctx context.Context, cl *policy.Claimed) error
}

// BreakerWatcher is told what each completed attempt did to its endpoint's
// breaker (metrics, logs, auto-disable). *dispatch.Watcher implements it.
type BreakerWatcher interface {
	Changed(ctx context.Context, ep *config.Endpoint, ch policy.BreakerChange)
}

// Stats is told of every attempt sent and every dead letter, for the
// console's charts (docs/console.md "Charts"). *stats.Recorder
// (proxy/redisstore/stats) implements it, counting in memory. It must not
// block.
type Stats interface {
	// Attempt counts one attempt of endpoint classed outcome that took d.
	Attempt(endpoint string, outcome policy.Outcome, d time.Duration)
	// DeadLetter counts n callouts of endpoint that became dead letters.
	DeadLetter(endpoint string, n int)
}

// Runner makes attempts. Config, Upstream, Completions, Metrics, Logger, Now
// and Rand are required; the others are optional. A Runner is not changed by
// Run and is safe for concurrent use.
type Runner struct {
	Config      *config.Config
	Upstream    Upstream
	Completions Completions
	// Releaser releases a refused synchronous first attempt; required for
	// Calls with Sync.
	Releaser Releaser
	// Breakers is told of every completed attempt's breaker change; nil:
	// nobody.
	Breakers BreakerWatcher
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// Tracer makes each attempt's span; nil: tracing off.
	Tracer *tracing.Tracer
	// Now is the clock; Rand the jitter source, in [0,1).
	Now  func() time.Time
	Rand func() float64
	// Ended, optional, is called after an attempt ended its callout as a
	// dead letter, or a dispatched callout succeeded: the endings whose
	// Salesforce writes (contract §7, §8) the completion queued in the
	// outbox. It must not block (the Salesforce writer's Wake).
	Ended func()
	// Stats, optional, counts every attempt Observe sees and every dead
	// letter DeadLettered accounts for.
	Stats Stats
	// StoreTimeout bounds each store call of Run (the completion, the
	// release); zero: no bound but the context's.
	StoreTimeout time.Duration
}

// Call is one attempt to make.
type Call struct {
	// Endpoint is the callout's endpoint.
	Endpoint *config.Endpoint
	// Claimed is the leased callout. After an accepted inline retry the
	// store has updated it in place (its Attempt, Kind and lease) for the
	// next Run.
	Claimed *policy.Claimed
	// Request is what to send: the caller's request (synchronous) or the
	// stored one (dispatched).
	Request *forward.Request
	// Sync is true when the caller waits for the answer (policy.DecideInput
	// Sync; policy.ReleasesRefusal).
	Sync bool
	// Mode is the span's mode: tracing.ModeSynchronous, ModeInline or
	// ModeDispatched.
	Mode string
	// WaitUntil is the end of a Prefer: wait=N window (the request's
	// arrival plus N, contract §4): a retry is made inline while its delay
	// and an attempt as long as this one still fit before it. Zero: no
	// inline retry.
	WaitUntil time.Time
}

// Result is what one Run did.
type Result struct {
	// Attempt is the upstream attempt; zero when the callout was not
	// dispatched (exhausted before sending: Completion.Attempt is nil).
	Attempt forward.Attempt
	// Class is the attempt's classification; outcome rejected, reason the
	// problem code, for a refusal.
	Class policy.Classification
	// Refusal is set when the proxy refused the attempt before sending
	// anything (a blocked address, an unresolvable credential).
	Refusal *problem.Error
	// Released: the refusal released the callout (policy.ReleasesRefusal);
	// nothing was completed.
	Released bool
	// Completion is what the policy decided; Completed what the store did
	// with it (zero when Err is set or the callout was released).
	Completion policy.Completion
	Completed  policy.CompleteResult
	// Err is the failure of the completion or the release, logged already.
	Err error
	// Wait is the delay before the next inline attempt when Completed.State
	// is in_flight (an accepted inline retry).
	Wait time.Duration
}

// Run makes c's attempt and completes it. A callout whose window closed
// while it waited (held by a breaker or a pause, or reaped, past max_age;
// or over max_attempts) is exhausted (contract §3) and is not dispatched:
// its completion has no Attempt, so the store undoes the claim's count and
// leaves the breaker alone.
func (r *Runner) Run(ctx context.Context, c Call) Result {
	ep, cl := c.Endpoint, c.Claimed
	// Every log line of this attempt carries the callout's id and the
	// trace id it was accepted under, tracing on or off (contract §12).
	ctx = logx.WithCallout(logx.WithTraceContext(ctx, cl.TraceContext), cl.ID)
	if policy.Exhausted(r.Config.Policy, cl.Attempt-1, cl.FirstAttemptAt, r.Now()) {
		return r.complete(ctx, c, Result{Completion: policy.Completion{Action: policy.ActionDeadLetter,
			Reason: policy.DeadLetterExhausted, Breaker: ep.Rules().Breaker(), Lease: ep.Rules().Lease()}}, nil)
	}
	ctx, span := r.startSpan(ctx, c)
	req := *c.Request
	req.CalloutID = cl.ID // a standard_webhooks endpoint's webhook-id (credentials.WebhookID)
	// The response's bytes count toward the callout's organisation's share
	// of the memory budget where no ingress holder carries them (a
	// dispatched attempt, contract §10).
	req.Issuer = cl.Issuer
	res := Result{Attempt: r.Upstream.Do(ctx, ep, &req)}
	if pe, ok := errors.AsType[*problem.Error](res.Attempt.Err); ok {
		// Refused before sending: logged as an attempt, never counted as one.
		res.Refusal, res.Class = pe, policy.Classification{Outcome: policy.Rejected, Reason: string(pe.Code)}
		forward.LogAttempt(ctx, r.Logger, r.Config.Log.Access, ep.Name, cl.ID, cl.Attempt, cl.Kind, res.Attempt,
			res.Class, r.Tracer.LogAttr(ctx))
	} else {
		res.Class = r.Observe(ctx, ep, cl.ID, cl.Attempt, cl.Kind, res.Attempt)
	}
	if res.Refusal != nil && policy.ReleasesRefusal(c.Sync, cl) {
		res.Released = true
		sctx, cancel := r.storeContext(ctx)
		res.Err = r.Releaser.Release(sctx, cl)
		cancel()
		if res.Err != nil {
			r.log(ctx, c).WarnContext(ctx, "releasing a refused callout failed", slog.String("code", string(res.Refusal.Code)),
				slog.Any("error", res.Err))
		}
		span.EndAttempt(tracing.AttemptEnd{Outcome: policy.Rejected, Problem: string(res.Refusal.Code)})
		return res
	}
	res.Completion = policy.Decide(policy.DecideInput{Policy: r.Config.Policy, Rules: ep.Rules(), Claimed: cl,
		Result: res.Attempt.Result(), Class: res.Class, Now: r.Now(), Rand: r.Rand, Sync: c.Sync})
	if wait, ok := r.inlineDelay(c, res); ok {
		res.Completion.Action, res.Wait = policy.ActionRetryInline, wait
	}
	return r.complete(ctx, c, res, span)
}

// Observe classifies att (contract §2), attempt n of callout calloutID ("" for
// a read, which has no record), counts it in callout_attempts_total and
// its duration, and logs it as log.access says (forward.LogAttempt);
// traced, the line carries the trace_id of ctx (the attempt's). Run observes
// every attempt it sends; the read path observes its own with it.
func (r *Runner) Observe(ctx context.Context, ep *config.Endpoint, calloutID string, n int, kind policy.Kind,
	att forward.Attempt) policy.Classification {
	cls := att.Classify()
	r.Metrics.ObserveAttempt(ep.Name, string(kind), cls, att.Duration)
	if r.Stats != nil {
		r.Stats.Attempt(ep.Name, cls.Outcome, att.Duration)
	}
	forward.LogAttempt(ctx, r.Logger, r.Config.Log.Access, ep.Name, calloutID, n, kind, att, cls, r.Tracer.LogAttr(ctx))
	return cls
}

// complete applies res.Completion, ends span (nil: none) and accounts for
// the result: the breaker watcher, the retry, deferral and dead-letter
// counts, the dead-letter log line, Ended.
func (r *Runner) complete(ctx context.Context, c Call, res Result, span *tracing.Span) Result {
	ep := c.Endpoint
	sctx, cancel := r.storeContext(ctx)
	res.Completed, res.Err = r.Completions.Complete(sctx, c.Claimed, res.Completion)
	cancel()
	span.EndAttempt(r.spanEnd(res))
	if res.Err != nil {
		log := r.log(ctx, c)
		if errors.Is(res.Err, policy.ErrStaleLease) {
			log.WarnContext(ctx, "lease lost before completion; another replica owns the callout now")
			return res
		}
		// The lease will expire and the reaper will return the callout.
		log.ErrorContext(ctx, "completion failed; the callout will be re-dispatched after its lease",
			slog.Any("error", res.Err))
		return res
	}
	if r.Breakers != nil && res.Completion.Attempt != nil {
		r.Breakers.Changed(ctx, ep, res.Completed.Breaker)
	}
	switch res.Completed.State {
	case policy.Scheduled, policy.Held:
		// The retry label is the failed attempt's reason, as the completion
		// recorded it (Completion.Error), on either path.
		r.Metrics.RetriesScheduled.WithLabelValues(ep.Name, res.Completion.Error).Inc()
		if res.Completed.State == policy.Held {
			// The retry met a shut gate: held, not scheduled (contract §4, §6).
			r.Metrics.Deferred.WithLabelValues(ep.Name, string(res.Completed.Gate)).Inc()
		}
	case policy.DeadLettered:
		var last policy.Outcome
		if a := res.Completion.Attempt; a != nil {
			last = a.Outcome
		}
		r.deadLettered(ctx, ep, c.Claimed.ID, res.Completed, last)
	case policy.Succeeded:
		if !c.Sync && r.Ended != nil {
			r.Ended()
		}
	}
	return res
}

// DeadLettered accounts for callout id of ep that became a dead letter
// (res.State dead_lettered): callout_dead_letters_total{endpoint,reason},
// the "dead letter" warning line — its state (dead_lettered), attempts,
// last status and error as the completion left them (res; zero for one
// drained by a disable, which had no completion), last_outcome (the class
// of the attempt that ended it, contract §12; absent when no attempt did:
// drained by a disable, found exhausted before sending) and notify_owner:
// whether this dead letter starts an
// outage whose owner notification reaches someone (decided in the store's
// one Lua rule, owner_notice; read here as it is) — and
// Ended. The dispatcher calls it too for the dead letters a claim found
// on a disabled endpoint.
func (r *Runner) DeadLettered(ctx context.Context, ep *config.Endpoint, id string, res policy.CompleteResult) {
	r.deadLettered(ctx, ep, id, res, "")
}

// deadLettered is DeadLettered with the class of the attempt that ended
// the callout ("" when none did).
func (r *Runner) deadLettered(ctx context.Context, ep *config.Endpoint, id string, res policy.CompleteResult,
	last policy.Outcome) {
	r.Metrics.DeadLetters.WithLabelValues(ep.Name, string(res.Reason)).Inc()
	lastOutcome := slog.Attr{} // an empty Attr is not written
	if last != "" {
		lastOutcome = slog.String("last_outcome", string(last))
	}
	r.Logger.LogAttrs(ctx, slog.LevelWarn, "dead letter", slog.String("endpoint", ep.Name),
		slog.String("callout_id", id), slog.String("state", string(policy.DeadLettered)),
		slog.String("dead_letter_reason", string(res.Reason)),
		slog.Int("attempts", res.Attempts), slog.Int("last_status", res.LastStatus),
		slog.String("last_error", res.LastError), lastOutcome,
		slog.Bool("notify_owner", res.NotifyOwner), r.Tracer.LogAttr(ctx))
	if r.Stats != nil {
		r.Stats.DeadLetter(ep.Name, 1)
	}
	if r.Ended != nil {
		r.Ended()
	}
}

// storeContext is ctx bounded by StoreTimeout.
func (r *Runner) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.StoreTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.StoreTimeout)
}

// log is the logger of c's failures, with its endpoint, callout and
// attempt. Built only on failure: a logger With its attributes costs every
// attempt allocations otherwise.
func (r *Runner) log(ctx context.Context, c Call) *slog.Logger {
	log := r.Logger.With(slog.String("endpoint", c.Endpoint.Name), slog.String("callout_id", c.Claimed.ID),
		slog.Int("attempt", c.Claimed.Attempt))
	if a := r.Tracer.LogAttr(ctx); a.Key != "" {
		log = log.With(a)
	}
	return log
}

// startSpan starts c's attempt span (tracing on) under ctx: for a
// dispatched attempt, the callout's resumed trace context.
func (r *Runner) startSpan(ctx context.Context, c Call) (context.Context, *tracing.Span) {
	if r.Tracer == nil {
		return ctx, nil
	}
	return r.Tracer.StartAttempt(ctx, tracing.AttemptStart{Endpoint: c.Endpoint.Name, Upstream: c.Endpoint.BaseURL,
		CalloutID: c.Claimed.ID, Method: c.Request.Method, N: c.Claimed.Attempt, Kind: c.Claimed.Kind, Mode: c.Mode})
}

// spanEnd is how res's attempt ended, for its span: the policy's decision
// and the store's result (zero when the completion failed); a refusal
// carries its problem code instead of a reason. The zero AttemptEnd when
// tracing is off.
func (r *Runner) spanEnd(res Result) tracing.AttemptEnd {
	if r.Tracer == nil {
		return tracing.AttemptEnd{}
	}
	e := tracing.Decided(res.Attempt.Result(), res.Class, res.Completion, r.Config.Policy, r.Now())
	if res.Refusal != nil {
		e.Problem, e.Reason = string(res.Refusal.Code), ""
	}
	if res.Err == nil {
		e.State, e.DeadLetter = res.Completed.State, res.Completed.Reason
	}
	return e
}

// inlinePolicy is the short schedule of inline retries under Prefer: wait:
// the policy's full-jitter backoff (contract §3) with a 100 ms base and a 2 s
// ceiling.
func inlinePolicy(p policy.Policy) policy.Policy {
	p.BaseDelay, p.MaxDelay = 100*time.Millisecond, 2*time.Second
	return p
}

// inlineDelay decides whether the next attempt is made inline: only for a
// retry, only under Prefer: wait=N (c.WaitUntil), and only while the wait
// before it plus an attempt as long as the one just made still fits before
// c.WaitUntil (contract §4 "while they fit in N seconds"). Predicting by the
// last attempt lets a fast-failing upstream be retried inline under a wait
// shorter than the attempt limit; an upstream that suddenly slows down can
// make the answer late by at most one attempt limit. The delay backs off
// like the policy's by the number of the attempt just made, n
// (uniform(0, min(2 s, 100 ms · multiplier^(n−1)))), so a fast-failing
// upstream is not hammered every 100 ms until its attempts run out.
func (r *Runner) inlineDelay(c Call, res Result) (time.Duration, bool) {
	if res.Completion.Action != policy.ActionRetry || c.WaitUntil.IsZero() {
		return 0, false
	}
	now := r.Now()
	ra, haveRA := time.Duration(0), false
	if res.Attempt.Response != nil {
		ra, haveRA = policy.ParseRetryAfter(res.Attempt.Response.Header.Get("Retry-After"), now)
	}
	d := policy.NextDelay(inlinePolicy(r.Config.Policy), c.Claimed.Attempt, ra, haveRA, r.Rand)
	return d, !now.Add(d + res.Attempt.Duration).After(c.WaitUntil)
}
