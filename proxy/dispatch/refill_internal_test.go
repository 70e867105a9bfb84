package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// nopRefiller is a Refiller that claims nothing.
type nopRefiller struct{}

func (nopRefiller) Complete(context.Context, *policy.Claimed, policy.Completion) (policy.CompleteResult, error) {
	return policy.CompleteResult{}, nil
}

func (nopRefiller) CompleteAndClaim(context.Context, *policy.Claimed, policy.Completion, int,
	time.Duration) (policy.CompleteResult, policy.ClaimResult, error) {
	return policy.CompleteResult{}, policy.ClaimResult{}, nil
}

// An ending attempt's completion claims for its own slot and the free ones
// up to its endpoint's fair share of the replica's slots (Concurrency /
// endpoints, here 8 / 2), the batch and max_concurrency, taking them at
// once; at its share only for its own; above it (a Round gave it more),
// with a shut gate, several organisations or a stopping replica, none —
// those slots go through Round's fewest-first rule.
func TestRefillWantKeepsTheFairShare(t *testing.T) {
	cfg := &config.Config{Endpoints: map[string]*config.Endpoint{"a": {Name: "a"}, "b": {Name: "b"}}}
	d := New(Options{Config: cfg, Concurrency: 8, PerEndpoint: 16, Batch: 16, Completions: nopRefiller{}})
	if d.refill == nil || d.share != 4 {
		t.Fatalf("refill %v, share %d; want a Refiller and 4", d.refill, d.share)
	}
	a := cfg.Endpoints["a"]
	d.slots <- struct{}{}
	d.slots <- struct{}{}
	d.inFlight["a"] = 2 // the ending attempt included
	for _, tc := range []struct {
		inFlight, extra int
		ok              bool
	}{{2, 2, true}, {4, 0, true}, {5, 0, false}} {
		d.inFlight["a"] = tc.inFlight
		before := len(d.slots)
		extra, ok := d.refillWant(a)
		if extra != tc.extra || ok != tc.ok {
			t.Fatalf("%d in flight: extra %d ok %v, want %d %v", tc.inFlight, extra, ok, tc.extra, tc.ok)
		}
		if d.inFlight["a"] != tc.inFlight+extra || len(d.slots) != before+extra {
			t.Fatalf("%d in flight: %d counted, %d slots taken after taking %d", tc.inFlight, d.inFlight["a"],
				len(d.slots), extra)
		}
	}
	d.inFlight["a"] = 1
	d.o.Now = func() time.Time { return time.Unix(0, 0) }
	d.shutTill["a"] = time.Unix(1, 0)
	if _, ok := d.refillWant(a); ok {
		t.Error("a shut gate: refilled")
	}
	delete(d.shutTill, "a")
	a.AllowedIssuers = []string{"x", "y"}
	if _, ok := d.refillWant(a); ok {
		t.Error("two organisations: refilled")
	}
	a.AllowedIssuers = nil
	d.stopping.Store(true)
	if _, ok := d.refillWant(a); ok {
		t.Error("stopping: refilled")
	}
}
