package outbox

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

const (
	testLease = 30 * time.Second
	day       = 24 * time.Hour
)

// env is one backend under test with its clock (storetest.Env), and this
// package's ways to build on it.
type env struct{ *storetest.Env }

// forEachBackend runs fn on every backend (storetest.ForEachBackend).
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	storetest.ForEachBackend(t, func(t *testing.T, se *storetest.Env) { fn(t, &env{se}) })
}

// newStore returns a core Store (a "replica") on the backend with its own
// deterministic random source; outbox sets Options.Outbox.
func (e *env) newStore(outbox bool) *redisstore.Store {
	return redisstore.New(e.B.Client, redisstore.Options{
		PinScriptTime: true, Now: e.Clk.Now, Rand: e.Rand(), ResponseBodyCap: 16,
		IdempotencyRetention: day, DeadLetterRetention: 30 * day, Outbox: outbox,
	})
}

// store is a core Store with the Salesforce outbox off.
func (e *env) store() *redisstore.Store { return e.newStore(false) }

// outbox is an Outbox on the backend with the tests' clock and retention.
func (e *env) outbox() *Outbox {
	return New(e.B.Client, Options{Now: e.Clk.Now, PinScriptTime: true, DeadLetterRetention: 30 * day})
}

// outboxStore is a core Store with the Salesforce outbox on, and the
// outbox.
func (e *env) outboxStore() (*redisstore.Store, *Outbox) {
	return e.newStore(true), e.outbox()
}

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// req returns a new callout of endpoint.
func req(endpoint string) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: endpoint, Issuer: "https://org.my.salesforce.com", Method: http.MethodPost,
		Path: "/v1/charges", Query: "a=1",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte("{}"), SourceRecord: "001000000000001AAA",
	}
}

var claimOpts = policy.ClaimOptions{Batch: 10, Lease: testLease}

// success is a 2xx attempt that ends the callout.
func success() policy.Completion {
	return policy.Completion{
		Action:   policy.ActionSucceed,
		Attempt:  &policy.Attempt{StartedAt: t0, Duration: 20 * time.Millisecond, Status: 201, Outcome: policy.Success},
		Response: &policy.Response{Status: 201, Header: http.Header{"X-Id": {"7"}}, Body: []byte(`{"id":7}`)},
	}
}

// deadCompletion ends a claimed attempt as a dead letter after a
// retryable failure that counts toward the breaker.
func deadCompletion(reason policy.DeadLetterReason) policy.Completion {
	return policy.Completion{
		Action: policy.ActionDeadLetter, Reason: reason, CountsTowardBreaker: true, NextAttemptAt: t0,
		Attempt:  &policy.Attempt{StartedAt: t0, Duration: time.Second, Status: 503, Outcome: policy.Retryable, Error: "status_5xx"},
		Response: &policy.Response{Status: 503, Body: []byte("unavailable")}, Error: "status_5xx",
	}
}

// mustEnqueue enqueues n callouts due now and returns their ids.
func mustEnqueue(t *testing.T, s *redisstore.Store, endpoint string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r, err := s.Enqueue(ctxT(t), req(endpoint), policy.EnqueueOptions{})
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		ids[i] = r.ID
	}
	return ids
}

// mustClaim claims and fails the test on error.
func mustClaim(t *testing.T, s *redisstore.Store, endpoint string, opts policy.ClaimOptions) policy.ClaimResult {
	t.Helper()
	r, err := s.Claim(ctxT(t), endpoint, opts)
	if err != nil {
		t.Fatalf("claim %s: %v", endpoint, err)
	}
	return r
}

// mustComplete completes and fails the test on error.
func mustComplete(t *testing.T, s *redisstore.Store, c *policy.Claimed, comp policy.Completion) policy.CompleteResult {
	t.Helper()
	r, err := s.Complete(ctxT(t), c, comp)
	if err != nil {
		t.Fatalf("complete %s: %v", c.ID, err)
	}
	return r
}
