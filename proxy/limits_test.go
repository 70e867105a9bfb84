package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// newLimitsRig is a clockRig whose upstream answers 200 and whose
// configuration sets the given top-level limits lines.
func newLimitsRig(t *testing.T, limits ...string) *clockRig {
	t.Helper()
	rig := &clockRig{}
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) { rig.hits.Add(1) },
		extra:    "limits:\n  " + strings.Join(limits, "\n  ") + "\n",
	})
	return rig
}

// fixedHeaderBytes is what rig.do's own fields weigh as the limits count
// them (name, value and 4 bytes a line): Host (httptest's example.com) and
// the bearer token minted at the rig's now.
func fixedHeaderBytes(t *testing.T, rig *clockRig) int {
	t.Helper()
	tok := rig.token(t)
	return len("Host") + len("example.com") + 4 + len("Authorization") + len("Bearer "+tok) + 4
}

// TestHeaderFieldLimitIsInclusive: exactly limits.max_header_fields field
// lines (Host and Authorization included) are accepted; one more is 431
// headers-too-large (RFC 6585 §5) with its connection closed.
func TestHeaderFieldLimitIsInclusive(t *testing.T) {
	const max = 16
	rig := newLimitsRig(t, "max_header_fields: "+strconv.Itoa(max))
	fields := func(n int) http.Header { // n fields besides Host and Authorization
		h := http.Header{}
		for i := range n {
			h.Set("X-Field-"+strconv.Itoa(i), "v")
		}
		return h
	}
	if rec := rig.do(t, http.MethodGet, "/callout/api/v1/x", fields(max-2), ""); rec.Code != http.StatusOK {
		t.Fatalf("exactly %d fields: %d %s, want 200", max, rec.Code, rec.Body)
	}
	rec := rig.do(t, http.MethodGet, "/callout/api/v1/x", fields(max-1), "")
	if rec.Code != http.StatusRequestHeaderFieldsTooLarge || rec.Header().Get("Connection") != "close" ||
		!strings.Contains(rec.Body.String(), "max_header_fields") {
		t.Fatalf("%d fields: %d %q %s, want 431, Connection: close, naming max_header_fields",
			max+1, rec.Code, rec.Header().Get("Connection"), rec.Body)
	}
	if got := rig.hits.Load(); got != 1 {
		t.Fatalf("upstream called %d times, want 1 (the accepted request only)", got)
	}
}

// TestHeaderByteLimitIsInclusive: a header section of exactly
// limits.max_header_bytes (name, value and 4 bytes a line) is accepted; one
// byte more is 431 headers-too-large.
func TestHeaderByteLimitIsInclusive(t *testing.T) {
	const max = 4096
	rig := newLimitsRig(t, "max_header_bytes: "+strconv.Itoa(max))
	pad := func(total int) http.Header { // one X-Pad line bringing the section to total bytes
		n := total - fixedHeaderBytes(t, rig) - len("X-Pad") - 4
		return http.Header{"X-Pad": {strings.Repeat("p", n)}}
	}
	if rec := rig.do(t, http.MethodGet, "/callout/api/v1/x", pad(max), ""); rec.Code != http.StatusOK {
		t.Fatalf("exactly %d bytes: %d %s, want 200", max, rec.Code, rec.Body)
	}
	rec := rig.do(t, http.MethodGet, "/callout/api/v1/x", pad(max+1), "")
	if rec.Code != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(rec.Body.String(), "max_header_bytes") {
		t.Fatalf("%d bytes: %d %s, want 431 naming max_header_bytes", max+1, rec.Code, rec.Body)
	}
	if got := rig.hits.Load(); got != 1 {
		t.Fatalf("upstream called %d times, want 1 (the accepted request only)", got)
	}
}
