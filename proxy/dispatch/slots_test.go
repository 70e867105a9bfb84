package dispatch

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// After a reload the new configuration's Dispatcher shares the old one's
// Slots: the old one's attempts still in flight count toward the new one's
// per-endpoint limit and the replica's slots, so three reloads while
// attempts hang do not let four times max_concurrency run at once.
func TestSlotsAreSharedAcrossReloads(t *testing.T) {
	slots := NewSlots(8)
	old := New(Options{Slots: slots, PerEndpoint: 4})
	ep := &config.Endpoint{Name: "e"}
	old.mu.Lock()
	old.inFlight["e"] = 3 // the retired Dispatcher's attempts, still running
	old.mu.Unlock()
	for range 3 {
		old.slots <- struct{}{}
	}
	next := New(Options{Slots: slots, PerEndpoint: 4})
	if n := next.free(ep); n != 1 {
		t.Fatalf("the new Dispatcher may start %d attempts to e, want 1 (4 − the old one's 3)", n)
	}
	if n := cap(next.slots) - len(next.slots); n != 5 {
		t.Fatalf("free replica slots %d, want 5 of 8", n)
	}
	if own := New(Options{PerEndpoint: 4}); own.free(ep) != 4 {
		t.Fatalf("a Dispatcher of its own Slots: %d free, want 4", own.free(ep))
	}
}
