package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// woken reports whether a Wake is pending, and takes it.
func woken(d *Dispatcher) bool {
	select {
	case <-d.wake:
		return true
	default:
		return false
	}
}

// A freed slot refills at once when half of the endpoint's batch of slots
// is free or nothing else is in flight; otherwise it waits for others
// (one armed ClaimLinger wake at a time), so the next claim takes several.
func TestSlotFreedLingersWhileBusy(t *testing.T) {
	d := New(Options{PerEndpoint: 16, Batch: 16, ClaimLinger: time.Hour})
	ep := &config.Endpoint{Name: "e"}
	for _, tc := range []struct {
		inFlight int
		now      bool
	}{{15, false}, {9, false}, {8, true}, {0, true}} {
		d.inFlight["e"] = tc.inFlight
		d.slotFreed(ep)
		if got := woken(d); got != tc.now {
			t.Fatalf("%d still in flight: woken at once = %v, want %v", tc.inFlight, got, tc.now)
		}
	}
	if !d.lingering {
		t.Fatal("no linger wake armed for the busy cases")
	}

	d = New(Options{PerEndpoint: 16, Batch: 4, ClaimLinger: time.Hour})
	d.inFlight["e"] = 14 // 2 free = half of a batch of 4
	d.slotFreed(ep)
	if !woken(d) {
		t.Fatal("half the batch free: not woken at once")
	}

	d = New(Options{PerEndpoint: 16, ClaimLinger: -1})
	d.inFlight["e"] = 15
	d.slotFreed(ep)
	if !woken(d) {
		t.Fatal("ClaimLinger < 0: not woken at once")
	}
}

// The armed wake fires after ClaimLinger and disarms, so the next busy
// slot arms another.
func TestSlotFreedLingerFires(t *testing.T) {
	d := New(Options{PerEndpoint: 16, Batch: 16, ClaimLinger: time.Millisecond})
	d.inFlight["e"] = 15
	d.slotFreed(&config.Endpoint{Name: "e"})
	select {
	case <-d.wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the linger wake never came")
	}
	d.mu.Lock()
	armed := d.lingering
	d.mu.Unlock()
	if armed {
		t.Fatal("still armed after it fired")
	}
}

// stubStore answers every claim with res and err.
type stubStore struct {
	Store
	res policy.ClaimResult
	err error
}

func (s *stubStore) ClaimBatch(_ context.Context, reqs []policy.ClaimRequest, _ int) ([]policy.ClaimResult, error) {
	out := make([]policy.ClaimResult, len(reqs))
	for i := range out {
		out[i] = s.res
	}
	return out, s.err
}

func (s *stubStore) Reap(context.Context, string, int) ([]string, error) { return nil, nil }
func (s *stubStore) Get(context.Context, string) (*policy.Callout, error) {
	return nil, policy.ErrNotFound
}

// A round that claimed nothing but saw more due than it got (another
// replica claimed its candidates first) starts the next at once; one that
// saw nothing more waits; a failed claim never spins.
func TestRoundMoreDue(t *testing.T) {
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nauth:\n  issuers: [https://a.my.salesforce.com]\n"+
		"  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_env: S\nendpoints:\n  e:\n    url: http://127.0.0.1:1\n"+
		"    allowed_networks: [127.0.0.0/8]\n"), func(string) string { return "0123456789abcdef0123456789abcdef" })
	if err != nil {
		t.Fatal(err)
	}
	st := &stubStore{}
	d := New(Options{Config: cfg, Store: st, Logger: slog.New(slog.DiscardHandler), ClaimLinger: time.Hour})
	for _, tc := range []struct {
		name string
		res  policy.ClaimResult
		err  error
		more bool
	}{
		{"lost the race, more due", policy.ClaimResult{MoreDue: true}, nil, true},
		{"nothing more due", policy.ClaimResult{}, nil, false},
		{"claim failed", policy.ClaimResult{MoreDue: true}, errors.New("boom"), false},
	} {
		st.res, st.err = tc.res, tc.err
		d.Round(context.Background())
		if got := d.takeMore(); got != tc.more {
			t.Fatalf("%s: next round at once = %v, want %v", tc.name, got, tc.more)
		}
	}
}
