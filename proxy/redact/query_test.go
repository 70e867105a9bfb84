package redact_test

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

// redactCase is an input of a redacting function and its output.
type redactCase struct{ name, in, want string }

// runRedact runs each case as a subtest: fn (named name in failures) of
// in must be want.
func runRedact(t *testing.T, name string, fn func(string) string, tests []redactCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fn(tt.in); got != tt.want {
				t.Errorf("%s(%q) = %q, want %q", name, tt.in, got, tt.want)
			}
		})
	}
}

func TestQuery(t *testing.T) {
	runRedact(t, "Query", paymentRules().Query, []redactCase{
		{"empty", "", ""},
		{"no redacted names", "a=1&b=%20x+y", "a=1&b=%20x+y"},
		{"one value", "api_key=s3cret", "api_key=[REDACTED]"},
		{"order and other bytes kept", "z=%20a+b&api_key=s%20t&a=1+2&b=%2B", "z=%20a+b&api_key=[REDACTED]&a=1+2&b=%2B"},
		{"repeated", "api_key=1&x=2&api_key=3", "api_key=[REDACTED]&x=2&api_key=[REDACTED]"},
		{"empty value masked", "api_key=&x=1", "api_key=[REDACTED]&x=1"},
		{"name without '=' has no value", "api_key&x=1", "api_key&x=1"},
		{"empty segments kept", "&&api_key=1&", "&&api_key=[REDACTED]&"},
		{"value with '='", "api_key=a=b&c", "api_key=[REDACTED]&c"},
		{"percent-encoded name", "api%5Fkey=1&card%5Bnumber%5D=4111", "api%5Fkey=[REDACTED]&card%5Bnumber%5D=[REDACTED]"},
		{"bracketed name as written", "card[number]=4111", "card[number]=[REDACTED]"},
		{"case-sensitive", "API_KEY=1&Api_key=2", "API_KEY=1&Api_key=2"},
		{"name that does not decode compared raw", "api_key%zz=1&x=%zz", "api_key%zz=1&x=%zz"},
		{"semicolon is not a separator", "a=1;api_key=2", "a=1;api_key=2"},
	})
}

func TestQueryRawNameFallback(t *testing.T) {
	rules := redact.New(config.Redact{Query: []string{"k%zz"}}, nil)
	if got, want := rules.Query("k%zz=1&k=2"), "k%zz=[REDACTED]&k=2"; got != want {
		t.Errorf("Query = %q, want %q", got, want)
	}
}

func TestQueryNoRules(t *testing.T) {
	for _, rules := range []*redact.Rules{nil, redact.New(config.Redact{}, nil)} {
		if got := rules.Query("api_key=1"); got != "api_key=1" {
			t.Errorf("Query = %q, want unchanged", got)
		}
	}
}

func TestPathAndQuery(t *testing.T) {
	runRedact(t, "PathAndQuery", paymentRules().PathAndQuery, []redactCase{
		{"no query", "/v1/charges", "/v1/charges"},
		{"empty query", "/v1/charges?", "/v1/charges?"},
		{"query", "/v1/charges?api_key=s&x=1", "/v1/charges?api_key=[REDACTED]&x=1"},
		{"split at the first '?'", "/v1/a?b=?&api_key=?", "/v1/a?b=?&api_key=[REDACTED]"},
		{"path that looks like a parameter", "/api_key=1?x=1", "/api_key=1?x=1"},
	})
}
