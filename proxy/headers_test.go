package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestParseIdempotencyKey: the keys real clients send are accepted bare
// (contract §5): Apex's and Java's UUID.randomUUID().toString() (lower-case
// hex; about 10 in 16 start with a digit), .NET's upper-case Guid, the
// keys of Stripe's libraries — stripe-go's NewIdempotencyKey
// ("<unix nanoseconds>_<6 base64url characters>"), stripe-node's
// "stripe-node-retry-<uuid4>", the "KG5LxwFBepaKHyUD" shape of Stripe's
// documentation — and a quoted sf-string is the same key without its
// quotes. Two fields, lists, spaces, controls, non-ASCII, empty keys and
// keys over 255 characters are 400 idempotency-key-invalid naming why.
func TestParseIdempotencyKey(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string // the key; "" with detail == "" means absent
		detail string // a substring of the refusal's detail; "" means accepted
	}{
		{"absent", nil, "", ""},
		{"Apex UUID, digit first", []string{"3f2b8c1e-9d4a-4e6b-8f0a-1c2d3e4f5a6b"}, "3f2b8c1e-9d4a-4e6b-8f0a-1c2d3e4f5a6b", ""},
		{"Apex UUID, all digits first group", []string{"12345678-1234-4abc-9def-0123456789ab"}, "12345678-1234-4abc-9def-0123456789ab", ""},
		{"Apex UUID, letter first", []string{"e7d1c0b2-5a3f-4c8d-9e1f-2a3b4c5d6e7f"}, "e7d1c0b2-5a3f-4c8d-9e1f-2a3b4c5d6e7f", ""},
		{"upper-case .NET Guid", []string{"3F2B8C1E-9D4A-4E6B-8F0A-1C2D3E4F5A6B"}, "3F2B8C1E-9D4A-4E6B-8F0A-1C2D3E4F5A6B", ""},
		{"stripe-go NewIdempotencyKey", []string{"1745173613123456789_AbC-_x"}, "1745173613123456789_AbC-_x", ""},
		{"stripe-node retry key", []string{"stripe-node-retry-954fc873-dce4-416c-8692-4043909caba5"}, "stripe-node-retry-954fc873-dce4-416c-8692-4043909caba5", ""},
		{"Stripe documentation shape", []string{"KG5LxwFBepaKHyUD"}, "KG5LxwFBepaKHyUD", ""},
		{"standard base64 characters", []string{"a+b/c=="}, "a+b/c==", ""},
		{"quoted UUID", []string{`"3f2b8c1e-9d4a-4e6b-8f0a-1c2d3e4f5a6b"`}, "3f2b8c1e-9d4a-4e6b-8f0a-1c2d3e4f5a6b", ""},
		{"quoted with escapes", []string{`"a\"b\\c"`}, `a"b\c`, ""},
		{"quoted with a space inside", []string{`"order 42"`}, "order 42", ""},
		{"surrounding whitespace", []string{" \tabc\t "}, "abc", ""},
		{"length 1", []string{"7"}, "7", ""},
		{"length 1 quoted", []string{`"7"`}, "7", ""},
		{"length 255", []string{strings.Repeat("9", 255)}, strings.Repeat("9", 255), ""},
		{"length 255 quoted", []string{`"` + strings.Repeat("a", 255) + `"`}, strings.Repeat("a", 255), ""},
		{"length 256", []string{strings.Repeat("9", 256)}, "", "256 characters long"},
		{"length 256 quoted", []string{`"` + strings.Repeat("a", 256) + `"`}, "", "256 characters long"},
		{"two fields", []string{"a", "b"}, "", "2 Idempotency-Key fields"},
		{"two equal fields", []string{"a", "a"}, "", "2 Idempotency-Key fields"},
		{"bare list", []string{"a,b"}, "", "comma-separated list"},
		{"bare list with space", []string{"a, b"}, "", "comma-separated list"},
		{"quoted list", []string{`"a", "b"`}, "", "comma-separated list"},
		{"trailing comma", []string{"abc,"}, "", "comma-separated list"},
		{"inner space", []string{"abc def"}, "", "may not contain spaces"},
		{"control character", []string{"abc\x01"}, "", "printable ASCII"},
		{"non-ASCII bare", []string{"café-1"}, "", "printable ASCII"},
		{"non-ASCII quoted", []string{`"café-1"`}, "", "printable ASCII"},
		{"empty value", []string{""}, "", "empty"},
		{"empty sf-string", []string{`""`}, "", "empty"},
		{"unterminated", []string{`"abc`}, "", "no closing quote"},
		{"parameters after the string", []string{`"abc";x=1`}, "", "after the closing quote"},
		{"bad escape", []string{`"a\b"`}, "", "backslash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIdempotencyKey(tt.values)
			if tt.detail == "" {
				if err != nil || got != tt.want {
					t.Fatalf("parseIdempotencyKey(%q) = %q, %v; want %q", tt.values, got, err, tt.want)
				}
				return
			}
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Code != problem.IdempotencyKeyInvalid {
				t.Fatalf("parseIdempotencyKey(%q) = %q, %v; want %s", tt.values, got, err, problem.IdempotencyKeyInvalid)
			}
			if !strings.Contains(pe.Detail, tt.detail) {
				t.Errorf("detail %q does not say %q", pe.Detail, tt.detail)
			}
		})
	}
}

// TestQuotedAndBareKeyAreOne: `"abc"` and `abc` are one key (contract §5), for
// every shape a UUID can take.
func TestQuotedAndBareKeyAreOne(t *testing.T) {
	for _, k := range []string{"0a1b2c3d-0000-4000-8000-000000000000", "ABCDEF01-2345-4678-9ABC-DEF012345678", "x"} {
		bare, err1 := parseIdempotencyKey([]string{k})
		quoted, err2 := parseIdempotencyKey([]string{`"` + k + `"`})
		if err1 != nil || err2 != nil || bare != quoted {
			t.Errorf("%s: bare %q (%v), quoted %q (%v); want one key", k, bare, err1, quoted, err2)
		}
	}
}

// TestParseSfStringWithoutEscapes: a quoted key without escapes (every
// client's) is taken from the header value itself, without an allocation;
// a key with escapes is decoded as before, whether they come first or last.
func TestParseSfStringWithoutEscapes(t *testing.T) {
	for v, want := range map[string]string{`"k-1"`: "k-1", `"a\"b"`: `a"b`, `"\\x"`: `\x`, `"x\\"`: `x\`, `"ab\"c\\d"`: `ab"c\d`} {
		if got, err := parseSfString(v); err != nil || got != want {
			t.Errorf("parseSfString(%s) = %q, %v; want %q", v, got, err, want)
		}
	}
	v := `"4f2c8a7e-1b3d-4c5e-9f60-7a8b9c0d1e2f"`
	if n := testing.AllocsPerRun(100, func() { _, _ = parseIdempotencyKey([]string{v}) }); n != 0 {
		t.Errorf("a quoted key without escapes allocates %v times, want 0", n)
	}
}
