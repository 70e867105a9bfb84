package tracing

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Route is the http.route of every admission: the callout listener's
// route template (contract §4). The caller's own path is never recorded: it may
// hold identifiers a redact rule cannot name.
const Route = "/callout/{endpoint}/*"

// Span is one span the proxy made; a nil *Span (tracing off) ignores every
// call.
type Span struct{ s trace.Span }

// End ends the span; a second End does nothing.
func (s *Span) End() {
	if s != nil {
		s.s.End()
	}
}

// serverSpan is the admission span's state for one request, kept in the
// request's context: the admission is recorded once (the first result
// wins), and the span ends with the response (EndServer).
type serverSpan struct {
	span     trace.Span
	admitted bool
	problem  string
}

type serverSpanKey struct{}

// StartAdmission starts the server span of a callout request (kind
// server, named callout.admission), its parent the caller's trace context
// from h (Extract), or a new trace without one; method is the request's.
// The returned context carries it: Admitted and EndServer find it there,
// the attempts are its children, and Encode stores it with the callout.
// The span lasts until the response is written (EndServer), so it covers
// everything the caller waited for, the synchronous attempt and inline
// retries included (OpenTelemetry's HTTP server span). t nil: ctx
// unchanged.
func (t *Tracer) StartAdmission(ctx context.Context, h http.Header, m string) context.Context {
	if t == nil {
		return ctx
	}
	ctx, s := t.tracer.Start(t.Extract(ctx, h), SpanAdmission, t.server)
	if s.IsRecording() {
		s.SetAttributes(method(m), KeyRoute.String(Route))
	}
	return context.WithValue(ctx, serverSpanKey{}, &serverSpan{span: s})
}

// AdmissionResult is how an admission ended (attribute callout.admission).
type AdmissionResult string

// The admission results.
const (
	// AdmitAttempt: admitted; the first attempt is made while the caller
	// waits (a read, or a write whose record Begin created).
	AdmitAttempt AdmissionResult = "attempt"
	// AdmitScheduled: recorded for the dispatcher (Prefer: respond-async).
	AdmitScheduled AdmissionResult = "scheduled"
	// AdmitHeld: recorded, held behind a shut gate (contract §4 "breaker open").
	AdmitHeld AdmissionResult = "held"
	// AdmitDuplicate: the key is reserved; answered from its record (contract §5).
	AdmitDuplicate AdmissionResult = "duplicate"
	// AdmitRejected: refused before dispatch (outcome rejected).
	AdmitRejected AdmissionResult = "rejected"
)

// Admission is how a callout's admission ended, for its span.
type Admission struct {
	Result AdmissionResult
	// Endpoint is the endpoint name, "" when the path named none that is
	// configured (an unknown name is never recorded).
	Endpoint string
	// Issuer is the caller's JWT issuer, "" before auth passed.
	Issuer string
	// CalloutID is the record's id, "" when none was made.
	CalloutID string
	// Keyed: the request had an Idempotency-Key.
	Keyed bool
	// Prefer is the preference asked for: "respond-async", "wait", or "".
	Prefer string
	// Gate is the gate state that held or refused the callout ("" open).
	Gate policy.GateState
	// Problem is a refusal's problem code.
	Problem string
}

// Admitted records how the admission of ctx's request ended on its server
// span; the span goes on until EndServer. Only the first call records: a
// refusal after an attempt (a record that could not be written) keeps the
// admission it had. t nil, or no server span in ctx: nothing.
func (t *Tracer) Admitted(ctx context.Context, a Admission) {
	if t == nil {
		return
	}
	ss, _ := ctx.Value(serverSpanKey{}).(*serverSpan)
	if ss == nil || ss.admitted {
		return
	}
	ss.admitted, ss.problem = true, a.Problem
	if !ss.span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, KeyAdmitted.String(string(a.Result)), KeyKeyed.Bool(a.Keyed))
	attrs = appendString(attrs, KeyEndpoint, a.Endpoint)
	attrs = appendString(attrs, KeyIssuer, a.Issuer)
	attrs = appendString(attrs, KeyCallout, a.CalloutID)
	attrs = appendString(attrs, KeyPrefer, a.Prefer)
	attrs = appendString(attrs, KeyGate, string(a.Gate))
	attrs = appendString(attrs, KeyProblem, a.Problem)
	ss.span.SetAttributes(attrs...)
}

// EndServer ends ctx's server span once the response is written: status
// is the response's status code (http.response.status_code, every
// response, successes included; 0 means nothing was written, which
// net/http answers as 200). A 5xx answer marks the span an error,
// described by the refusal's problem code or the status; a 4xx is the
// caller's and does not (OpenTelemetry's HTTP server span status rules).
// A second call does nothing; t nil, or no server span in ctx: nothing.
func (t *Tracer) EndServer(ctx context.Context, status int) {
	if t == nil {
		return
	}
	ss, _ := ctx.Value(serverSpanKey{}).(*serverSpan)
	if ss == nil {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	if ss.span.IsRecording() {
		ss.span.SetAttributes(KeyStatus.Int(status))
		if status >= 500 {
			desc := ss.problem
			if desc == "" {
				desc = strconv.Itoa(status)
			}
			ss.span.SetStatus(codes.Error, desc)
		}
	}
	ss.span.End()
}

// The attempt modes (attribute callout.attempt.mode).
const (
	// ModeSynchronous: the first attempt, made while the caller waits.
	ModeSynchronous = "synchronous"
	// ModeInline: an inline retry under Prefer: wait=N (contract §4).
	ModeInline = "inline"
	// ModeDispatched: made by a dispatcher (retry, probe, replay, or the
	// first attempt of a respond-async callout).
	ModeDispatched = "dispatched"
)

// AttemptStart describes an attempt about to be made.
type AttemptStart struct {
	Endpoint string
	// Upstream is the endpoint's configured base URL: its host and port
	// (the scheme's default when it names none) are server.address and
	// server.port. nil records neither.
	Upstream  *url.URL
	CalloutID string // "" for a read without a record
	Method    string
	// N is the attempt's number (policy.Claimed.Attempt); 0 for a read
	// without a record, which keeps no count.
	N    int
	Kind policy.Kind
	Mode string
}

// StartAttempt starts the span of one attempt (kind client) as a child of
// ctx's span and returns the context to make the attempt with: the
// forwarder sends its trace context upstream as traceparent. t nil: ctx
// and a nil *Span.
func (t *Tracer) StartAttempt(ctx context.Context, a AttemptStart) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	// The sampler reads no attribute: they are set only on a span that
	// records (a span not sampled costs no attribute work).
	ctx, s := t.tracer.Start(ctx, SpanAttempt, t.client)
	if s.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, method(a.Method), KeyKind.String(string(a.Kind)), KeyMode.String(a.Mode))
		attrs = appendString(attrs, KeyEndpoint, a.Endpoint)
		host, port := upstream(a.Upstream)
		attrs = appendString(attrs, KeyServerAddress, host)
		if port > 0 {
			attrs = append(attrs, KeyServerPort.Int(port))
		}
		attrs = appendString(attrs, KeyCallout, a.CalloutID)
		if a.N > 0 {
			attrs = append(attrs, KeyAttempt.Int(a.N))
		}
		s.SetAttributes(attrs...)
	}
	return ctx, &Span{s}
}

// AttemptEnd is how an attempt ended, for its span.
type AttemptEnd struct {
	// Status is the upstream's status, 0 without a response.
	Status int
	// Outcome and Reason are the attempt's classification (contract §2).
	Outcome policy.Outcome
	Reason  string
	// Problem is the code of a refusal before anything was sent (a
	// blocked address); Outcome is then rejected.
	Problem string
	// Action is what the policy decided ("" for a read without a record).
	Action policy.Action
	// State and DeadLetter are what the store made of it ("" when not
	// completed: a read, or a completion that failed).
	State      policy.State
	DeadLetter policy.DeadLetterReason
	// RetryAfter is the response's Retry-After as the policy used it
	// (capped at retry_after_cap), when it had a valid one.
	RetryAfter     time.Duration
	HaveRetryAfter bool
	// NextIn is the delay before the next attempt when one was scheduled.
	NextIn time.Duration
}

// Decided fills e from an attempt's result r, its classification and the
// completion the policy decided at now: status, outcome, reason, action,
// the Retry-After used (contract §3: min(Retry-After, retry_after_cap)) and
// the delay before the next attempt.
func Decided(r policy.AttemptResult, cls policy.Classification, comp policy.Completion, p policy.Policy,
	now time.Time) AttemptEnd {
	e := AttemptEnd{Outcome: cls.Outcome, Reason: cls.Reason, Action: comp.Action}
	if r.Response != nil {
		e.Status = r.Response.Status
		if ra, ok := policy.ParseRetryAfter(r.Response.Header.Get("Retry-After"), now); ok {
			e.RetryAfter, e.HaveRetryAfter = min(ra, p.RetryAfterCap), true
		}
	}
	if !comp.NextAttemptAt.IsZero() && (comp.Action == policy.ActionRetry || comp.Action == policy.ActionRetryInline) {
		e.NextIn = max(0, comp.NextAttemptAt.Sub(now))
	}
	return e
}

// EndAttempt records e and ends the attempt span: status error with the
// reason word unless the outcome is success.
func (s *Span) EndAttempt(e AttemptEnd) {
	if s == nil {
		return
	}
	if s.s.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 10)
		attrs = append(attrs, KeyOutcome.String(string(e.Outcome)))
		if e.Status != 0 {
			attrs = append(attrs, KeyStatus.Int(e.Status))
		}
		attrs = appendString(attrs, KeyReason, e.Reason)
		attrs = appendString(attrs, KeyProblem, e.Problem)
		attrs = appendString(attrs, KeyAction, string(e.Action))
		attrs = appendString(attrs, KeyState, string(e.State))
		attrs = appendString(attrs, KeyDeadLetter, string(e.DeadLetter))
		if e.HaveRetryAfter {
			attrs = append(attrs, KeyRetryAfter.Int64(e.RetryAfter.Milliseconds()))
		}
		if e.NextIn > 0 {
			attrs = append(attrs, KeyNextIn.Int64(e.NextIn.Milliseconds()))
		}
		s.s.SetAttributes(attrs...)
		if e.Outcome != policy.Success {
			desc := e.Reason
			if e.Problem != "" {
				desc = e.Problem
			}
			s.s.SetStatus(codes.Error, desc)
		}
	}
	s.s.End()
}

// ReplayResult is how a replay request ended (attribute
// callout.replay.result): "replayed", "already_replayed" or a refusal's
// short code (replay.refusal).
type ReplayResult = string

// StartReplay starts the span of a replay of dead letter id (kind
// internal) as a child of the dead letter's stored trace context (Resume):
// the replay chain, whose trace context is this span's (Encode), joins the
// trace that accepted the original callout (contract §8). t nil: ctx and nil.
func (t *Tracer) StartReplay(ctx context.Context, stored, deadLetterID, endpoint string) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, s := t.tracer.Start(t.Resume(ctx, stored), SpanReplay, t.internal)
	s.SetAttributes(KeyReplayOf.String(deadLetterID), KeyEndpoint.String(endpoint))
	return ctx, &Span{s}
}

// EndReplay records the replay's result and its new chain's id ("" when
// none was made) and ends the span; a refusal other than already_replayed
// marks it an error.
func (s *Span) EndReplay(result ReplayResult, chainID string) {
	if s == nil {
		return
	}
	attrs := []attribute.KeyValue{KeyReplayed.String(result)}
	s.s.SetAttributes(appendString(attrs, KeyCallout, chainID)...)
	if result != "replayed" && result != "already_replayed" {
		s.s.SetStatus(codes.Error, result)
	}
	s.s.End()
}

// StartBatch starts the span of one Salesforce write round (kind
// internal), a root span: a batch carries many callouts' writes. t nil:
// ctx and nil.
func (t *Tracer) StartBatch(ctx context.Context, entries int) (context.Context, *Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, s := t.tracer.Start(ctx, SpanWriteBatch, t.root, t.internal)
	s.SetAttributes(KeyEntries.Int(entries))
	return ctx, &Span{s}
}

// Batch is what one Salesforce write round did, for its span.
type Batch struct {
	// Records, Events and Notifications are the writes the round planned:
	// Failed_Callout__c upserts, Callout_Result__e events, owner
	// notifications.
	Records, Events, Notifications int
	// Calls is the API calls made (token requests are not API calls).
	Calls int
	// Done, Retried, Deferred and Overflow are how its entries were settled.
	Done, Retried, Deferred, Overflow int
	// ErrorCode is the Salesforce error code of the call that stopped the
	// round ("" when none did); the span is then an error.
	ErrorCode string
}

// EndBatch records b and ends the span.
func (s *Span) EndBatch(b Batch) {
	if s == nil {
		return
	}
	attrs := []attribute.KeyValue{KeyRecords.Int(b.Records), KeyEvents.Int(b.Events),
		KeyNotes.Int(b.Notifications), KeyCalls.Int(b.Calls), KeyDone.Int(b.Done),
		KeyRetried.Int(b.Retried), KeyDeferred.Int(b.Deferred), KeyOverflow.Int(b.Overflow)}
	s.s.SetAttributes(appendString(attrs, KeyWriteError, b.ErrorCode)...)
	if b.ErrorCode != "" {
		s.s.SetStatus(codes.Error, b.ErrorCode)
	}
	s.s.End()
}

// upstream returns u's host and port, the port from the scheme when u
// names none (80 for http, 443 for https: RFC 9110 §4.2), 0 when unknown.
func upstream(u *url.URL) (string, int) {
	if u == nil {
		return "", 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		switch u.Scheme {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	return u.Hostname(), port
}

// appendString appends k=v unless v is empty.
func appendString(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}
