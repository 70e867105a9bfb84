package dispatch

import (
	"testing"
	"time"

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
