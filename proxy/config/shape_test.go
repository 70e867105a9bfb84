package config_test

import (
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestParseShape: problems found before decoding (syntax, unknown keys,
// wrong kinds, durations) come with their line and key, all at once, in
// file order. The fragments are not whole configurations: what the later
// steps find in the same pass (a required key missing, a value out of its
// range) is reported too, after or between them (TestParseOnePass).
func TestParseShape(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // exact Error() of each shape problem, in order
	}{
		{"unknown top-level key", "listen: 127.0.0.1:1\nlistn: 127.0.0.1:2\n",
			[]string{`line 2: listn: unknown key; did you mean "listen"?`}},
		{"unknown keys everywhere, all reported",
			"policy:\n  max_atempts: 3\nendpoints:\n  a:\n    url: https://a.example.com\n    urll: x\n    redact: {header: [X]}\nsurprise: 1\n",
			[]string{`line 2: policy.max_atempts: unknown key; did you mean "max_attempts"?`,
				`line 6: endpoints.a.urll: unknown key; did you mean "url"?`,
				`line 7: endpoints.a.redact.header: unknown key; did you mean "headers"?`,
				"line 8: surprise: unknown key"}},
		{"duration with a space", "policy:\n  base_delay: 5 s\n",
			[]string{`line 2: policy.base_delay: "5 s" is not a duration; write a Go duration such as 500ms, 5s, 15m or 72h`}},
		{"duration in days", "auth:\n  max_token_lifetime: 3d\n",
			[]string{`line 2: auth.max_token_lifetime: "3d" is not a duration; write a Go duration such as 500ms, 5s, 15m or 72h`}},
		{"duration without unit", "endpoints:\n  a:\n    attempt_timeout: 20\n",
			[]string{"line 3: endpoints.a.attempt_timeout: 20 has no unit; write a Go duration such as 500ms, 5s, 15m or 72h"}},
		{"duration as a list", "policy:\n  max_age: [1h]\n",
			[]string{"line 2: policy.max_age: must be a duration; write a Go duration such as 500ms, 5s, 15m or 72h"}},
		{"list where a mapping belongs", "auth:\n  - issuers\n",
			[]string{"line 2: auth: must be a mapping"}},
		{"scalar where a list belongs", "auth:\n  issuers: https://a.my.salesforce.com\n",
			[]string{"line 2: auth.issuers: must be a list"}},
		{"text where a number belongs", "policy:\n  max_attempts: many\n  multiplier: twice\n",
			[]string{"line 2: policy.max_attempts: must be a whole number", "line 3: policy.multiplier: must be a number"}},
		{"mapping where a string belongs", "listen: {host: x}\n",
			[]string{"line 1: listen: must be a string"}},
		{"inline header secret", "endpoints:\n  a:\n    headers:\n      Authorization: Bearer " + inlineSecret + "\n",
			[]string{"line 4: endpoints.a.headers.Authorization: must be {env: VARIABLE} or {file: PATH}; secrets are never written inline"}},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n",
			[]string{"line 3: only one YAML document is allowed"}},
		{"a list at the top", "- listen\n",
			[]string{"line 1: the configuration must be a mapping of keys (listen, auth, endpoints, ...)"}},
		{"duplicate key", "listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n",
			[]string{`line 2: mapping key "listen" already defined at [1:1]`}},
		{"syntax error", "auth:\n  issuers: [a, b\n",
			[]string{"line 2: sequence end token ']' not found"}},
		{"integer overflow", "policy:\n  max_request_bytes: 99999999999999999999\n",
			[]string{"line 2: policy.max_request_bytes: 99999999999999999999 is out of range"}},
		{"integer out of range for int", "policy:\n  max_attempts: 18446744073709551615\n  max_response_bytes: -9223372036854775808\n",
			[]string{"line 2: policy.max_attempts: 18446744073709551615 is out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml), baseEnv().get)
			ps := problems(t, err)
			var got []string
			for _, p := range ps {
				got = append(got, p.Error())
			}
			if !subsequence(tt.want, got) {
				t.Errorf("got:\n%s\nwant, in this order:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// subsequence reports whether want appears in got in order.
func subsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestParseOnePass: a file with shape problems (a wrong kind, a duration
// without a unit, an unknown key) and problems of the later steps (a
// value out of range, a bad name, a missing secret) gets every one in the
// first run, in file order; the keys the shape check dropped draw no
// second problem about the default left in their place.
func TestParseOnePass(t *testing.T) {
	text := doc(map[string]string{
		"policy":    "policy:\n  max_attempts: many\n  attempt_timeout: 5\n  multiplier: 0.5\n",
		"endpoints": "endpoints:\n  Bad_Name:\n    url: https://a.example.com\n    urll: x\n    headers:\n      X-Key: {env: NOT_SET}\n",
	}, "")
	_, err := config.Parse([]byte(text), baseEnv().get)
	var keys []string
	for _, p := range problems(t, err) {
		keys = append(keys, p.Key)
	}
	want := "policy.max_attempts policy.attempt_timeout policy.multiplier endpoints.Bad_Name " +
		"endpoints.Bad_Name.urll endpoints.Bad_Name.headers.X-Key"
	if strings.Join(keys, " ") != want {
		t.Errorf("keys %v, want %s\n%v", keys, want, err)
	}
}

// TestParseIndentationError: a key indented deeper than its siblings is
// reported on its own line, not on the line where the value it continues
// starts.
func TestParseIndentationError(t *testing.T) {
	text := "endpoints:\n  a:\n    url: https://a.example.com\n      attempt_timeout: 5s\n"
	_, err := config.Parse([]byte(text), baseEnv().get)
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Line != 4 || !strings.Contains(ps[0].Msg, "indented deeper") {
		t.Fatalf("got %v, want one problem on line 4 saying the key is indented deeper", err)
	}
}

// TestParseEmpty: an empty file is the defaults, which lack what has no
// default; every missing key is reported.
func TestParseEmpty(t *testing.T) {
	for _, text := range []string{"", "# only a comment\n", "{}\n"} {
		_, err := config.Parse([]byte(text), baseEnv().get)
		want := "auth.issuers: at least one issuer is required\nauth.audience: required\n" +
			"auth.algorithms: required: RS256 or RS512 with auth.certificate_files, HS256 with auth.hs256_secret_env or hs256_secret_file\n" +
			"endpoints: at least one endpoint is required"
		problems(t, err)
		if err.Error() != want {
			t.Errorf("Parse(%q):\n%v\nwant:\n%s", text, err, want)
		}
	}
}

// TestParseReportsAllProblemsInFileOrder: problems from every stage come
// together, sorted by line, one per line of the message.
func TestParseReportsAllProblemsInFileOrder(t *testing.T) {
	text := doc(map[string]string{
		"listen":    "listen: nowhere\n",
		"policy":    "policy:\n  max_attempts: 0\n",
		"endpoints": "endpoints:\n  a:\n    url: ftp://a.example.com\n    headers:\n      X-Key: {env: NOT_SET}\n",
	}, "")
	_, err := config.Parse([]byte(text), baseEnv().get)
	ps := problems(t, err)
	var keys []string
	last := 0
	for _, p := range ps {
		keys = append(keys, p.Key)
		if p.Line < last {
			t.Errorf("%q is out of line order", p)
		}
		last = p.Line
	}
	want := "listen policy.max_attempts endpoints.a.url endpoints.a.headers.X-Key"
	if strings.Join(keys, " ") != want {
		t.Errorf("keys %v, want %s\n%v", keys, want, err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d lines, want 4:\n%v", n, err)
	}
}
