package redact_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

// paymentRules are the rules of contract §10's example endpoint, plus an
// injected X-Api-Key credential header.
func paymentRules() *redact.Rules {
	return redact.New(config.Redact{
		Headers:    []string{"X-Card-Token"},
		Query:      []string{"api_key", "card[number]"},
		JSONFields: []string{"card.number", "items.card.cvc", "secret"},
	}, []string{"x-api-key"})
}

func TestHeader(t *testing.T) {
	m := redact.Mask
	tests := []struct {
		name  string
		rules *redact.Rules
		in    http.Header
		want  http.Header
	}{
		{"fixed headers always hidden", redact.New(config.Redact{}, nil),
			http.Header{"Authorization": {"Bearer x"}, "Cookie": {"a=1"}, "Set-Cookie": {"s=1", "t=2"},
				"Proxy-Authorization": {"Basic eA=="}, "Accept": {"*/*"}},
			http.Header{"Authorization": {m}, "Cookie": {m}, "Set-Cookie": {m, m},
				"Proxy-Authorization": {m}, "Accept": {"*/*"}}},
		{"nil rules hide the fixed headers", nil,
			http.Header{"Authorization": {"Bearer x"}, "X-Card-Token": {"tok"}},
			http.Header{"Authorization": {m}, "X-Card-Token": {"tok"}}},
		{"non-canonical keys matched case-insensitively", redact.New(config.Redact{}, nil),
			http.Header{"authorization": {"Bearer x"}, "SET-COOKIE": {"s=1"}},
			http.Header{"authorization": {m}, "SET-COOKIE": {m}}},
		{"configured and injected headers", paymentRules(),
			http.Header{"X-Card-Token": {"4111"}, "X-Api-Key": {"k", ""}, "X-Request-Id": {"r1"}},
			http.Header{"X-Card-Token": {m}, "X-Api-Key": {m, m}, "X-Request-Id": {"r1"}}},
		{"configured name given in another case", redact.New(config.Redact{Headers: []string{"x-CARD-token"}}, []string{"X-API-KEY"}),
			http.Header{"X-Card-Token": {"4111"}, "X-Api-Key": {"k"}},
			http.Header{"X-Card-Token": {m}, "X-Api-Key": {m}}},
		{"empty header", paymentRules(), http.Header{}, http.Header{}},
		{"nil header", paymentRules(), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.in.Clone()
			got := tt.rules.Header(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Header = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.in, before) {
				t.Errorf("input modified: %v, was %v", tt.in, before)
			}
		})
	}
}

// TestHeaderCopies: the result shares no value slice with the input.
func TestHeaderCopies(t *testing.T) {
	in := http.Header{"Accept": {"a"}}
	got := paymentRules().Header(in)
	got["Accept"][0] = "changed"
	if in.Get("Accept") != "a" {
		t.Errorf("input changed through the copy: %q", in.Get("Accept"))
	}
}

func TestHidesHeader(t *testing.T) {
	rules := paymentRules()
	tests := []struct {
		name string
		want bool
	}{
		{"authorization", true}, {"PROXY-AUTHORIZATION", true}, {"cookie", true}, {"Set-Cookie", true},
		{"x-card-token", true}, {"X-Api-Key", true}, {"Content-Type", false}, {"X-Card", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.HidesHeader(tt.name); got != tt.want {
				t.Errorf("HidesHeader(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
