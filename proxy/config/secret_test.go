package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
)

func TestSecretRefResolve(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string { return credtest.WriteFile(t, dir, name, []byte(content)) }
	big := file("big", strings.Repeat("x", 64<<10+1))
	tests := []struct {
		name    string
		ref     config.SecretRef
		want    string
		wantErr string // fragment of the error; "" means no error
	}{
		{"env", config.SecretRef{Env: "JWT_SECRET"}, jwtSecret, ""},
		{"env unset", config.SecretRef{Env: "NOPE"}, "", "environment variable NOPE is not set or is empty"},
		{"env not a name", config.SecretRef{Env: inlineSecret + "!"}, "", "is not an environment variable name"},
		{"file with newline", config.SecretRef{File: file("lf", fileSecret+"\n")}, fileSecret, ""},
		{"file with CRLF", config.SecretRef{File: file("crlf", fileSecret+"\r\n")}, fileSecret, ""},
		{"file without newline", config.SecretRef{File: file("none", fileSecret)}, fileSecret, ""},
		{"file with two newlines keeps one", config.SecretRef{File: file("two", fileSecret+"\n\n")}, fileSecret + "\n", ""},
		{"file with inner newline", config.SecretRef{File: file("inner", "a\nb\n")}, "a\nb", ""},
		{"file with trailing spaces kept", config.SecretRef{File: file("sp", fileSecret+" \n")}, fileSecret + " ", ""},
		{"file empty", config.SecretRef{File: file("empty", "")}, "", "is empty"},
		{"file only a newline", config.SecretRef{File: file("nl", "\n")}, "", "is empty"},
		{"file missing", config.SecretRef{File: filepath.Join(dir, "missing")}, "", "missing: no such file or directory"},
		{"file too large", config.SecretRef{File: big}, "", "is larger than 65536 bytes"},
		{"both", config.SecretRef{Env: "JWT_SECRET", File: file("b", "x")}, "", "set one of env and file, not both"},
		{"neither", config.SecretRef{}, "", "set one of env and file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.ref.Resolve(baseEnv().get)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("Resolve = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != "" {
				t.Fatalf("Resolve = %q, %v; want error containing %q", got, err, tt.wantErr)
			}
			assertNoSecret(t, err.Error())
		})
	}
}

func TestSecretRefResolveNilGetenvIsOsGetenv(t *testing.T) {
	t.Setenv("CALLOUT_PROXY_CONFIG_TEST_SECRET", fileSecret)
	got, err := config.SecretRef{Env: "CALLOUT_PROXY_CONFIG_TEST_SECRET"}.Resolve(nil)
	if err != nil || got != fileSecret {
		t.Errorf("Resolve(nil) = %q, %v", got, err)
	}
}

func TestSecretAccessors(t *testing.T) {
	dir := keyFiles(t)
	get := baseEnv().get
	tests := []struct {
		name    string
		resolve func() (string, error)
		want    string
		wantErr string
	}{
		{"hs256 env", func() (string, error) {
			b, err := config.Auth{Issuers: []string{"org"}, HS256SecretEnv: "JWT_SECRET"}.HS256Secret("org", get)
			return string(b), err
		}, jwtSecret, ""},
		{"hs256 file", func() (string, error) {
			b, err := config.Auth{Issuers: []string{"org"}, IssuerKeys: []config.IssuerKeys{{Issuer: "org", HS256SecretFile: filepath.Join(dir, "secret.txt")}}}.HS256Secret("org", get)
			return string(b), err
		}, fileSecret, ""},
		{"hs256 none", func() (string, error) {
			b, err := config.Auth{Issuers: []string{"org"}}.HS256Secret("org", get)
			return string(b), err
		}, "", `auth: issuer "org" has no HS256 secret`},
		{"hs256 of another issuer", func() (string, error) {
			b, err := config.Auth{Issuers: []string{"a", "b"}, IssuerKeys: []config.IssuerKeys{{Issuer: "a", HS256SecretEnv: "JWT_SECRET"}}}.HS256Secret("b", get)
			return string(b), err
		}, "", `auth: issuer "b" has no HS256 secret`},
		{"admin env", func() (string, error) { return config.AdminToken{Name: "ops", TokenEnv: "ADMIN_TOKEN"}.Value(get) }, adminSecret, ""},
		{"admin unset", func() (string, error) { return config.AdminToken{Name: "ops", TokenEnv: "NOPE"}.Value(get) },
			"", `admin token "ops": environment variable NOPE is not set or is empty`},
		{"redis password", func() (string, error) { return config.Redis{PasswordEnv: "REDIS_PASSWORD"}.Password(get) }, redisPassword, ""},
		{"redis no password", func() (string, error) { return config.Redis{}.Password(get) }, "", ""},
		{"salesforce client id", func() (string, error) { return config.Salesforce{ClientIDEnv: "SF_CLIENT_ID"}.ClientID(get) }, "3MVG9-consumer-key", ""},
		{"salesforce client id unset", func() (string, error) { return config.Salesforce{ClientIDEnv: "NOPE"}.ClientID(get) },
			"", "salesforce client id: environment variable NOPE is not set or is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.resolve()
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("got %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestNoSecretInErrors puts a secret in every place one can reach (values
// behind refs that fail later checks, user info in URLs, a secret pasted
// where a variable name or a ref belongs) and checks no error quotes any.
// (Variable names and file paths are named on purpose: they are how an
// operator finds what to fix.)
func TestNoSecretInErrors(t *testing.T) {
	dir := keyFiles(t)
	credtest.WriteFile(t, dir, "bell.txt", []byte(fileSecret+"\a\n"))
	getenv := env{
		"JWT_SECRET":   "short-" + jwtSecret[:8], // too short: reported, not quoted
		"ADMIN_TOKEN":  adminSecret,
		"ADMIN_TOKEN2": adminSecret, // same value twice: reported, not quoted
		"PAYMENT_AUTH": paymentSecret + "\n",
	}.get
	text := doc(map[string]string{
		"redis": "redis:\n  url: http://user:" + urlPassword + "@127.0.0.1:6379/x\n  password_env: REDIS_PASSWORD\n",
		"admin": "admin:\n  tokens:\n    - {name: a, token_env: ADMIN_TOKEN, scope: write}\n" +
			"    - {name: b, token_env: ADMIN_TOKEN2, scope: read}\n    - {name: c, token_env: '" + readerSecret + " x', scope: read}\n",
		"endpoints": "endpoints:\n  a:\n    url: https://u:" + urlPassword + "@a.example.com\n    headers:\n" +
			"      Authorization: {env: PAYMENT_AUTH}\n      X-File: {file: {{dir}}/bell.txt}\n",
	}, dir)
	_, err := config.Parse([]byte(text), getenv)
	ps := problems(t, err) // asserts no secret in err.Error()
	if len(ps) < 6 {
		t.Errorf("want at least 6 problems, got:\n%v", err)
	}
	for _, p := range ps {
		assertNoSecret(t, p.Error())
		assertNoSecret(t, fmt.Sprintf("%v %+v %#v", p, p, p))
	}
	_, err = config.Parse([]byte("endpoints:\n  a:\n    headers:\n      Authorization: "+inlineSecret+"\n"), getenv)
	problems(t, err)
}

func TestStringersHideSecrets(t *testing.T) {
	tests := []struct {
		name string
		v    fmt.Stringer
		want string
	}{
		{"redis url", config.Redis{URL: "rediss://user:" + redisPassword + "@r.example.com:6379/0"}, "rediss://user:xxxxx@r.example.com:6379/0"},
		{"redis cluster", config.Redis{Cluster: []string{"a:1", "b:2"}}, "cluster [a:1, b:2]"},
		{"redis embedded", config.Redis{}, "embedded"},
		{"secret env", config.SecretRef{Env: "X"}, "env X"},
		{"secret file", config.SecretRef{File: "/s/x"}, "file /s/x"},
		{"secret none", config.SecretRef{}, "no secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.v.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
	cfg := mustParse(t, doc(map[string]string{"redis": "redis:\n  url: redis://:" + redisPassword + "@127.0.0.1:6379/0\n"}, ""), baseEnv().get)
	if s := fmt.Sprintf("%v %+v", *cfg, *cfg); strings.Contains(s, redisPassword) {
		t.Errorf("printing the Config shows the redis password: %s", s)
	}
}

func TestLoadFileSecretTrimmed(t *testing.T) {
	dir := t.TempDir()
	credtest.WriteFile(t, dir, "token", []byte(adminSecret+"\r\n"))
	path := credtest.WriteFile(t, dir, "c.yaml", []byte(doc(map[string]string{"admin": "admin:\n  tokens:\n    - {name: ops, token_file: token, scope: write}\n"}, dir)))
	cfg, err := config.Load(path, baseEnv().get)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := cfg.Admin.Tokens[0].Value(nil); err != nil || v != adminSecret {
		t.Errorf("token value matches: %v, err %v", v == adminSecret, err)
	}
	if _, err := os.Stat(cfg.Admin.Tokens[0].TokenFile); err != nil {
		t.Errorf("resolved token path: %v", err)
	}
}
