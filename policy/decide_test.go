package policy_test

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Idempotency settings of an endpoint (contract §3), as config spells them.
const (
	honoured = "honoured"
	ignored  = "ignored"
)

// rulesFor returns an endpoint's rules with the given idempotency setting
// and the default limits.
func rulesFor(idempotency string) policy.EndpointRules {
	return policy.EndpointRules{
		AttemptTimeout: 15 * time.Second, BreakerFailures: 20, BreakerProbeInterval: 5 * time.Minute,
		IdempotencyIgnored: idempotency == ignored,
	}
}

// fixed is a random source that always returns v.
func fixed(v float64) func() float64 { return func() float64 { return v } }

// t0 is the tests' clock origin.
var t0 = time.UnixMilli(1_700_000_000_000)

// decideCase is one attempt fed to Decide, and what must come out.
type decideCase struct {
	name        string
	idempotency string // default honoured
	method      string // default POST
	sync        bool
	attempt     int           // default 1
	age         time.Duration // now − FirstAttemptAt
	status      int           // 0: no response
	retryAfter  string
	err         error // the transport error when status is 0
	sent        bool
	refused     string  // the problem code of an attempt refused before sending
	rand        float64 // default 0.5

	action policy.Action
	reason policy.DeadLetterReason
	next   time.Duration // NextAttemptAt − now (only for ActionRetry)
	paused time.Duration // PausedUntil − now (0: no pause)
	counts bool          // CountsTowardBreaker
}

// input builds Decide's input for c at now under p.
func (c decideCase) input(p policy.Policy, now time.Time) policy.DecideInput {
	idem, method, attempt, rnd := c.idempotency, c.method, c.attempt, c.rand
	if idem == "" {
		idem = honoured
	}
	if method == "" {
		method = http.MethodPost
	}
	if attempt == 0 {
		attempt = 1
	}
	if rnd == 0 {
		rnd = 0.5
	}
	att := policy.AttemptResult{Sent: c.sent, Started: now.Add(-time.Second), Duration: time.Second}
	err := c.err
	if c.status != 0 {
		h := http.Header{"Content-Type": {"text/plain"}}
		if c.retryAfter != "" {
			h.Set("Retry-After", c.retryAfter)
		}
		att.Response, err, att.Sent = &policy.Response{Status: c.status, Header: h, Body: []byte("answer")}, nil, true
	}
	cls := policy.Classify(c.status, err)
	if c.refused != "" {
		cls = policy.Classification{Outcome: policy.Rejected, Reason: c.refused}
	}
	return policy.DecideInput{
		Policy: p, Rules: rulesFor(idem), Result: att, Now: now, Rand: fixed(rnd), Sync: c.sync,
		Claimed: &policy.Claimed{ID: "c1", NewCallout: policy.NewCallout{Endpoint: "pay", Method: method}, Attempt: attempt,
			FirstAttemptAt: now.Add(-c.age)},
		Class: cls,
	}
}

var (
	attemptTimeout = &policy.TimeoutError{Limit: "attempt", Err: context.DeadlineExceeded}
	refused        = syscall.ECONNREFUSED
)

// TestDecide is the policy after one attempt (contract §3, §6, §7), with the
// defaults: base 5s ×2, jitter 0.5, 12 attempts, 72h, Retry-After cap 1h.
func TestDecide(t *testing.T) {
	now := t0
	s := time.Second
	cases := []decideCase{
		{name: "2xx async succeeds", status: 201, action: policy.ActionSucceed},
		{name: "2xx sync succeeds", status: 200, sync: true, action: policy.ActionSucceed},
		{name: "sync permanent fails", status: 404, sync: true, action: policy.ActionFail},
		{name: "async permanent dead letter", status: 403, action: policy.ActionDeadLetter, reason: policy.DeadLetterPermanent},
		{name: "async 501 dead letter", status: 501, action: policy.ActionDeadLetter, reason: policy.DeadLetterPermanent},
		{name: "async 3xx dead letter", status: 302, action: policy.ActionDeadLetter, reason: policy.DeadLetterPermanent},
		{name: "503 retry after jittered base", status: 503, action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "503 sync retries too", status: 503, sync: true, action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "503 attempt 3 ceiling 20s", status: 503, attempt: 3, action: policy.ActionRetry, next: 10 * s, counts: true},
		{name: "503 jitter 0.999", status: 503, attempt: 2, rand: 0.999, action: policy.ActionRetry, next: 9990 * time.Millisecond, counts: true},
		{name: "503 attempt 11 still fits", status: 503, attempt: 11, action: policy.ActionRetry, next: 2560 * s, counts: true},
		{name: "503 attempt 12 exhausted", status: 503, attempt: 12, action: policy.ActionDeadLetter, reason: policy.DeadLetterExhausted, counts: true},
		{name: "next attempt past max_age exhausted", status: 503, attempt: 4, age: 72*time.Hour - 5*s,
			action: policy.ActionDeadLetter, reason: policy.DeadLetterExhausted, counts: true},
		{name: "next attempt inside max_age retries", status: 503, age: 72*time.Hour - 30*s,
			action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "no answer retries", err: refused, action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "429 Retry-After 30 pauses the endpoint", status: 429, retryAfter: "30",
			action: policy.ActionRetry, next: 30 * s, paused: 30 * s},
		{name: "429 Retry-After 7200 capped at 1h", status: 429, retryAfter: "7200",
			action: policy.ActionRetry, next: time.Hour, paused: time.Hour},
		{name: "429 without Retry-After no pause", status: 429, action: policy.ActionRetry, next: 2500 * time.Millisecond},
		{name: "429 invalid Retry-After no pause", status: 429, retryAfter: "-5", action: policy.ActionRetry, next: 2500 * time.Millisecond},
		{name: "503 Retry-After delays only the callout", status: 503, retryAfter: "30",
			action: policy.ActionRetry, next: 30 * s, counts: true},
		{name: "ignored POST sent no answer ambiguous", idempotency: ignored, err: attemptTimeout, sent: true,
			action: policy.ActionDeadLetter, reason: policy.DeadLetterAmbiguous, counts: true},
		{name: "ignored PUT sent no answer ambiguous", idempotency: ignored, method: http.MethodPut,
			err: attemptTimeout, sent: true, action: policy.ActionDeadLetter, reason: policy.DeadLetterAmbiguous, counts: true},
		{name: "ignored GET sent no answer retries", idempotency: ignored, method: http.MethodGet,
			err: attemptTimeout, sent: true, action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "ignored POST never sent retries", idempotency: ignored, err: refused,
			action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "ignored POST answered 503 retries", idempotency: ignored, status: 503,
			action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "honoured POST sent no answer retries", err: attemptTimeout, sent: true,
			action: policy.ActionRetry, next: 2500 * time.Millisecond, counts: true},
		{name: "async refusal dead letter permanent", refused: "blocked-address",
			action: policy.ActionDeadLetter, reason: policy.DeadLetterPermanent},
		{name: "sync refusal of an inline retry dead letter, not failed", refused: "internal", sync: true, attempt: 2,
			action: policy.ActionDeadLetter, reason: policy.DeadLetterPermanent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.input(policy.Defaults(), now)
			got := policy.Decide(in)
			checkDecision(t, c, in, got, now)
		})
	}
}

// checkDecision compares one Decide result with its case.
func checkDecision(t *testing.T, c decideCase, in policy.DecideInput, got policy.Completion, now time.Time) {
	t.Helper()
	if got.Action != c.action || got.Reason != c.reason {
		t.Fatalf("action, reason = %q, %q; want %q, %q", got.Action, got.Reason, c.action, c.reason)
	}
	wantNext := time.Time{}
	if c.action == policy.ActionRetry {
		wantNext = now.Add(c.next)
	}
	if !got.NextAttemptAt.Equal(wantNext) {
		t.Errorf("NextAttemptAt = now%+v, want now%+v", got.NextAttemptAt.Sub(now), c.next)
	}
	wantPause := time.Time{}
	if c.paused > 0 {
		wantPause = now.Add(c.paused)
	}
	if !got.PausedUntil.Equal(wantPause) {
		t.Errorf("PausedUntil = %v, want %v", got.PausedUntil, wantPause)
	}
	if got.CountsTowardBreaker != c.counts {
		t.Errorf("CountsTowardBreaker = %v, want %v", got.CountsTowardBreaker, c.counts)
	}
	if got.Lease != 25*time.Second || got.Breaker.Failures != 20 || got.Breaker.ProbeLease != 25*time.Second {
		t.Errorf("lease %v, breaker %+v; want 15s+10s and the endpoint's breaker", got.Lease, got.Breaker)
	}
	a := got.Attempt
	if a == nil || a.Status != c.status || a.Outcome != in.Class.Outcome || !a.StartedAt.Equal(in.Result.Started) || a.Duration != time.Second {
		t.Fatalf("attempt record = %+v, want status %d outcome %s", a, c.status, in.Class.Outcome)
	}
	wantErr := in.Class.Reason
	if in.Class.Outcome == policy.Success {
		wantErr = ""
	}
	if got.Error != wantErr || a.Error != wantErr {
		t.Errorf("error = %q (attempt %q), want %q", got.Error, a.Error, wantErr)
	}
	if c.status == 0 && got.Response != nil {
		t.Errorf("response = %+v, want none", got.Response)
	}
	if c.status != 0 && (got.Response == nil || got.Response.Status != c.status || !bytes.Equal(got.Response.Body, []byte("answer"))) {
		t.Errorf("response = %+v, want the upstream's %d", got.Response, c.status)
	}
}

// TestReleasesRefusal: only a synchronous first attempt's refusal releases
// the callout (a rejection before dispatch, contract §5); the refusal of an
// accepted callout — dispatched, or an inline retry after a sent attempt —
// keeps it, as a dead letter (contract §1, §7).
func TestReleasesRefusal(t *testing.T) {
	tests := []struct {
		name    string
		sync    bool
		attempt int
		want    bool
	}{
		{"synchronous first attempt", true, 1, true},
		{"synchronous inline retry", true, 2, false},
		{"dispatched first attempt (respond-async, held)", false, 1, false},
		{"dispatched retry", false, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.ReleasesRefusal(tt.sync, &policy.Claimed{Attempt: tt.attempt}); got != tt.want {
				t.Errorf("ReleasesRefusal(sync %v, attempt %d) = %v, want %v", tt.sync, tt.attempt, got, tt.want)
			}
		})
	}
}

// TestDecideAttemptNumbers feeds corrupted and huge attempt numbers to
// Decide (ARCHITECTURE.md: attempt numbers 0, 1, 12, 31, 64, 1000): the delay stays
// within [0, max_delay], never negative, never a panic; with the default
// 12 attempts every count at or over the limit is exhausted.
func TestDecideAttemptNumbers(t *testing.T) {
	now := t0
	unlimited := policy.Defaults()
	unlimited.MaxAttempts = math.MaxInt
	for _, n := range []int{12, 31, 40, 63, 64, 65, 1000, 0, -1, math.MaxInt, math.MinInt} {
		for _, rnd := range []float64{0, 0.5, 0.999999, 1, math.NaN()} {
			c := decideCase{attempt: n, status: 503}
			in := c.input(unlimited, now)
			in.Rand = fixed(rnd)
			got := policy.Decide(in)
			if n == unlimited.MaxAttempts {
				if got.Reason != policy.DeadLetterExhausted {
					t.Errorf("attempt %d of %d: reason %q, want exhausted", n, n, got.Reason)
				}
			} else if got.Action != policy.ActionRetry {
				t.Fatalf("attempt %d rand %v: action %q, want retry with unlimited attempts", n, rnd, got.Action)
			} else if d := got.NextAttemptAt.Sub(now); d < 0 || d > unlimited.MaxDelay {
				t.Errorf("attempt %d rand %v: delay %v outside [0, %v]", n, rnd, d, unlimited.MaxDelay)
			}
			in = c.input(policy.Defaults(), now)
			in.Rand = fixed(rnd)
			got = policy.Decide(in)
			exhausted := n >= 12
			if (got.Action == policy.ActionDeadLetter) != exhausted ||
				(exhausted && got.Reason != policy.DeadLetterExhausted) {
				t.Errorf("attempt %d with 12 allowed: action %q reason %q, exhausted %v", n, got.Action, got.Reason, exhausted)
			}
		}
	}
}

// TestPauseUntil is the endpoint-wide pause (contract §3): only a 429 with a
// valid, positive Retry-After, capped at retry_after_cap.
func TestPauseUntil(t *testing.T) {
	p := policy.Defaults()
	resp := func(code int, ra string) *policy.Response {
		return &policy.Response{Status: code, Header: http.Header{"Retry-After": {ra}}}
	}
	for _, c := range []struct {
		name string
		resp *policy.Response
		want time.Duration // 0: no pause
	}{
		{"no response", nil, 0},
		{"429 delta", resp(429, "60"), time.Minute},
		{"429 zero", resp(429, "0"), 0},
		{"429 over cap", resp(429, "999999"), time.Hour},
		{"429 date", resp(429, t0.Add(90*time.Second).UTC().Format(http.TimeFormat)), 90 * time.Second},
		{"429 past date", resp(429, t0.Add(-time.Minute).UTC().Format(http.TimeFormat)), 0},
		{"429 garbage", resp(429, "soon"), 0},
		{"503 delta", resp(503, "60"), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := policy.PauseUntil(p, c.resp, t0)
			want := time.Time{}
			if c.want > 0 {
				want = t0.Add(c.want)
			}
			if !got.Equal(want) {
				t.Fatalf("PauseUntil = %v, want %v", got, want)
			}
		})
	}
}

func TestIsWrite(t *testing.T) {
	for m, want := range map[string]bool{
		http.MethodGet: false, http.MethodHead: false, http.MethodOptions: false,
		http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
	} {
		if got := policy.IsWrite(m); got != want {
			t.Errorf("IsWrite(%s) = %v, want %v", m, got, want)
		}
	}
}
