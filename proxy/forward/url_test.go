package forward

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestUpstreamURLAccepts(t *testing.T) {
	tests := []struct {
		name, base, path, query string
		want                    string // the URL as written on the wire
	}{
		{"empty suffix", "https://api.example.com/v2/", "", "", "https://api.example.com/v2"},
		{"root suffix", "https://api.example.com/v2", "/", "", "https://api.example.com/v2/"},
		{"plain", "https://api.example.com/v2/", "/v1/charges", "", "https://api.example.com/v2/v1/charges"},
		{"base without path", "https://api.example.com", "/v1/charges", "", "https://api.example.com/v1/charges"},
		{"base with port", "http://10.0.0.5:8443/api", "/x", "", "http://10.0.0.5:8443/api/x"},
		{"trailing slash kept", "https://a.example/v2", "/v1/charges/", "", "https://a.example/v2/v1/charges/"},
		{"escapes kept byte for byte", "https://a.example/v2", "/ch%20x/caf%C3%A9/%7Euser/%3f", "",
			"https://a.example/v2/ch%20x/caf%C3%A9/%7Euser/%3f"},
		{"lower-case escapes kept", "https://a.example", "/%c3%a9", "", "https://a.example/%c3%a9"},
		{"sub-delims and colon", "https://a.example", "/a;v=1/b:c/d!$&'()*+,=", "",
			"https://a.example/a;v=1/b:c/d!$&'()*+,="},
		{"dots inside a segment", "https://a.example", "/.well-known/a..b/.../..x", "",
			"https://a.example/.well-known/a..b/.../..x"},
		{"literal percent", "https://a.example", "/100%25", "", "https://a.example/100%25"},
		{"escaped base path kept", "https://a.example/a%20b/", "/c", "", "https://a.example/a%20b/c"},
		{"query raw", "https://a.example", "/q", "a=1&b=%2F&c&d=%20+x", "https://a.example/q?a=1&b=%2F&c&d=%20+x"},
		{"query on base path", "https://a.example/v2", "", "x=1", "https://a.example/v2?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := mustURL(t, tt.base)
			u, err := UpstreamURL(base, tt.path, tt.query)
			if err != nil {
				t.Fatalf("UpstreamURL(%q, %q, %q): %v", tt.base, tt.path, tt.query, err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("URL = %q, want %q", got, tt.want)
			}
			if u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil {
				t.Errorf("scheme/host changed: %q", u)
			}
			if !strings.HasPrefix(u.EscapedPath(), strings.TrimSuffix(base.EscapedPath(), "/")) {
				t.Errorf("path %q left base path %q", u.EscapedPath(), base.EscapedPath())
			}
		})
	}
}

func TestUpstreamURLRejects(t *testing.T) {
	tests := []struct {
		name, path, query string
		code              problem.Code
		detail            string // part of the problem's detail
	}{
		{"dot-dot", "/../admin", "", problem.PathEscape, "dot segment"},
		{"trailing dot-dot", "/v1/..", "", problem.PathEscape, "dot segment"},
		{"dot", "/./x", "", problem.PathEscape, "dot segment"},
		{"encoded dot-dot lower", "/%2e%2e/x", "", problem.PathEscape, "dot segment"},
		{"encoded dot-dot mixed case", "/%2E%2e/x", "", problem.PathEscape, "dot segment"},
		{"half encoded", "/.%2E/x", "", problem.PathEscape, "dot segment"},
		{"encoded dot", "/%2e", "", problem.PathEscape, "dot segment"},
		{"tomcat path parameter", "/..;/x", "", problem.PathEscape, "dot segment"},
		{"tomcat encoded", "/%2e%2e;jsessionid=1/x", "", problem.PathEscape, "dot segment"},
		{"double encoded dot-dot", "/%252e%252e/x", "", problem.PathEscape, "dot segment"},
		{"triple encoded dot-dot", "/%25252E%25252E", "", problem.PathEscape, "dot segment"},
		{"authority via empty segment", "//evil.example/x", "", problem.PathEscape, "empty segment"},
		{"empty segment inside", "/a//b", "", problem.PathEscape, "empty segment"},
		{"only slashes", "//", "", problem.PathEscape, "empty segment"},
		{"encoded slash", "/a%2Fb", "", problem.PathEscape, "%2F"},
		{"encoded slash lower", "/a%2fb", "", problem.PathEscape, "%2F"},
		{"encoded backslash", "/a%5Cb", "", problem.PathEscape, "%5C"},
		{"backslash", `/a\b`, "", problem.PathEscape, "backslash"},
		{"at sign", "/a@evil.example", "", problem.PathEscape, `"@"`},
		{"encoded at sign", "/a%40evil.example", "", problem.PathEscape, "%40"},
		{"encoded NUL", "/a%00b", "", problem.PathEscape, "control"},
		{"raw NUL", "/a\x00b", "", problem.PathEscape, "control"},
		{"raw newline", "/a\r\nHost: evil", "", problem.PathEscape, "control"},
		{"encoded newline", "/a%0d%0aHost:evil", "", problem.PathEscape, "control"},
		{"space", "/a b", "", problem.PathEscape, "percent-encoded"},
		{"question mark", "/a?b", "", problem.PathEscape, "percent-encoded"},
		{"hash", "/a#b", "", problem.PathEscape, "percent-encoded"},
		{"raw non-ASCII", "/é", "", problem.PathEscape, "percent-encoded"},
		{"malformed escape", "/a%zz", "", problem.PathEscape, "malformed"},
		{"truncated escape", "/a%2", "", problem.PathEscape, "malformed"},
		{"absolute-form", "http://evil.example/", "", problem.PathEscape, "absolute-form"},
		{"no leading slash", "evil", "", problem.PathEscape, "absolute-form"},
		{"authority-form", "@evil.example", "", problem.PathEscape, "absolute-form"},
		{"query with space", "/a", "a=b c", problem.InvalidRequest, "space"},
		{"query with newline", "/a", "a=b\r\nX: y", problem.InvalidRequest, "control"},
		{"query with hash", "/a", "a=b#frag", problem.InvalidRequest, `"#"`},
		{"query non-ASCII", "/a", "a=é", problem.InvalidRequest, "non-ASCII"},
	}
	base := mustURL(t, "https://api.example.com/v2/")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := UpstreamURL(base, tt.path, tt.query)
			if err == nil {
				t.Fatalf("UpstreamURL(%q, %q) = %q, want an error", tt.path, tt.query, u)
			}
			pe, ok := errors.AsType[*problem.Error](err)
			if !ok {
				t.Fatalf("error %v is not a *problem.Error", err)
			}
			if pe.Code != tt.code {
				t.Errorf("code = %q, want %q", pe.Code, tt.code)
			}
			if !strings.Contains(pe.Detail, tt.detail) {
				t.Errorf("detail %q does not mention %q", pe.Detail, tt.detail)
			}
		})
	}
}

func TestUpstreamURLNeedsAbsoluteBase(t *testing.T) {
	for _, base := range []*url.URL{nil, {Path: "/v2"}} {
		_, err := UpstreamURL(base, "/x", "")
		if pe, ok := errors.AsType[*problem.Error](err); !ok || pe.Code != problem.Internal {
			t.Errorf("UpstreamURL(%v) error = %v, want problem %q", base, err, problem.Internal)
		}
	}
}

// FuzzUpstreamURL checks the invariant behind every rule: whatever the
// caller's path, an accepted URL keeps the base's scheme and host, stays
// under the base path once resolved as the upstream would (one decoding,
// dot segments removed), and has no empty or dot segment.
func FuzzUpstreamURL(f *testing.F) {
	for _, s := range []string{"", "/", "/a/b", "/../x", "/%2e%2E/x", "//h/x", "/a%2Fb", "/a%5c",
		"/%252e%252e", "/a@b", "/a;b/..;/c", "/%00", "/a%20b/", "http://x/"} {
		f.Add(s, "q=1")
	}
	base := mustURL(f, "https://api.example.com/v2/")
	f.Fuzz(func(t *testing.T, p, q string) {
		u, err := UpstreamURL(base, p, q)
		if err != nil {
			return
		}
		if u.Scheme != "https" || u.Host != "api.example.com" || u.User != nil || u.Fragment != "" {
			t.Fatalf("%q: scheme/host/user changed: %q", p, u)
		}
		if c := path.Clean(u.Path); c != "/v2" && !strings.HasPrefix(c, "/v2/") {
			t.Fatalf("%q: resolves to %q, outside /v2", p, c)
		}
		if strings.Contains(u.Path, "//") || strings.Contains(u.Path, `\`) || strings.Contains(u.Path, "@") {
			t.Fatalf("%q: decoded path %q has an empty segment, backslash or @", p, u.Path)
		}
	})
}
