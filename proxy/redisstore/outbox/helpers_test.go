package outbox

import (
	"context"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// t0 is the instant the tests' clocks start at (storetest.T0).
var t0 = storetest.T0()

const (
	testLease = storetest.Lease
	day       = storetest.Day
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

// req returns a new callout of endpoint (storetest.Req, no key).
func req(endpoint string) policy.NewCallout { return storetest.Req(endpoint, "", "{}") }

var claimOpts = policy.ClaimOptions{Batch: 10, Lease: testLease}

// success is a 2xx attempt that ends the callout (storetest.Success).
func success() policy.Completion { return storetest.Success() }

// deadCompletion ends a claimed attempt as a dead letter after a
// retryable failure that counts toward the breaker (storetest.Failure).
func deadCompletion(reason policy.DeadLetterReason) policy.Completion {
	c := storetest.Failure(t0)
	c.Action, c.Reason = policy.ActionDeadLetter, reason
	return c
}

// mustEnqueue enqueues n callouts due now and returns their ids
// (storetest.MustEnqueue).
func mustEnqueue(t *testing.T, s *redisstore.Store, endpoint string, n int) []string {
	t.Helper()
	return storetest.MustEnqueue(t, s, endpoint, n)
}

// mustClaim claims and fails the test on error (storetest.MustClaim).
func mustClaim(t *testing.T, s *redisstore.Store, endpoint string, opts policy.ClaimOptions) policy.ClaimResult {
	t.Helper()
	return storetest.MustClaim(t, s, endpoint, opts)
}

// mustComplete completes and fails the test on error
// (storetest.MustComplete).
func mustComplete(t *testing.T, s *redisstore.Store, c *policy.Claimed, comp policy.Completion) policy.CompleteResult {
	t.Helper()
	return storetest.MustComplete(t, s, c, comp)
}
