package forward

import (
	"net/http"
	"testing"
)

// TestOutboundHeaderAllocations: the header of a keyed write is built
// twice (the record, the attempt); with no injected fields it costs the
// map, its values and the filters, no sorted copy of no names.
func TestOutboundHeaderAllocations(t *testing.T) {
	in := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"},
		"Authorization": {"Bearer x"}, "Idempotency-Key": {`"k"`}}
	n := testing.AllocsPerRun(100, func() { _ = OutboundHeader(in, nil) })
	t.Logf("OutboundHeader: %v allocations", n)
	if n > 5 {
		t.Errorf("OutboundHeader(in, nil) allocates %v times, want at most 5 (the map, its values, the filters)", n)
	}
}
