package forward

import (
	"net/http"
	"slices"
	"testing"
)

// TestOutboundHeaderAllocations: the header of a keyed write is built
// twice (the record, the attempt); with no injected fields it costs the
// map and one array of its values, no sorted copy of no names — and a
// field's values, sharing that array, are still its own: appending to one
// changes no other, nor the caller's.
func TestOutboundHeaderAllocations(t *testing.T) {
	in := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json", "text/plain"},
		"Authorization": {"Bearer x"}, "Idempotency-Key": {`"k"`}}
	n := testing.AllocsPerRun(100, func() { _ = OutboundHeader(in, nil) })
	t.Logf("OutboundHeader: %v allocations", n)
	if n > 3 {
		t.Errorf("OutboundHeader(in, nil) allocates %v times, want at most 3 (the map, one array of its values)", n)
	}
	out := OutboundHeader(in, nil)
	for k := range out {
		out[k] = append(out[k], "appended")
	}
	if want := []string{"application/json", "text/plain", "appended"}; !slices.Equal(out["Accept"], want) {
		t.Errorf("Accept %q, want %q", out["Accept"], want)
	}
	if want := []string{"application/json", "appended"}; !slices.Equal(out["Content-Type"], want) {
		t.Errorf("Content-Type %q, want %q", out["Content-Type"], want)
	}
	if len(in["Accept"]) != 2 || len(in["Content-Type"]) != 1 {
		t.Errorf("the caller's header changed: %q", in)
	}
}
