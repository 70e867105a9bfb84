package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

func TestQuote(t *testing.T) {
	long := strings.Repeat("a", maxQuoted-1) + "é" + "tail"
	tests := []struct {
		name, in, want string
	}{
		{"short", "https://x", `"https://x"`},
		{"control characters escaped", "a\nb", `"a\nb"`},
		{"at the limit", strings.Repeat("b", maxQuoted), `"` + strings.Repeat("b", maxQuoted) + `"`},
		{"cut on a rune boundary", long, `"` + strings.Repeat("a", maxQuoted-1) + `"…`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quote(tt.in)
			if got != tt.want {
				t.Errorf("quote = %q, want %q", got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("quote = %q is not valid UTF-8", got)
			}
		})
	}
}

// TestRSAKeysForOrder checks the rotation rule: the issuer's keys labelled
// with the kid come first, its other keys follow, none of its keys is
// dropped and no key of another issuer is included.
func TestRSAKeysForOrder(t *testing.T) {
	var keys []rsaKey
	for _, label := range []string{"old", "current", "other-org", "spare"} {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		iss := "org-a"
		if label == "other-org" {
			iss = "org-b"
		}
		keys = append(keys, rsaKey{info: KeyInfo{Labels: []string{label}}, issuer: iss, pub: &k.PublicKey})
	}
	v := &Verifier{keys: keys}
	tests := []struct {
		kid  string
		want []int // indices into keys
	}{
		{"", []int{0, 1, 3}},
		{"current", []int{1, 0, 3}},
		{"CURRENT", []int{1, 0, 3}},
		{"spare", []int{3, 0, 1}},
		{"unknown", []int{0, 1, 3}},
		{"other-org", []int{0, 1, 3}},
	}
	for _, tt := range tests {
		t.Run("kid "+tt.kid, func(t *testing.T) {
			got := v.rsaKeysFor("org-a", tt.kid)
			if len(got) != len(tt.want) {
				t.Fatalf("rsaKeysFor(%q) = %d keys, want %d", tt.kid, len(got), len(tt.want))
			}
			for i, idx := range tt.want {
				if got[i] != keys[idx].pub {
					t.Errorf("rsaKeysFor(%q)[%d] is not key %q", tt.kid, i, keys[idx].info.Labels[0])
				}
			}
		})
	}
}

// TestAuditResultOfEveryProblemCode: every problem code's audit result is
// lower-case words joined by underscores (contract §12), the code with its
// hyphens so replaced.
func TestAuditResultOfEveryProblemCode(t *testing.T) {
	word := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for _, c := range problem.Codes() {
		if r := AuditResult(c); !word.MatchString(r) || strings.ReplaceAll(r, "_", "-") != string(c) {
			t.Errorf("AuditResult(%s) = %q", c, r)
		}
	}
	if got := AuditResult(problem.NotFound); got != "not_found" {
		t.Errorf("AuditResult(not-found) = %q, want not_found", got)
	}
}
