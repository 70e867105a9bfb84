package redact_test

import (
	"bytes"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
)

const (
	jsonType = "application/json"
	formCT   = "application/x-www-form-urlencoded"
)

func TestJSONBody(t *testing.T) {
	rules := paymentRules()
	tests := []struct {
		name, contentType, in, want string
		ok                          bool
	}{
		{"nested object path", jsonType,
			`{"amount":100,"card":{"number":"4111111111111111","exp":"12/30"}}`,
			`{"amount":100,"card":{"number":"[REDACTED]","exp":"12/30"}}`, true},
		{"whitespace and key order kept", jsonType,
			"{ \"z\" : 1 ,\n  \"card\" : { \"number\" :  4111 , \"a\" : [ 1 ] } ,\"b\":2 }",
			"{ \"z\" : 1 ,\n  \"card\" : { \"number\" :  \"[REDACTED]\" , \"a\" : [ 1 ] } ,\"b\":2 }", true},
		{"path through arrays", jsonType,
			`{"items":[{"card":{"cvc":"123","n":1}},{"card":{"cvc":456}},{"other":1},7,[{"card":{"cvc":"789"}}]]}`,
			`{"items":[{"card":{"cvc":"[REDACTED]","n":1}},{"card":{"cvc":"[REDACTED]"}},{"other":1},7,[{"card":{"cvc":"[REDACTED]"}}]]}`, true},
		{"array under an inner key", jsonType,
			`{"items":{"card":[{"cvc":1},{"cvc":2}]}}`,
			`{"items":{"card":[{"cvc":"[REDACTED]"},{"cvc":"[REDACTED]"}]}}`, true},
		{"object and array values masked whole", jsonType,
			`{"secret":{"a":[1,2]},"card":{"number":[4,1]}}`,
			`{"secret":"[REDACTED]","card":{"number":"[REDACTED]"}}`, true},
		{"null, bool and number masked", jsonType,
			`[{"secret":null},{"secret":true},{"secret":-0.5e-3}]`,
			`[{"secret":"[REDACTED]"},{"secret":"[REDACTED]"},{"secret":"[REDACTED]"}]`, true},
		{"path that does not exist", jsonType,
			`{"card":{"numbr":"4111"},"cards":{"number":1},"card2":1}`,
			`{"card":{"numbr":"4111"},"cards":{"number":1},"card2":1}`, true},
		{"path runs into a scalar", jsonType, `{"card":"4111","items":[1,"x"]}`, `{"card":"4111","items":[1,"x"]}`, true},
		{"top-level array", jsonType,
			` [{"card":{"number":"1"}},{"card":{"number":"2"}}]`,
			` [{"card":{"number":"[REDACTED]"}},{"card":{"number":"[REDACTED]"}}]`, true},
		{"numbers verbatim", jsonType,
			`{"a":1.10,"b":1e400,"c":-0,"d":12345678901234567890123,"secret":1.10}`,
			`{"a":1.10,"b":1e400,"c":-0,"d":12345678901234567890123,"secret":"[REDACTED]"}`, true},
		{"unicode and escapes verbatim", jsonType,
			`{"name":"Zoë \u00e9 😀 \"q\" \/","secret":"s\u00e9cret","日本":"語"}`,
			`{"name":"Zoë \u00e9 😀 \"q\" \/","secret":"[REDACTED]","日本":"語"}`, true},
		{"brackets and quotes inside skipped strings", jsonType,
			`{"x":["\"]\\",{"k":"}{"}],"secret":{"s":"]\\\""},"n":[1,{"secret":2}]}`,
			`{"x":["\"]\\",{"k":"}{"}],"secret":"[REDACTED]","n":[1,{"secret":2}]}`, true},
		{"escaped key matches", jsonType, `{"s\u0065cret":"x"}`, `{"s\u0065cret":"[REDACTED]"}`, true},
		{"duplicate keys all masked", jsonType, `{"secret":"a","secret":"b"}`, `{"secret":"[REDACTED]","secret":"[REDACTED]"}`, true},
		{"keys are case-sensitive", jsonType, `{"Secret":"a","CARD":{"number":1}}`, `{"Secret":"a","CARD":{"number":1}}`, true},
		{"mislabelled JSON (form content type)", formCT,
			`{"card":{"number":"4111"},"api_key":"k"}`, `{"card":{"number":"[REDACTED]"},"api_key":"k"}`, true},
		{"JSON under text/plain", "text/plain", `{"secret":1}`, `{"secret":"[REDACTED]"}`, true},
		{"empty object", jsonType, `{}`, `{}`, true},
		{"non-JSON body", "text/plain", `secret=1 card.number`, `secret=1 card.number`, false},
		{"invalid JSON", jsonType, `{"secret":"x",}`, `{"secret":"x",}`, false},
		{"trailing garbage", jsonType, `{"secret":"x"} {}`, `{"secret":"x"} {}`, false},
		{"top-level scalar", jsonType, `"secret"`, `"secret"`, false},
		{"empty body", jsonType, ``, ``, false},
		{"XML", "application/xml", `<card><number>4111</number></card>`, `<card><number>4111</number></card>`, false},
		{"form body", formCT, `amount=100&api_key=s3c%20r+t&x`, `amount=100&api_key=[REDACTED]&x`, true},
		{"form body, content type parameters and case", "Application/X-WWW-Form-Urlencoded; charset=UTF-8",
			`card%5Bnumber%5D=4111&a=%2B`, `card%5Bnumber%5D=[REDACTED]&a=%2B`, true},
		{"form body, unparsable content type", "application/x-www-form-urlencoded; =", `api_key=1`, `api_key=[REDACTED]`, true},
		{"form body without redacted names", formCT, `a=1&b=2`, `a=1&b=2`, true},
		{"invalid JSON labelled as form", formCT, `{bad&api_key=1`, `{bad&api_key=[REDACTED]`, true},
		{"form-shaped body as text", "text/plain", `api_key=1`, `api_key=1`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got, ok := rules.JSONBody(tt.contentType, in)
			if string(got) != tt.want || ok != tt.ok {
				t.Errorf("JSONBody(%q, %s)\n got  %s, %v\n want %s, %v", tt.contentType, tt.in, got, ok, tt.want, tt.ok)
			}
			if string(in) != tt.in {
				t.Errorf("input modified: %s", in)
			}
		})
	}
}

// TestJSONBodyNoRules: without JSON paths or query names a body is still
// recognised, and returned as it is.
func TestJSONBodyNoRules(t *testing.T) {
	tests := []struct {
		name, contentType, in string
		ok                    bool
	}{
		{"JSON", jsonType, `{"secret":1}`, true},
		{"form", formCT, `api_key=1`, true},
		{"text", "text/plain", `x`, false},
	}
	for _, tt := range tests {
		for _, rules := range []*redact.Rules{nil, redact.New(config.Redact{}, nil)} {
			t.Run(tt.name, func(t *testing.T) {
				got, ok := rules.JSONBody(tt.contentType, []byte(tt.in))
				if string(got) != tt.in || ok != tt.ok {
					t.Errorf("JSONBody = %s, %v; want %s, %v", got, ok, tt.in, tt.ok)
				}
			})
		}
	}
}

// TestJSONBodyNoAliasing: a redacted result is a fresh slice; an unchanged
// one is the input itself.
func TestJSONBodyNoAliasing(t *testing.T) {
	rules := paymentRules()
	in := []byte(`{"secret":"x","a":1}`)
	got, _ := rules.JSONBody(jsonType, in)
	got[0] = '['
	if in[0] != '{' {
		t.Errorf("redacted result aliases the input")
	}
	same := []byte(`{"a":1}`)
	if got, _ := rules.JSONBody(jsonType, same); &got[0] != &same[0] {
		t.Errorf("unchanged body was copied")
	}
}

// TestJSONBodyOverlappingPaths: a path inside a masked value is covered by
// the outer mask; the result stays valid JSON.
func TestJSONBodyOverlappingPaths(t *testing.T) {
	rules := redact.New(config.Redact{JSONFields: []string{"card.number", "card", "card.number.x"}}, nil)
	got, ok := rules.JSONBody(jsonType, []byte(`{"card":{"number":{"x":1}},"b":[]}`))
	if want := `{"card":"[REDACTED]","b":[]}`; string(got) != want || !ok {
		t.Errorf("JSONBody = %s, %v; want %s", got, ok, want)
	}
}

func BenchmarkJSONBody(b *testing.B) {
	rules := paymentRules()
	body := bytes.Repeat([]byte(`{"card":{"number":"4111111111111111","exp":"12/30"},"items":[{"card":{"cvc":"1"}}],"other":{"deep":[1,2,3]}},`), 100)
	body = append(append([]byte{'['}, body[:len(body)-1]...), ']')
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rules.JSONBody(jsonType, body)
	}
}
