package proxy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// write serves a write (POST, PUT, PATCH, DELETE) and any request with
// Prefer: respond-async (contract §4): the callout is recorded — and its
// idempotency key reserved — before anything is dispatched, so nothing
// answered with a 202 can be lost, and a duplicate is answered from the
// record (contract §5).
func (s *Server) write(w http.ResponseWriter, r *http.Request, in *inbound) {
	nc := policy.NewCallout{
		Endpoint: in.ep.Name, Issuer: in.caller.Issuer, Method: r.Method, Path: in.suffix,
		Query: r.URL.RawQuery, Header: forward.OutboundHeader(r.Header, nil), Body: in.body,
		IdempotencyKey: in.key, SourceRecord: in.source, TraceContext: s.tr.Encode(r.Context()),
	}
	// The store packs the request (headers and body) into one value before
	// it sends it: a second copy of the body in memory, which the budget
	// counts too (limits.max_inflight_bytes), until the request ends.
	if h := limit.HolderFrom(r.Context()); h != nil {
		_, hb := headerSize(r)
		if err := h.Acquire(r.Context(), int64(len(in.body)+hb)); err != nil {
			s.reject(w, r, in.ep.Name, overloaded(policy.Rejected))
			return
		}
	}
	// The record and the attempt outlive a caller that hangs up.
	ctx := context.WithoutCancel(r.Context())
	if in.prefs.respondAsync {
		s.enqueue(ctx, w, r, in, nc)
		return
	}
	bctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	res, err := s.d.Store.Begin(bctx, nc, policy.BeginOptions{
		Lease: in.ep.Rules().Lease(), Breaker: in.ep.Rules().Breaker(), Limits: in.ep.Rules().Backlog,
	})
	switch {
	case err != nil:
		s.reject(w, r, in.ep.Name, storeRefusal(err, "writes are not forwarded"))
	case res.Existing != nil:
		s.admitted(r, in, tracing.AdmitDuplicate, res.Existing.ID, "")
		s.duplicate(w, r, in, res.Existing)
	case res.Held != nil:
		s.admitted(r, in, tracing.AdmitHeld, res.Held.ID, res.Held.Gate.State)
		s.countDeferred(in.ep.Name, res.Held.Gate)
		s.d.Metrics.Idempotency.WithLabelValues(keyResult(in.key, "new")).Inc()
		s.accepted(ctx, w, in.ep.Name, res.Held.ID, "")
	default:
		s.admitted(r, in, tracing.AdmitAttempt, res.Claimed.ID, "")
		s.d.Metrics.Idempotency.WithLabelValues(keyResult(in.key, "new")).Inc()
		s.attemptInline(ctx, w, r, in, res.Claimed)
	}
}

// enqueue records a Prefer: respond-async callout for the dispatcher and
// answers 202 at once.
func (s *Server) enqueue(ctx context.Context, w http.ResponseWriter, r *http.Request, in *inbound,
	nc policy.NewCallout) {
	ectx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	res, err := s.d.Store.Enqueue(ectx, nc, policy.EnqueueOptions{Limits: in.ep.Rules().Backlog})
	switch {
	case err != nil:
		s.reject(w, r, in.ep.Name, storeRefusal(err, "writes are not forwarded"))
	case res.Existing != nil:
		s.admitted(r, in, tracing.AdmitDuplicate, res.Existing.ID, "")
		s.duplicate(w, r, in, res.Existing)
	default:
		s.d.Metrics.Idempotency.WithLabelValues(keyResult(in.key, "new")).Inc()
		if res.State == policy.Held {
			s.admitted(r, in, tracing.AdmitHeld, res.ID, res.Gate.State)
			s.countDeferred(in.ep.Name, res.Gate)
		} else {
			s.admitted(r, in, tracing.AdmitScheduled, res.ID, "")
		}
		if s.d.Wake != nil {
			s.d.Wake()
		}
		s.accepted(ctx, w, in.ep.Name, res.ID, "respond-async")
	}
}

// attemptInline makes the first attempt of a recorded callout while the
// caller waits, then inline retries while Prefer: wait=N allows (contract §4),
// and completes it: the upstream's answer goes back when the callout
// ended (succeeded, failed); a 202 when it was scheduled.
func (s *Server) attemptInline(ctx context.Context, w http.ResponseWriter, r *http.Request,
	in *inbound, cl *policy.Claimed) {
	applied, mode := "", tracing.ModeSynchronous
	for {
		actx, span := s.startAttempt(ctx, r, in, cl, cl.Kind, mode)
		mode = tracing.ModeInline
		req := in.request(r)
		req.CalloutID = cl.ID
		att := s.d.Upstream.Do(actx, in.ep, req)
		var pe *problem.Error
		if errors.As(att.Err, &pe) {
			span.EndAttempt(tracing.AttemptEnd{Outcome: policy.Rejected, Problem: string(pe.Code)})
			s.abandon(actx, cl, in, pe)
			s.reject(w, r, in.ep.Name, pe)
			return
		}
		cls := s.observe(actx, in.ep, cl.ID, cl.Attempt, att, cl.Kind)
		comp := policy.Decide(policy.DecideInput{Policy: s.d.Config.Policy, Rules: in.ep.Rules(), Claimed: cl,
			Result: att.Result(), Class: cls, Now: s.d.Now(), Rand: s.d.Rand, Sync: true})
		wait, inline := s.inlineDelay(in, cl.Attempt, comp, att)
		if inline {
			comp.Action = policy.ActionRetryInline
			applied = "wait=" + formatSeconds(in.prefs.wait)
		}
		cctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
		res, err := s.d.Completions.Complete(cctx, cl, comp)
		cancel()
		end := s.attemptEnd(att, cls, comp, res)
		if err != nil {
			span.EndAttempt(end)
			s.unrecorded(actx, w, in, cl, att, cls, err)
			return
		}
		span.EndAttempt(end)
		s.d.Breakers.Changed(actx, in.ep, res.Breaker)
		if res.State == policy.Held {
			// Its retry met a shut gate (a 429's pause, the breaker it opened).
			s.countDeferred(in.ep.Name, policy.Gate{State: res.Gate})
		}
		if res.State == policy.InFlight {
			sleep(ctx, wait)
			continue
		}
		s.finishSync(ctx, w, in, cl, att, cls, comp, res, applied)
		return
	}
}

// finishSync answers after the last synchronous attempt's completion.
func (s *Server) finishSync(ctx context.Context, w http.ResponseWriter, in *inbound, cl *policy.Claimed,
	att forward.Attempt, cls policy.Classification, comp policy.Completion, res policy.CompleteResult,
	applied string) {
	switch res.State {
	case policy.Succeeded, policy.Failed:
		w.Header().Set("Callout-Id", cl.ID)
		if applied != "" {
			w.Header().Set("Preference-Applied", applied)
		}
		s.respond(w, in.ep, att, cls)
	case policy.DeadLettered:
		s.d.Metrics.DeadLetters.WithLabelValues(in.ep.Name, string(res.Reason)).Inc()
		s.d.Events.Finished(ctx, policy.Finished{ID: cl.ID, Endpoint: in.ep.Name,
			State: res.State, Reason: res.Reason, NotifyOwner: res.NotifyOwner && s.d.Config.CanNotify(in.ep)})
		s.deadOnArrival(w, in, cl.ID, res.Reason, att, cls)
	default: // scheduled or held
		s.d.Metrics.RetriesScheduled.WithLabelValues(in.ep.Name, cls.Reason).Inc()
		s.accepted(ctx, w, in.ep.Name, cl.ID, applied)
	}
}

// deadOnArrival answers a synchronous attempt whose callout became a dead
// letter at once: an ambiguous write (sent to an `idempotency: ignored`
// upstream, no answer) or one that exhausted its attempts inline.
func (s *Server) deadOnArrival(w http.ResponseWriter, in *inbound, id string, reason policy.DeadLetterReason,
	att forward.Attempt, cls policy.Classification) {
	if att.Response != nil {
		w.Header().Set("Callout-Id", id)
		writeUpstream(w, att.Response, cls.Outcome)
		return
	}
	detail := "the upstream did not answer and the callout was dead-lettered (" + string(reason) + ")"
	if reason == policy.DeadLetterAmbiguous {
		detail = "the request was sent to endpoint " + in.ep.Name + " but got no answer (" + cls.Reason +
			"); the upstream does not honour Idempotency-Key, so the proxy will not retry it: it is a dead " +
			"letter with reason ambiguous — check the upstream before replaying it"
	}
	problem.Write(w, &problem.Error{Code: problem.Ambiguous, Outcome: policy.Permanent, CalloutID: id, Detail: detail})
}

// unrecorded answers when the completion of a synchronous attempt could not
// be written. With a final upstream answer it goes back, marked
// `Callout-Record: unrecorded` (contract §4). Otherwise the callout is still
// recorded in flight: its lease expires and a dispatcher retries it, so the
// caller gets the 202 it would have had.
func (s *Server) unrecorded(ctx context.Context, w http.ResponseWriter, in *inbound, cl *policy.Claimed,
	att forward.Attempt, cls policy.Classification, err error) {
	s.d.Logger.Error("completion not recorded", "endpoint", in.ep.Name, "callout_id", cl.ID, "error", err,
		s.tr.LogAttr(ctx))
	if cls.Outcome != policy.Retryable {
		w.Header().Set("Callout-Id", cl.ID)
		w.Header().Set("Callout-Record", "unrecorded")
		s.respond(w, in.ep, att, cls)
		return
	}
	writeAccepted(w, cl.ID, "", nil)
}

// abandon deletes a callout whose dispatch was refused before anything was
// sent (a blocked address), with its reservation: a rejection before
// dispatch is never the key's result (contract §5).
func (s *Server) abandon(ctx context.Context, cl *policy.Claimed, in *inbound, pe *problem.Error) {
	if err := s.d.Store.Release(ctx, cl); err != nil {
		s.d.Logger.Warn("releasing a refused callout failed", "endpoint", in.ep.Name,
			"callout_id", cl.ID, "code", string(pe.Code), "error", err, s.tr.LogAttr(ctx))
	}
}

// storeOpTimeout bounds one store operation on the request path, so a hung
// Redis turns into a prompt 503 store-unavailable (contract §4) instead of an
// answer later than the caller's own timeout (Apex: 10 s by default).
const storeOpTimeout = 2 * time.Second

// inlinePolicy is the short schedule of inline retries under Prefer: wait:
// the policy's full-jitter backoff (contract §3) with a 100 ms base and a 2 s
// ceiling.
func inlinePolicy(p policy.Policy) policy.Policy {
	p.BaseDelay, p.MaxDelay = 100*time.Millisecond, 2*time.Second
	return p
}

// inlineDelay decides whether the next attempt is made inline: only for a
// retry, only under Prefer: wait=N, and only while the wait before it plus
// an attempt as long as the one just made still fits in N from the
// request's arrival (contract §4 "while they fit in N seconds"). Predicting by
// the last attempt lets a fast-failing upstream be retried inline under a
// wait shorter than the attempt limit; an upstream that suddenly slows down
// can make the answer late by at most one attempt limit. n is the
// number of the attempt just made: the delay backs off like the policy's
// (uniform(0, min(2 s, 100 ms · multiplier^(n−1)))), so a fast-failing
// upstream is not hammered every 100 ms until its attempts run out.
func (s *Server) inlineDelay(in *inbound, n int, comp policy.Completion, att forward.Attempt) (time.Duration, bool) {
	if comp.Action != policy.ActionRetry || in.prefs.wait <= 0 {
		return 0, false
	}
	now := s.d.Now()
	ra, haveRA := time.Duration(0), false
	if att.Response != nil {
		ra, haveRA = policy.ParseRetryAfter(att.Response.Header.Get("Retry-After"), now)
	}
	d := policy.NextDelay(inlinePolicy(s.d.Config.Policy), n, ra, haveRA, s.d.Rand)
	fits := now.Add(d+att.Duration).Sub(in.start) <= in.prefs.wait
	return d, fits
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// storeRefusal is the refusal of a request whose store call failed: the
// problem of problem.FromStore (the one table of domain errors), saying
// what the proxy did not do (notDone) when the store is unreachable
// (contract §4 "Redis unreachable").
func storeRefusal(err error, notDone string) *problem.Error {
	pe := problem.FromStore(err)
	if pe.Code != problem.StoreUnavailable {
		return pe
	}
	cp := *pe
	cp.Detail += "; " + notDone
	return &cp
}

// keyResult labels callout_idempotency_total: "missing" for a write
// without a key, else result.
func keyResult(key, result string) string {
	if key == "" {
		return "missing"
	}
	return result
}
