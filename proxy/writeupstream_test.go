package proxy

import (
	"net/http"
	"slices"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
)

// headerWriter is a ResponseWriter that keeps only its header.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) WriteHeader(int)             {}
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestWriteUpstreamHeader: the caller gets the upstream's fields but the
// proxy's own, with Callout-Outcome, each field's values its own (an
// append to one changes no other, nor the stored response), in one
// allocation.
func TestWriteUpstreamHeader(t *testing.T) {
	resp := &forward.Response{Status: 200, Body: []byte(`{}`), Header: http.Header{
		"Content-Type": {"application/json"}, "Vary": {"Accept", "Origin"},
		"Callout-Outcome": {"permanent"}, "Idempotent-Replayed": {"true"}}}
	w := &headerWriter{h: http.Header{}}
	writeUpstream(w, resp, policy.Success)
	want := http.Header{"Content-Type": {"application/json"}, "Vary": {"Accept", "Origin"},
		"Callout-Outcome": {"success"}}
	if len(w.h) != len(want) {
		t.Fatalf("header %q, want %q", w.h, want)
	}
	for k, vs := range want {
		if !slices.Equal(w.h[k], vs) {
			t.Errorf("%s: %q, want %q", k, w.h[k], vs)
		}
	}
	for k := range w.h {
		w.h[k] = append(w.h[k], "appended")
	}
	if !slices.Equal(w.h["Vary"], []string{"Accept", "Origin", "appended"}) ||
		!slices.Equal(w.h["Callout-Outcome"], []string{"success", "appended"}) {
		t.Errorf("fields ran into each other: %q", w.h)
	}
	if len(resp.Header["Vary"]) != 2 || len(resp.Header["Content-Type"]) != 1 {
		t.Errorf("the upstream's header changed: %q", resp.Header)
	}
	n := testing.AllocsPerRun(100, func() {
		clear(w.h)
		writeUpstream(w, resp, policy.Success)
	})
	if n > 1 {
		t.Errorf("writeUpstream allocates %v times, want 1", n)
	}
}
