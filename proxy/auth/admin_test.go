package auth_test

import (
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

const (
	opsToken    = "ops-0123456789abcdef"
	viewerToken = "viewer-0123456789abcdef"
)

func adminEnv(name string) string {
	return map[string]string{
		"OPS_TOKEN": opsToken, "VIEWER_TOKEN": viewerToken,
		"SHORT_TOKEN": "short", "DUP_TOKEN": opsToken,
	}[name]
}

func TestAdminTokensCheck(t *testing.T) {
	dir := t.TempDir()
	a, err := auth.NewAdminTokens(config.Admin{Tokens: []config.AdminToken{
		{Name: "ops", TokenEnv: "OPS_TOKEN", Scope: "write"},
		{Name: "viewer", TokenFile: writeFile(t, dir, "viewer", []byte(viewerToken+"\n")), Scope: "read"},
	}}, adminEnv)
	if err != nil {
		t.Fatalf("NewAdminTokens: %v", err)
	}
	tests := []struct {
		name   string
		header string
		need   auth.Scope
		want   string       // token name on success
		code   problem.Code // on failure
		detail string
	}{
		{"write token on write", "Bearer " + opsToken, auth.ScopeWrite, "ops", "", ""},
		{"write token on read", "Bearer " + opsToken, auth.ScopeRead, "ops", "", ""},
		{"read token on read", "Bearer " + viewerToken, auth.ScopeRead, "viewer", "", ""},
		{"read token from file on read, lower-case scheme", "bearer " + viewerToken, auth.ScopeRead, "viewer", "", ""},
		{"read token on write", "Bearer " + viewerToken, auth.ScopeWrite, "", problem.Forbidden, `admin token "viewer" has scope read; this action needs write`},
		{"unknown token", "Bearer " + strings.ToUpper(opsToken), auth.ScopeRead, "", problem.Unauthorized, "unknown admin token"},
		{"token prefix", "Bearer " + opsToken[:len(opsToken)-1], auth.ScopeRead, "", problem.Unauthorized, "unknown admin token"},
		{"token with newline", "Bearer " + viewerToken + "\n", auth.ScopeRead, "viewer", "", ""},
		{"missing header", "", auth.ScopeRead, "", problem.Unauthorized, "missing bearer token"},
		{"basic scheme", "Basic " + opsToken, auth.ScopeRead, "", problem.Unauthorized, "scheme is not Bearer"},
		{"unknown scope", "Bearer " + opsToken, auth.Scope("admin"), "", problem.Internal, `unknown admin scope "admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, err := a.Check(tt.header, tt.need)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if name != tt.want {
					t.Errorf("name = %q, want %q", name, tt.want)
				}
				return
			}
			pe := wantProblem(t, err, tt.code, tt.detail)
			if name != "" {
				t.Errorf("name = %q on error, want empty", name)
			}
			for _, tok := range []string{opsToken, viewerToken} {
				if strings.Contains(pe.Error(), tok) {
					t.Errorf("error %q leaks a token", pe.Error())
				}
			}
		})
	}
}

func TestAdminTokensNone(t *testing.T) {
	a, err := auth.NewAdminTokens(config.Admin{}, adminEnv)
	if err != nil {
		t.Fatalf("NewAdminTokens: %v", err)
	}
	_, err = a.Check("Bearer "+opsToken, auth.ScopeRead)
	wantProblem(t, err, problem.Unauthorized, "unknown admin token")
}

func TestNewAdminTokensErrors(t *testing.T) {
	tests := []struct {
		name   string
		tokens []config.AdminToken
		want   string
	}{
		{"no name", []config.AdminToken{{TokenEnv: "OPS_TOKEN", Scope: "write"}}, "admin.tokens[0].name: required"},
		{"name twice", []config.AdminToken{
			{Name: "ops", TokenEnv: "OPS_TOKEN", Scope: "write"},
			{Name: "ops", TokenEnv: "VIEWER_TOKEN", Scope: "read"},
		}, `admin.tokens[1].name: "ops" is used twice`},
		{"bad scope", []config.AdminToken{{Name: "ops", TokenEnv: "OPS_TOKEN", Scope: "admin"}}, `admin.tokens[0].scope: scope "admin" is not read or write`},
		{"empty scope", []config.AdminToken{{Name: "ops", TokenEnv: "OPS_TOKEN"}}, "admin.tokens[0].scope"},
		{"no source", []config.AdminToken{{Name: "ops", Scope: "read"}}, "admin.tokens[0]"},
		{"env unset", []config.AdminToken{{Name: "ops", TokenEnv: "NOPE", Scope: "read"}}, "NOPE"},
		{"too short", []config.AdminToken{{Name: "tiny", TokenEnv: "SHORT_TOKEN", Scope: "read"}}, `token "tiny" is 5 bytes; at least 16 required`},
		{"same value twice", []config.AdminToken{
			{Name: "ops", TokenEnv: "OPS_TOKEN", Scope: "write"},
			{Name: "copy", TokenEnv: "DUP_TOKEN", Scope: "read"},
		}, `admin.tokens[1]: token "copy" has the same value as another token`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := auth.NewAdminTokens(config.Admin{Tokens: tt.tokens}, adminEnv)
			if err == nil {
				t.Fatalf("NewAdminTokens = %v, nil; want error containing %q", a, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), opsToken) {
				t.Errorf("error %q leaks a token", err)
			}
		})
	}
}

func TestScopeIncludes(t *testing.T) {
	tests := []struct {
		have, need auth.Scope
		want       bool
	}{
		{auth.ScopeWrite, auth.ScopeWrite, true},
		{auth.ScopeWrite, auth.ScopeRead, true},
		{auth.ScopeRead, auth.ScopeRead, true},
		{auth.ScopeRead, auth.ScopeWrite, false},
		{auth.Scope(""), auth.ScopeRead, false},
		{auth.ScopeWrite, auth.Scope("admin"), false},
	}
	for _, tt := range tests {
		t.Run(string(tt.have)+"/"+string(tt.need), func(t *testing.T) {
			if got := tt.have.Includes(tt.need); got != tt.want {
				t.Errorf("%q.Includes(%q) = %v, want %v", tt.have, tt.need, got, tt.want)
			}
		})
	}
}
