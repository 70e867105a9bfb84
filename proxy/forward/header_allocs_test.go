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
	wantApart(t, OutboundHeader(in, nil), http.Header{"Accept": {"application/json", "text/plain"},
		"Content-Type": {"application/json"}})
	if len(in["Accept"]) != 2 || len(in["Content-Type"]) != 1 {
		t.Errorf("the caller's header changed: %q", in)
	}
}

// TestResponseHeaderAllocations: the caller's copy of an upstream response
// header costs the map and one array of its values, Content-Length's
// included (not one slice per field); hop-by-hop and proxy-owned fields
// are dropped, Content-Length is the buffered body's, and the fields
// sharing the array stay apart.
func TestResponseHeaderAllocations(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{
		"Content-Type": {"application/json"}, "Date": {"Thu, 03 Dec 2026 10:00:00 GMT"},
		"Vary": {"Accept", "Origin"}, "Connection": {"keep-alive"}, "Callout-Outcome": {"success"},
		"Content-Length": {"999"}}}
	plain := &http.Response{StatusCode: http.StatusCreated, Header: resp.Header.Clone()}
	delete(plain.Header, "Connection") // its tokens' set costs its own allocations, rare upstream
	n := testing.AllocsPerRun(100, func() { _ = responseHeader(http.MethodPost, plain, 31) })
	t.Logf("responseHeader: %v allocations", n)
	if n > 3 {
		t.Errorf("responseHeader allocates %v times, want at most 3 (the map, one array of its values)", n)
	}
	h := responseHeader(http.MethodPost, resp, 31)
	want := http.Header{"Content-Type": {"application/json"}, "Date": {"Thu, 03 Dec 2026 10:00:00 GMT"},
		"Vary": {"Accept", "Origin"}, "Content-Length": {"31"}}
	if len(h) != len(want) {
		t.Fatalf("header %q, want %q", h, want)
	}
	for k, vs := range want {
		if !slices.Equal(h[k], vs) {
			t.Errorf("%s %q, want %q", k, h[k], vs)
		}
	}
	wantApart(t, h, http.Header{"Vary": {"Accept", "Origin"}, "Content-Length": {"31"}})
}

// wantApart appends a value to every field of h, then checks that each
// field of want holds its values and that one: fields whose values share
// one array (copyFields) stay apart.
func wantApart(t *testing.T, h, want http.Header) {
	t.Helper()
	for k := range h {
		h[k] = append(h[k], "appended")
	}
	for k, vs := range want {
		if w := append(slices.Clone(vs), "appended"); !slices.Equal(h[k], w) {
			t.Errorf("%s %q, want %q", k, h[k], w)
		}
	}
}
