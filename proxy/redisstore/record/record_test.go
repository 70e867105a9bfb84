package record

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// The packed meta and rest of a record give back what went in: coded and
// written-out methods, header names and values, empty and binary parts,
// every trace-context form.
func TestPackRoundTrip(t *testing.T) {
	metas := []Meta{
		{Method: http.MethodPost, Endpoint: "payment-api", Path: "/v1/charges", Key: `"k-1"`, Created: time.UnixMilli(1_700_000_000_123)},
		{Method: "PROPFIND", Endpoint: "a", Path: "/x y/%00", Query: "a=1&b=\x00", Source: "001000000000001AAA"},
		{Method: http.MethodGet, Endpoint: "e", Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Method: http.MethodGet, Endpoint: "e", Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,congo=t61rcWkgMzE"},
		{Method: http.MethodGet, Endpoint: "e", Trace: "01-not-a-version-00-traceparent"},
		{Method: http.MethodGet, Endpoint: "e", Trace: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}, // upper case: kept as sent
	}
	for _, m := range metas {
		got, err := unpackMeta(packMeta(m))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("meta %+v came back %+v, %v", m, got, err)
		}
	}
	if n := len(packTrace(metas[2].Trace)); n != 26 {
		t.Errorf("a traceparent packs into %d bytes, want 26", n)
	}
	for _, tc := range []struct {
		h    http.Header
		body []byte
	}{
		{nil, nil},
		{http.Header{"Content-Type": {"application/json"}}, []byte(`{"a":1}`)},
		{http.Header{"X-Custom": {"a", "", "b\x00c"}, "Accept": {"*/*"}}, []byte{0, 1, 2, 255}},
		{http.Header{"Big": {strings.Repeat("v", 300)}}, []byte(strings.Repeat("b", 1000))},
	} {
		h, body, err := unpackRest(packRest(tc.h, tc.body))
		if err != nil || len(h) != len(tc.h) || string(body) != string(tc.body) {
			t.Errorf("rest %v %q came back %v %q, %v", tc.h, tc.body, h, body, err)
		}
		for k, v := range tc.h {
			if !reflect.DeepEqual(h[k], v) {
				t.Errorf("header %s = %q, want %q", k, h[k], v)
			}
		}
	}
	for _, bad := range []string{"", "\x00", "P\x05ab"} {
		if _, err := unpackMeta(bad); err == nil {
			t.Errorf("unpackMeta(%q) accepted a malformed meta", bad)
		}
	}
	a := policy.Attempt{N: 3, Kind: policy.KindRetry, StartedAt: time.UnixMilli(1_700_000_000_000),
		Duration: 1500 * time.Millisecond, Status: 503, Outcome: policy.Retryable, Error: "status_5xx with spaces"}
	if got, err := DecodeAttempt(3, EncodeAttempt(a)); err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("attempt %+v came back %+v, %v", a, got, err)
	}
}

// A new callout is charged Overhead, its record's field names and values
// and its :q, so the byte caps count a callout's stored bytes (contract
// §10) whichever of Go or a script adds them up.
func TestCharge(t *testing.T) {
	nc := policy.NewCallout{Method: http.MethodPost, Endpoint: "payment-api", Path: "/v1/charges",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(strings.Repeat("x", 31))}
	fields, restQ := New(nc, time.UnixMilli(1_700_000_000_000))
	want := int64(Overhead)
	for _, f := range fields {
		want += int64(len(f))
	}
	if got := Charge(fields, restQ); got != want || restQ != "" {
		t.Errorf("Charge = %d (rest in :q %d bytes), want %d", got, len(restQ), want)
	}
	nc.Body = []byte(strings.Repeat("x", 600))
	fields, restQ = New(nc, time.UnixMilli(1_700_000_000_000))
	want = int64(Overhead + len(restQ))
	for _, f := range fields {
		want += int64(len(f))
	}
	if got := Charge(fields, restQ); got != want || restQ == "" {
		t.Errorf("Charge with :q = %d (:q %d bytes), want %d", got, len(restQ), want)
	}
}
