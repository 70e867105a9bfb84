package redact_test

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

func TestText(t *testing.T) {
	tests := []struct {
		name  string
		rules *redact.Rules
		in    string
		want  string
	}{
		{"plain", paymentRules(), "dial tcp 10.0.0.1:443: connection refused", "dial tcp 10.0.0.1:443: connection refused"},
		{"bearer", paymentRules(), "upstream said: invalid Bearer eyJhbGci.eyJzdWIi.sig here",
			"upstream said: invalid Bearer [REDACTED] here"},
		{"basic, any case, tab", nil, "Authorization: basic\tdXNlcjpwYXNz", "Authorization: basic\t[REDACTED]"},
		{"several", nil, "BEARER a\nBearer b", "BEARER [REDACTED]\nBearer [REDACTED]"},
		{"word inside another word", nil, "unbearer x subasic y", "unbearer x subasic y"},
		{"scheme without credential", nil, "need Bearer", "need Bearer"},
		{"scheme followed by newline", nil, "Bearer\nxyz", "Bearer\nxyz"},
		{"scheme glued to text", nil, "Bearerxyz Basic:abc", "Bearerxyz Basic:abc"},
		{"prose over-redacted", nil, "Basic auth failed", "Basic [REDACTED] failed"},
		{"quoted URL in a net/http error", paymentRules(), `Get "https://h/p?x=1&api_key=s3cret#f": EOF`,
			`Get "https://h/p?x=1&api_key=[REDACTED]#f": EOF`},
		{"first parameter and repeats", paymentRules(), "https://h/?api_key=a&api_key=b c",
			"https://h/?api_key=[REDACTED]&api_key=[REDACTED] c"},
		{"empty value", paymentRules(), "h/?api_key=&x=1", "h/?api_key=[REDACTED]&x=1"},
		{"parameter name only as a suffix", paymentRules(), "h/?xapi_key=1&my_api_key=2", "h/?xapi_key=1&my_api_key=2"},
		{"parameters need rules", nil, "h/?api_key=1", "h/?api_key=1"},
		{"already redacted", paymentRules(), "Bearer [REDACTED] ?api_key=[REDACTED]", "Bearer [REDACTED] ?api_key=[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.rules.Text(tt.in)
			if got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := tt.rules.Text(got); again != got {
				t.Errorf("Text not idempotent: %q then %q", got, again)
			}
		})
	}
}
