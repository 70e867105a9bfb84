package attempt

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// seenUpstream records the request of each attempt and answers with att.
type seenUpstream struct {
	att  forward.Attempt
	seen []forward.Request
}

func (u *seenUpstream) Do(_ context.Context, _ *config.Endpoint, req *forward.Request) forward.Attempt {
	u.seen = append(u.seen, *req)
	return u.att
}

// keptCompletions records each completion and schedules it.
type keptCompletions struct{ got []policy.Completion }

func (k *keptCompletions) Complete(_ context.Context, _ *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	k.got = append(k.got, c)
	return policy.CompleteResult{State: policy.Scheduled}, nil
}

func newIssuerRunner(t *testing.T, up Upstream, c Completions) *Runner {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	return &Runner{Config: &config.Config{Policy: policy.Defaults(), Log: config.Log{Access: config.LogAccessNone}},
		Upstream: up, Completions: c, Metrics: m, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now }, Rand: func() float64 { return 0.5 }}
}

// TestRunSendsTheCalloutsIssuer: every attempt Run makes carries its
// callout's organisation (the stored JWT issuer), so a dispatched attempt's
// response counts toward that organisation's share of the memory budget
// (forward.Request.Issuer, contract §10), as the ingress's requests do.
func TestRunSendsTheCalloutsIssuer(t *testing.T) {
	up := &seenUpstream{att: forward.Attempt{Sent: true, Response: &forward.Response{Status: 200}}}
	r := newIssuerRunner(t, up, &keptCompletions{})
	cl := &policy.Claimed{ID: "c1", NewCallout: policy.NewCallout{Endpoint: "pay", Issuer: "org-a", Method: "POST"},
		Attempt: 1, FirstAttemptAt: r.Now()}
	r.Run(context.Background(), Call{Endpoint: &config.Endpoint{Name: "pay"}, Claimed: cl,
		Request: &forward.Request{Method: "POST", Path: "/charges"}, Mode: "dispatched"})
	if len(up.seen) != 1 || up.seen[0].Issuer != "org-a" || up.seen[0].CalloutID != "c1" {
		t.Fatalf("the upstream saw %+v, want one request of issuer org-a, callout c1", up.seen)
	}
}

// TestRunOverloadedRetriesWithoutTheBreaker: an answer the proxy could not
// buffer for its own memory budget is retried on the schedule like any
// retryable failure, but its completion does not count toward the breaker
// (partition): another organisation's use of memory never opens it.
func TestRunOverloadedRetriesWithoutTheBreaker(t *testing.T) {
	up := &seenUpstream{att: forward.Attempt{Sent: true,
		Err: fmt.Errorf("the upstream's response was not buffered (%w): %w", policy.ErrOverloaded, limit.ErrOverloaded)}}
	kept := &keptCompletions{}
	r := newIssuerRunner(t, up, kept)
	cl := &policy.Claimed{ID: "c2", NewCallout: policy.NewCallout{Endpoint: "pay", Issuer: "org-b", Method: "POST"},
		Attempt: 1, FirstAttemptAt: r.Now()}
	res := r.Run(context.Background(), Call{Endpoint: &config.Endpoint{Name: "pay"}, Claimed: cl,
		Request: &forward.Request{Method: "POST", Path: "/charges"}, Mode: "dispatched"})
	if res.Class != (policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonOverloaded}) {
		t.Errorf("classified %+v, want retryable overloaded", res.Class)
	}
	if len(kept.got) != 1 || kept.got[0].Action != policy.ActionRetry || kept.got[0].CountsTowardBreaker ||
		kept.got[0].Error != policy.ReasonOverloaded {
		t.Fatalf("completions %+v, want one retry with error overloaded that does not count toward the breaker", kept.got)
	}
}
