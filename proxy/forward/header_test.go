package forward

import (
	"net/http"
	"reflect"
	"testing"
)

func TestOutboundHeader(t *testing.T) {
	// endToEnd is a caller header of end-to-end fields only (a new copy
	// each call).
	endToEnd := func() http.Header {
		return http.Header{
			"Accept":                {"text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"},
			"Content-Type":          {"application/x-www-form-urlencoded"},
			"User-Agent":            {"SFDC-Callout/68.0"},
			"Sfdc_stack_depth":      {"1"},
			"Idempotency-Key":       {`"abc-123"`},
			"Callout-Source-Record": {"001000000000001AAA"},
		}
	}
	tests := []struct {
		name     string
		in       http.Header
		injected http.Header
		want     http.Header
	}{
		{
			name: "end-to-end fields pass, values untouched",
			in:   endToEnd(),
			want: endToEnd(),
		},
		{
			name: "non-canonical keys are canonicalised and merged in key order",
			in:   http.Header{"SFDC_STACK_DEPTH": {"1"}, "x-trace": {"a"}, "X-Trace": {"b"}},
			want: http.Header{"Sfdc_stack_depth": {"1"}, "X-Trace": {"b", "a"}},
		},
		{
			name: "hop-by-hop fields are dropped",
			in: http.Header{
				"Connection": {"keep-alive"}, "Proxy-Connection": {"keep-alive"}, "Keep-Alive": {"timeout=5"},
				"Proxy-Authenticate": {"Basic"}, "Proxy-Authorization": {"Basic Zm9vOmJhcg=="},
				"Te": {"trailers"}, "Trailer": {"X-Sum"}, "Transfer-Encoding": {"chunked"},
				"Upgrade": {"h2c"}, "Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"}, "X-Keep": {"1"},
			},
			want: http.Header{"X-Keep": {"1"}},
		},
		{
			name: "caller credentials and proxy-addressed fields are dropped",
			in: http.Header{
				"Authorization": {"Bearer caller.jwt"}, "Cookie": {"sid=1"}, "Prefer": {"respond-async, wait=5"},
				"Expect": {"100-continue"}, "Host": {"proxy.example.com"}, "Content-Length": {"99"},
				"Accept": {"*/*"},
			},
			want: http.Header{"Accept": {"*/*"}},
		},
		{
			name: "every field named in Connection, several fields, lists, empty members",
			in: http.Header{
				"Connection": {"", "X-Api-Key", " x-one ,, X-Two ", ","},
				"X-Api-Key":  {"k"}, "X-One": {"1"}, "X-Two": {"2"}, "X-Three": {"3"},
			},
			want: http.Header{"X-Three": {"3"}},
		},
		{
			name:     "Connection: Authorization cannot strip the injected Authorization",
			in:       http.Header{"Connection": {"Authorization"}, "Authorization": {"Bearer caller"}},
			injected: http.Header{"Authorization": {"Bearer upstream"}},
			want:     http.Header{"Authorization": {"Bearer upstream"}},
		},
		{
			name:     "the caller can neither override nor remove an injected field",
			in:       http.Header{"x-api-key": {"evil"}, "X-Api-Key": {"evil2"}, "Connection": {"x-api-key"}},
			injected: http.Header{"X-Api-Key": {"secret"}},
			want:     http.Header{"X-Api-Key": {"secret"}},
		},
		{
			name:     "injected names are canonicalised",
			in:       http.Header{"X-Tenant": {"caller"}},
			injected: http.Header{"x-tenant": {"configured"}},
			want:     http.Header{"X-Tenant": {"configured"}},
		},
		{
			name: "nil in",
			want: http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.in.Clone()
			got := OutboundHeader(tt.in, tt.injected)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("OutboundHeader =\n %v\nwant\n %v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.in, before) {
				t.Errorf("OutboundHeader modified its input: %v, was %v", tt.in, before)
			}
		})
	}
}

func TestOutboundHeaderSharesNoSlices(t *testing.T) {
	in := http.Header{"X-A": {"1"}}
	injected := http.Header{"X-B": {"2"}}
	out := OutboundHeader(in, injected)
	out["X-A"][0] = "changed"
	out["X-B"][0] = "changed"
	if in["X-A"][0] != "1" || injected["X-B"][0] != "2" {
		t.Fatalf("the result shares slices with its arguments: in=%v injected=%v", in, injected)
	}
}

// TestInboundHeader: hop-by-hop fields (and those Connection names) of an
// upstream response are dropped and names canonicalised; every Callout-*
// field and Idempotent-Replayed is dropped, in any case (contract §10); a
// field that merely contains "callout" is kept.
func TestInboundHeader(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in, want http.Header
	}{
		{"hop-by-hop", http.Header{
			"Connection": {"X-Internal, close"}, "X-Internal": {"hop"}, "Keep-Alive": {"timeout=5"},
			"Transfer-Encoding": {"chunked"}, "Trailer": {"X-Sum"}, "Upgrade": {"h2c"},
			"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}, "retry-after": {"120"},
		}, http.Header{
			"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}, "Retry-After": {"120"},
		}},
		{"proxy signals", http.Header{
			"Callout-Outcome": {"success"}, "callout-id": {"forged"}, "CALLOUT-RECORD": {"x"},
			"Callout-Problem": {"breaker-open"}, "Callout-Replay-Body": {"omitted"}, "Callout-Future": {"x"},
			"idempotent-replayed": {"true"}, "X-Callout-Trace": {"kept"}, "Content-Type": {"text/plain"},
		}, http.Header{"X-Callout-Trace": {"kept"}, "Content-Type": {"text/plain"}}},
	} {
		if got, _ := inboundHeader(tt.in, 0); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: inboundHeader =\n %v\nwant\n %v", tt.name, got, tt.want)
		}
	}
}

// TestOutboundHeaderCallerClaims: caller Forwarded and X-Forwarded-* fields
// are dropped and none are added; a caller field with an underscore that an
// upstream folding "_" into "-" would read as an injected field, a dropped
// one or Idempotency-Key never reaches the upstream; other underscore names
// (Salesforce's own Sfdc_stack_depth) pass.
func TestOutboundHeaderCallerClaims(t *testing.T) {
	in := http.Header{
		"Forwarded": {"for=10.0.0.1"}, "X-Forwarded-For": {"10.0.0.1"}, "X-Forwarded-Host": {"internal"},
		"X-Forwarded-Proto": {"https"}, "X-Forwarded-Port": {"443"}, "X-Real-Ip": {"10.0.0.1"},
		"X_api_key":         {"caller-value"}, // folds onto the injected X-Api-Key
		"X_API_KEY":         {"caller-value"},
		"Authorization_":    {"x"},         // does not fold onto anything controlled
		"Idempotency_key":   {"other-key"}, // folds onto the proxy-scoped key
		"X_forwarded_for":   {"10.0.0.1"},  // folds onto a dropped field
		"Content_length":    {"5"},         // folds onto a field the proxy sets
		"Transfer_encoding": {"chunked"},   // folds onto a hop-by-hop field
		"Sfdc_stack_depth":  {"1"},
		"Idempotency-Key":   {"the-key"},
	}
	got := OutboundHeader(in, http.Header{"X-Api-Key": {"injected"}})
	want := http.Header{"X-Api-Key": {"injected"}, "Sfdc_stack_depth": {"1"}, "Authorization_": {"x"},
		"Idempotency-Key": {"the-key"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OutboundHeader =\n %v\nwant\n %v", got, want)
	}
}
