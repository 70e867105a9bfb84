package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/attempt"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
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
	if s.tr == nil {
		// Tracing off: the caller's trace context, so that the log lines
		// of every later attempt carry its trace_id (contract §12).
		nc.TraceContext = logx.EncodeTrace(r.Context())
	}
	// The store packs the request (headers and body) into one value before
	// it sends it: a second copy of the body in memory, which the budget
	// counts too (limits.max_inflight_bytes), until the request ends.
	if h := limit.HolderFrom(r.Context()); h != nil {
		_, hb := headerSize(r)
		if err := h.Acquire(r.Context(), int64(len(in.body)+hb)); err != nil {
			s.reject(w, r, in.ep.Name, s.overloadedBy(err, policy.Rejected))
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
	if s.answered(w, r, in, err, res.Existing) {
		return
	}
	s.d.Metrics.Idempotency.WithLabelValues(keyResult(in.key, "new")).Inc()
	switch {
	case res.Held != nil:
		s.admitted(r, in, tracing.AdmitHeld, res.Held.ID, res.Held.Gate.State)
		s.countDeferred(in.ep.Name, res.Held.Gate)
		s.accepted(ctx, w, in.ep.Name, res.Held.ID, "")
	default:
		s.admitted(r, in, tracing.AdmitAttempt, res.Claimed.ID, "")
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
	if s.answered(w, r, in, err, res.Existing) {
		return
	}
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

// answered answers a write the store created nothing for: refused (err,
// by the one table of domain errors), or a duplicate of the callout that
// holds its key (ex, contract §5). It reports whether it answered; false:
// a new callout was recorded and the caller goes on.
func (s *Server) answered(w http.ResponseWriter, r *http.Request, in *inbound, err error, ex *policy.Existing) bool {
	switch {
	case err != nil:
		s.reject(w, r, in.ep.Name, storeRefusal(err, "writes are not forwarded"))
	case ex != nil:
		s.admitted(r, in, tracing.AdmitDuplicate, ex.ID, "")
		s.duplicate(w, r, in, ex)
	default:
		return false
	}
	return true
}

// attemptInline makes the first attempt of a recorded callout while the
// caller waits, then inline retries while Prefer: wait=N allows (contract
// §4), each with the one attempt runner (proxy/attempt), which completes
// it; what is left here is the answer: the upstream's when the callout
// ended (succeeded, failed), a 202 when it was scheduled or held, the
// refusal when the proxy refused to send it. A write whose connection is
// cut for its organisation's connection share while it runs (contract §10,
// limit.Cut) is answered 202 at once, as a callout in flight; its attempt
// goes on, and so does this handler, which keeps the body's bytes in the
// memory budget until the attempt ends.
func (s *Server) attemptInline(ctx context.Context, w http.ResponseWriter, r *http.Request,
	in *inbound, cl *policy.Claimed) {
	cut := limit.Cut(r.Context())
	if cut == nil {
		s.answerInline(ctx, w, r, in, cl, s.runInline(ctx, r, in, cl))
		return
	}
	done := make(chan inlineResult, 1)
	go func() { done <- s.runInline(ctx, r, in, cl) }()
	select {
	case res := <-done:
		s.answerInline(ctx, w, r, in, cl, res)
	case <-cut:
		w.Header().Set("Connection", "close")
		s.accepted(ctx, w, in.ep.Name, cl.ID, "")
		_ = http.NewResponseController(w).Flush()
		<-done
	}
}

// inlineResult is the last synchronous attempt's result and the
// Preference-Applied it earned ("" or "wait=N").
type inlineResult struct {
	attempt.Result
	applied string
}

// runInline runs the attempts of attemptInline until one is not retried
// inline.
func (s *Server) runInline(ctx context.Context, r *http.Request, in *inbound, cl *policy.Claimed) inlineResult {
	applied, mode, waitUntil := "", tracing.ModeSynchronous, time.Time{}
	if in.prefs.wait > 0 {
		waitUntil = in.start.Add(in.prefs.wait)
	}
	for {
		res := s.attempts.Run(ctx, attempt.Call{Endpoint: in.ep, Claimed: cl, Request: in.request(r), Sync: true,
			Mode: mode, WaitUntil: waitUntil})
		mode = tracing.ModeInline
		if res.Completion.Action == policy.ActionRetryInline {
			applied = "wait=" + formatSeconds(in.prefs.wait)
		}
		if !res.Released && res.Err == nil && res.Completed.State == policy.InFlight {
			sleep(ctx, res.Wait)
			continue
		}
		return inlineResult{res, applied}
	}
}

// answerInline answers attemptInline's caller from its last attempt.
func (s *Server) answerInline(ctx context.Context, w http.ResponseWriter, r *http.Request, in *inbound,
	cl *policy.Claimed, res inlineResult) {
	switch {
	case res.Released:
		s.reject(w, r, in.ep.Name, res.Refusal)
	case res.Err != nil:
		s.unrecorded(w, in, cl, res.Result)
	default:
		s.finishSync(ctx, w, in, cl, res.Result, res.applied)
	}
}

// finishSync answers after the last synchronous attempt's completion.
func (s *Server) finishSync(ctx context.Context, w http.ResponseWriter, in *inbound, cl *policy.Claimed,
	res attempt.Result, applied string) {
	switch res.Completed.State {
	case policy.Succeeded, policy.Failed:
		w.Header().Set("Callout-Id", cl.ID)
		if applied != "" {
			w.Header().Set("Preference-Applied", applied)
		}
		s.respond(w, in.ep, res.Attempt, res.Class)
	case policy.DeadLettered:
		s.deadOnArrival(w, in, cl.ID, res)
	default: // scheduled or held
		s.accepted(ctx, w, in.ep.Name, cl.ID, applied)
	}
}

// deadOnArrival answers a synchronous attempt whose callout became a dead
// letter at once: one that exhausted its attempts inline (contract §4 "the
// wait used every attempt"), an ambiguous write (sent to an `idempotency:
// ignored` upstream, no answer), or an inline retry the proxy refused to
// send (the callout's earlier attempt reached the upstream, so it is kept:
// policy.ReleasesRefusal). It answers as a finished callout does, as a
// repeat of its key would (contract §5): state dead_lettered and the
// reason in headers and body, class rejected, so no caller sends it again;
// the last attempt's class goes apart in last_outcome (contract §12).
func (s *Server) deadOnArrival(w http.ResponseWriter, in *inbound, id string, res attempt.Result) {
	reason := res.Completed.Reason
	if res.Refusal != nil {
		pe := *res.Refusal
		pe.CalloutID, pe.State, pe.DeadLetterReason = id, policy.DeadLettered, reason
		problem.Write(w, &pe)
		return
	}
	last := "no answer (" + res.Class.Reason + ")"
	if st := res.Completed.LastStatus; st != 0 {
		last = "status " + strconv.Itoa(st)
	}
	detail := "the wait used every attempt (" + strconv.Itoa(res.Completed.Attempts) + ", the last " + last +
		", class " + string(res.Class.Outcome) + "): the callout is a dead letter with reason " + string(reason) +
		" and the proxy will not send it again; replay it with calloutctl or from Salesforce"
	if reason == policy.DeadLetterAmbiguous {
		detail = "the request was sent to endpoint " + in.ep.Name + " but got no answer (" + res.Class.Reason +
			"); the upstream does not honour Idempotency-Key, so the proxy will not retry it: it is a dead " +
			"letter with reason ambiguous — check the upstream before replaying it"
	}
	problem.Write(w, deadLetter(id, reason, res.Class.Outcome, detail))
}

// deadLetter is the problem of every answer about a callout that is a dead
// letter (contract §4, §5, §12): 409 dead-lettered, class rejected (the
// proxy will not send the request again: replay it, contract §8), with its
// state, reason and last attempt's class (last; "" when it had none).
func deadLetter(id string, reason policy.DeadLetterReason, last policy.Outcome, detail string) *problem.Error {
	return &problem.Error{Code: problem.DeadLettered, Outcome: policy.Rejected, CalloutID: id,
		State: policy.DeadLettered, DeadLetterReason: reason, LastOutcome: last, Detail: detail}
}

// unrecorded answers when the completion of a synchronous attempt could not
// be written (the runner logged it). With a final upstream answer it goes
// back, marked `Callout-Record: unrecorded` (contract §4); so does a
// refusal. Otherwise the callout is still recorded in flight: its lease
// expires and a dispatcher retries it, so the caller gets the 202 it would
// have had.
func (s *Server) unrecorded(w http.ResponseWriter, in *inbound, cl *policy.Claimed, res attempt.Result) {
	if res.Class.Outcome == policy.Retryable {
		writeAccepted(w, cl.ID, "", nil)
		return
	}
	w.Header().Set("Callout-Id", cl.ID)
	w.Header().Set("Callout-Record", "unrecorded")
	if res.Refusal != nil {
		problem.Write(w, res.Refusal)
		return
	}
	s.respond(w, in.ep, res.Attempt, res.Class)
}

// storeOpTimeout bounds one store operation on the request path, so a hung
// Redis turns into a prompt 503 store-unavailable (contract §4) instead of an
// answer later than the caller's own timeout (Apex: 10 s by default).
const storeOpTimeout = 2 * time.Second

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
// (contract §4 "Redis unreachable"); a write not confirmed durable says
// all of it in its own detail (contract §11).
func storeRefusal(err error, notDone string) *problem.Error {
	pe := problem.FromStore(err)
	if pe.Code != problem.StoreUnavailable || errors.Is(err, policy.ErrNotDurable) {
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
