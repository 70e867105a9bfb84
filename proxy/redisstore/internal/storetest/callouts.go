package storetest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

const (
	// Lease is the tests' attempt lease.
	Lease = 30 * time.Second
	// Day is 24 hours, the unit of the tests' retentions.
	Day = 24 * time.Hour
)

// Issuer is the organisation (JWT issuer) of the tests' callouts.
const Issuer = "https://org.my.salesforce.com"

// Req returns a new callout of endpoint with idempotency key key ("" none)
// and body body.
func Req(endpoint, key, body string) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: endpoint, Issuer: Issuer, Method: http.MethodPost,
		Path: "/v1/charges", Query: "a=1",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(body), IdempotencyKey: key, SourceRecord: "001000000000001AAA",
	}
}

// Failure is a retryable attempt that counts toward the breaker, the
// callout due again at next.
func Failure(next time.Time) policy.Completion {
	return policy.Completion{
		Action: policy.ActionRetry, CountsTowardBreaker: true, NextAttemptAt: next,
		Attempt:  &policy.Attempt{StartedAt: T0(), Duration: time.Second, Status: 503, Outcome: policy.Retryable, Error: "status_5xx"},
		Response: &policy.Response{Status: 503, Body: []byte("unavailable")}, Error: "status_5xx",
	}
}

// Success is a 2xx attempt that ends the callout.
func Success() policy.Completion {
	return policy.Completion{
		Action:   policy.ActionSucceed,
		Attempt:  &policy.Attempt{StartedAt: T0(), Duration: 20 * time.Millisecond, Status: 201, Outcome: policy.Success},
		Response: &policy.Response{Status: 201, Header: http.Header{"X-Id": {"7"}}, Body: []byte(`{"id":7}`)},
	}
}

// Queue is what the helpers below drive: the core store's queue
// (redisstore.Store).
type Queue interface {
	Enqueue(ctx context.Context, nc policy.NewCallout, opts policy.EnqueueOptions) (policy.EnqueueResult, error)
	Claim(ctx context.Context, endpoint string, opts policy.ClaimOptions) (policy.ClaimResult, error)
	Complete(ctx context.Context, c *policy.Claimed, comp policy.Completion) (policy.CompleteResult, error)
}

// MustEnqueue enqueues n callouts of endpoint due now (Req, no key) and
// returns their ids.
func MustEnqueue(t testing.TB, q Queue, endpoint string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r, err := q.Enqueue(Ctx(t), Req(endpoint, "", "{}"), policy.EnqueueOptions{})
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		ids[i] = r.ID
	}
	return ids
}

// MustClaim claims and fails the test on error.
func MustClaim(t testing.TB, q Queue, endpoint string, opts policy.ClaimOptions) policy.ClaimResult {
	t.Helper()
	r, err := q.Claim(Ctx(t), endpoint, opts)
	if err != nil {
		t.Fatalf("claim %s: %v", endpoint, err)
	}
	return r
}

// MustComplete completes and fails the test on error.
func MustComplete(t testing.TB, q Queue, c *policy.Claimed, comp policy.Completion) policy.CompleteResult {
	t.Helper()
	r, err := q.Complete(Ctx(t), c, comp)
	if err != nil {
		t.Fatalf("complete %s: %v", c.ID, err)
	}
	return r
}
