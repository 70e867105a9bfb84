package auth_test

import (
	"crypto/rsa"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestVerifyHeader covers the Authorization header and the compact JWS form.
func TestVerifyHeader(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	runVerify(t, w, []verifyCase{
		{"missing header", "rs", func() string { return "" }, "missing bearer token"},
		{"blank header", "rs", func() string { return "   " }, "missing bearer token"},
		{"basic scheme", "rs", func() string { return "Basic dXNlcjpwYXNz" }, "scheme is not Bearer"},
		{"token without scheme", "rs", func() string { return authtest.MintRS(t, f.key1, "RS256", w.ok) }, "scheme is not Bearer"},
		{"empty bearer", "rs", func() string { return "Bearer " }, "empty bearer token"},
		{"lower-case scheme", "rs", func() string { return "bearer " + authtest.MintRS(t, f.key1, "RS256", w.ok) }, ""},
		{"malformed two segments", "rs", func() string { return "Bearer abc.def" }, "malformed token"},
		{"malformed base64", "rs", func() string { return "Bearer !!!.???.***" }, "malformed token"},
		{"malformed json claims", "rs", func() string { return "Bearer " + unsigned(`{"alg":"RS256"}`, `not json`, "") }, "malformed token"},
		{"no alg", "rs", func() string { return "Bearer " + unsigned(`{"typ":"JWT"}`, `{}`, "c2ln") }, "token header has no alg"},
	})
}

// TestVerifyTimes covers exp, nbf and iat with the leeway, and the maximum lifetime.
func TestVerifyTimes(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	runVerify(t, w, []verifyCase{
		{"expired", "rs", w.rs(t, f.key1, "RS256", f.claims(-2*time.Hour, time.Hour)), "token expired at 2026-11-29T09:00:00Z"},
		{"expired beyond leeway", "rs", w.rs(t, f.key1, "RS256", f.claims(-5*time.Minute-31*time.Second, 5*time.Minute)), "token expired at 2026-11-29T09:59:29Z"},
		{"expired within leeway", "rs", w.rs(t, f.key1, "RS256", f.claims(-5*time.Minute-29*time.Second, 5*time.Minute)), ""},
		{"expired within configured leeway", "leeway", w.rs(t, f.key1, "RS256", f.claims(-6*time.Minute, 5*time.Minute)), ""},
		{"not yet valid", "rs", w.rs(t, f.key1, "RS256", f.claims(5*time.Minute, 5*time.Minute)), "token not valid yet: nbf is 2026-11-29T10:05:00Z"},
		{"nbf within leeway", "rs", w.rs(t, f.key1, "RS256", f.claims(20*time.Second, 5*time.Minute)), ""},
		{"iat in the future", "rs", w.rs(t, f.key1, "RS256", jwt.RegisteredClaims{
			Issuer: issuer, Audience: jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(f.now.Add(10 * time.Minute)),
			ExpiresAt: jwt.NewNumericDate(f.now.Add(15 * time.Minute)),
		}), "token issued in the future: iat is 2026-11-29T10:10:00Z"},
		{"lifetime over default max", "rs", w.rs(t, f.key1, "RS256", f.claims(0, 61*time.Minute)), "token lifetime 1h1m0s (exp − max(iat, nbf)) exceeds max_token_lifetime 1h0m0s"},
		{"lifetime at default max", "rs", w.rs(t, f.key1, "RS256", f.claims(0, time.Hour)), ""},
		{"lifetime over configured max", "short", w.rs(t, f.key1, "RS256", f.claims(0, 6*time.Minute)), "exceeds max_token_lifetime 5m0s"},
		{"lifetime from the later nbf", "short", w.rs(t, f.key1, "RS256", jwt.RegisteredClaims{
			Issuer: issuer, Audience: jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(f.now.Add(-time.Hour)),
			NotBefore: jwt.NewNumericDate(f.now.Add(-time.Minute)),
			ExpiresAt: jwt.NewNumericDate(f.now.Add(4 * time.Minute)),
		}), ""},
		{"lifetime from iat alone", "short", w.rs(t, f.key1, "RS256", jwt.RegisteredClaims{
			Issuer: issuer, Audience: jwt.ClaimStrings{audience},
			IssuedAt:  jwt.NewNumericDate(f.now.Add(-time.Hour)),
			ExpiresAt: jwt.NewNumericDate(f.now.Add(4 * time.Minute)),
		}), "token lifetime 1h4m0s"},
		{"no iat nor nbf", "rs", w.rs(t, f.key1, "RS256", jwt.RegisteredClaims{
			Issuer: issuer, Audience: jwt.ClaimStrings{audience}, ExpiresAt: jwt.NewNumericDate(f.now.Add(time.Minute)),
		}), "neither iat nor nbf"},
		{"no exp", "rs", w.rs(t, f.key1, "RS256", jwt.RegisteredClaims{
			Issuer: issuer, Audience: jwt.ClaimStrings{audience}, IssuedAt: jwt.NewNumericDate(f.now),
		}), "token has no exp claim"},
	})
}

// TestVerifyClaims covers iss and aud.
func TestVerifyClaims(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	runVerify(t, w, []verifyCase{
		{"RS256 valid", "rs", w.rs(t, f.key1, "RS256", w.ok), ""},
		{"wrong audience", "rs", w.rs(t, f.key1, "RS256", authtest.Claims(issuer, "someone-else", subject, f.now, time.Minute)), `audience ["someone-else"] is not accepted`},
		{"no audience", "rs", w.rs(t, f.key1, "RS256", authtest.Claims(issuer, "", subject, f.now, time.Minute)), `token has no aud claim`},
		{"audience among several", "rs", w.rs(t, f.key1, "RS256", func() jwt.RegisteredClaims {
			c := f.claims(0, time.Minute)
			c.Audience = jwt.ClaimStrings{"other", audience}
			return c
		}()), ""},
		{"unknown issuer", "rs", w.rs(t, f.key1, "RS256", authtest.Claims("https://evil.my.salesforce.com", audience, subject, f.now, time.Minute)), `issuer "https://evil.my.salesforce.com" is not allowed`},
		{"issuer differs in case", "rs", w.rs(t, f.key1, "RS256", authtest.Claims(strings.ToUpper(issuer), audience, subject, f.now, time.Minute)), "is not allowed"},
		{"no issuer", "rs", w.rs(t, f.key1, "RS256", authtest.Claims("", audience, subject, f.now, time.Minute)), "token has no iss claim"},
		{"second issuer", "rs", w.rs(t, f.key1, "RS256", authtest.Claims(sandbox, audience, subject, f.now, time.Minute)), ""},
	})
}

// TestVerifyKeyBoundToIssuer: a key verifies only tokens of the issuer it
// is bound to (contract §9), so the holder of one organisation's
// certificate or secret cannot mint a token another organisation's
// callouts, partitions and shares would accept — even naming the other
// certificate in kid.
func TestVerifyKeyBoundToIssuer(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	sb := authtest.Claims(sandbox, audience, subject, f.now, time.Minute)
	runVerify(t, w, []verifyCase{
		{"own certificate", "bound", w.rs(t, f.key1, "RS256", w.ok), ""},
		{"other org's certificate own issuer", "bound", w.rs(t, f.key2, "RS256", sb), ""},
		{"org-a certificate signing for org-b", "bound", w.rs(t, f.key1, "RS256", sb), `under any certificate of issuer "` + sandbox + `"`},
		{"org-a certificate signing for org-b, kid of org-a", "bound", kid(t, f.key1, currentKID, sb), "invalid signature"},
		{"org-b certificate signing for org-a", "bound", w.rs(t, f.key2, "RS256", w.ok), "invalid signature"},
		{"own secret", "bound", w.hs(t, []byte(sandboxSecret), sb), ""},
		{"org-a secret signing for org-b", "bound", w.hs(t, []byte(secret), sb), `HS256 signature does not verify with the secret of issuer "` + sandbox + `"`},
		{"org-b secret signing for org-a", "bound", w.hs(t, []byte(sandboxSecret), w.ok), "invalid signature"},
		{"unknown issuer", "bound", w.hs(t, []byte(secret), authtest.Claims("https://evil.my.salesforce.com", audience, subject, f.now, time.Minute)), "is not allowed"},
	})
}

// TestVerifySignature covers algorithms, key rotation and the HS/RS confusion.
func TestVerifySignature(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	runVerify(t, w, []verifyCase{
		{"alg none", "rs+hs", func() string {
			return "Bearer " + unsigned(`{"alg":"none","typ":"JWT"}`, `{"iss":"`+issuer+`","aud":"`+audience+`","exp":4102444800,"iat":1764410400}`, "")
		}, `algorithm "none" is not accepted`},
		{"alg unknown", "rs", func() string { return "Bearer " + unsigned(`{"alg":"HS999"}`, `{}`, "c2ln") }, `algorithm "HS999" is not accepted`},
		{"HS256 with certificate PEM as secret, RS only", "rs256", func() string {
			return "Bearer " + authtest.MintHS256(t, readFile(t, f.certFile), w.ok)
		}, `algorithm "HS256" is not accepted`},
		{"HS256 with certificate PEM as secret, RS and HS", "rs+hs", func() string {
			return "Bearer " + authtest.MintHS256(t, readFile(t, f.certFile), w.ok)
		}, "HS256 signature does not verify with the secret of issuer"},
		{"HS256 with public key PEM as secret, RS and HS", "rs+hs", func() string {
			return "Bearer " + authtest.MintHS256(t, readFile(t, f.pubKeyFile), w.ok)
		}, "HS256 signature does not verify"},
		{"RS512 not allowed", "rs256", w.rs(t, f.key1, "RS512", w.ok), `algorithm "RS512" is not accepted`},
		{"PS256 not allowed", "rs", func() string {
			s, err := jwt.NewWithClaims(jwt.SigningMethodPS256, w.ok).SignedString(f.key1)
			if err != nil {
				t.Fatal(err)
			}
			return "Bearer " + s
		}, `algorithm "PS256" is not accepted`},
		{"RS512 from rotated certificate", "rs", w.rs(t, f.key2, "RS512", w.ok), ""},
		{"RS256 from PUBLIC KEY file", "rs", w.rs(t, f.key3, "RS256", w.ok), ""},
		{"RS256 with kid of its certificate", "rs", kid(t, f.key1, currentKID, w.ok), ""},
		{"RS256 with kid of another certificate", "rs", kid(t, f.key2, currentKID, w.ok), ""},
		{"RS256 with unknown kid", "rs", kid(t, f.key3, "sf_jwt_unknown", w.ok), ""},
		{"RS256 from unconfigured key", "rs", kid(t, f.bad, currentKID, w.ok), "RS256 signature does not verify under any certificate of issuer"},
		{"RS256 with tampered claims", "rs", func() string {
			good := strings.Split(authtest.MintRS(t, f.key1, "RS256", w.ok), ".")
			evil := strings.Split(authtest.MintRS(t, f.bad, "RS256", authtest.Claims(sandbox, audience, "root", f.now, time.Minute)), ".")
			return "Bearer " + good[0] + "." + evil[1] + "." + good[2]
		}, "invalid signature"},
		{"HS256 valid", "hs", w.hs(t, []byte(secret), w.ok), ""},
		{"HS256 valid beside RS256", "rs+hs", w.hs(t, []byte(secret), w.ok), ""},
		{"HS256 wrong secret", "hs", w.hs(t, []byte(strings.ToUpper(secret)), w.ok), "HS256 signature does not verify"},
		{"RS256 to HS-only verifier", "hs", w.rs(t, f.key1, "RS256", w.ok), `algorithm "RS256" is not accepted`},
	})
}

// world is a fixture with its verifiers and token makers.
type world struct {
	*fixture
	verifiers map[string]*auth.Verifier
	// ok are claims that pass every check.
	ok jwt.RegisteredClaims
}

func (f *fixture) world(t *testing.T) *world {
	t.Helper()
	with := func(mutate func(*config.Auth)) config.Auth {
		c := f.authConfig(auth.RS256)
		mutate(&c)
		return c
	}
	return &world{fixture: f, ok: f.claims(-time.Minute, 5*time.Minute), verifiers: map[string]*auth.Verifier{
		"rs":     f.verifier(t, f.authConfig(auth.RS256, auth.RS512)),
		"rs256":  f.verifier(t, f.authConfig(auth.RS256)),
		"rs+hs":  f.verifier(t, f.authConfig(auth.RS256, auth.HS256)),
		"hs":     f.verifier(t, f.authConfig(auth.HS256)),
		"short":  f.verifier(t, with(func(c *config.Auth) { c.MaxTokenLifetime = 5 * time.Minute })),
		"leeway": f.verifier(t, with(func(c *config.Auth) { c.Leeway = 2 * time.Minute })),
		// bound: each issuer has its own certificate and its own secret.
		"bound": f.verifier(t, config.Auth{Issuers: []string{issuer, sandbox}, Audience: audience,
			Algorithms: []string{auth.RS256, auth.HS256}, IssuerKeys: []config.IssuerKeys{
				{Issuer: issuer, CertificateFiles: []string{f.certFile}, HS256SecretEnv: secretEnv},
				{Issuer: sandbox, CertificateFiles: []string{f.rotatedFile}, HS256SecretEnv: sandboxSecretEnv},
			}}),
	}}
}

// rs returns a header func minting an RS256/RS512 token with key.
func (w *world) rs(t *testing.T, key *rsa.PrivateKey, alg string, c jwt.Claims) func() string {
	return func() string { return "Bearer " + authtest.MintRS(t, key, alg, c) }
}

// hs returns a header func minting an HS256 token with secret.
func (w *world) hs(t *testing.T, secret []byte, c jwt.Claims) func() string {
	return func() string { return "Bearer " + authtest.MintHS256(t, secret, c) }
}

// verifyCase is one Verify check: the verifier (a key of world.verifiers),
// the Authorization header, and want, a substring of the 401 detail (empty:
// the token passes).
type verifyCase struct {
	name     string
	verifier string
	header   func() string
	want     string
}

// runVerify runs the cases; on failure it also checks the error leaks
// neither the token nor the secret and the Caller is zero.
func runVerify(t *testing.T, w *world, tests []verifyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header()
			c, err := w.verifiers[tt.verifier].Verify(header)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if c.Issuer == "" || c.ExpiresAt.IsZero() || c.IssuedAt.IsZero() {
					t.Errorf("caller = %+v, want issuer and times", c)
				}
				return
			}
			pe := wantProblem(t, err, problem.Unauthorized, tt.want)
			token := strings.TrimSpace(header)
			if _, rest, found := strings.Cut(token, " "); found {
				token = rest
			}
			for _, leak := range []string{token, secret} {
				if len(leak) > 8 && strings.Contains(pe.Error(), leak) {
					t.Errorf("error %q leaks the token or secret", pe.Error())
				}
			}
			// The detail says what is wrong with the token, not what the
			// proxy is configured to accept.
			for _, leak := range []string{`"` + audience + `"`, "allowed:", "RS256, ", "configured RSA keys"} {
				if strings.Contains(pe.Detail, leak) {
					t.Errorf("detail %q reveals the configuration (%s)", pe.Detail, leak)
				}
			}
			if c != (auth.Caller{}) {
				t.Errorf("caller = %+v on error, want zero", c)
			}
		})
	}
}

// kid returns a header func minting an RS256 token with a kid header.
func kid(t *testing.T, key *rsa.PrivateKey, id string, c jwt.Claims) func() string {
	return func() string { return "Bearer " + authtest.MintRSWithKID(t, key, "RS256", id, c) }
}

func TestVerifyCaller(t *testing.T) {
	f := newFixture(t)
	v := f.verifier(t, f.authConfig(auth.RS256))
	c := authtest.Claims(sandbox, audience, "005000000000001AAA", f.now.Add(-time.Minute), 10*time.Minute)
	got, err := v.Verify("Bearer " + authtest.MintRS(t, f.key1, "RS256", c))
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Caller{
		Issuer: sandbox, Subject: "005000000000001AAA",
		IssuedAt: f.now.Add(-time.Minute), ExpiresAt: f.now.Add(9 * time.Minute),
	}
	if !got.IssuedAt.Equal(want.IssuedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) ||
		got.Issuer != want.Issuer || got.Subject != want.Subject {
		t.Errorf("caller = %+v, want %+v", got, want)
	}
}

func TestAllowedOn(t *testing.T) {
	f := newHSFixture(t)
	v := f.verifier(t, f.authConfig(auth.HS256))
	tests := []struct {
		name    string
		issuer  string
		allowed []string
		want    string // substring of the 403 detail; empty: allowed
	}{
		{"no restriction", sandbox, nil, ""},
		{"listed issuer", issuer, []string{issuer}, ""},
		{"listed among several", sandbox, []string{issuer, sandbox}, ""},
		{"unlisted issuer", sandbox, []string{issuer}, `issuer "` + sandbox + `" is not allowed on endpoint "payment-api"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &config.Endpoint{Name: "payment-api", AllowedIssuers: tt.allowed}
			err := v.AllowedOn(auth.Caller{Issuer: tt.issuer}, ep)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("AllowedOn: %v", err)
				}
				return
			}
			wantProblem(t, err, problem.Forbidden, tt.want)
		})
	}
	t.Run("nil endpoint", func(t *testing.T) {
		wantProblem(t, v.AllowedOn(auth.Caller{Issuer: issuer}, nil), problem.Internal, "no endpoint")
	})
}

// TestVerifyConcurrent shares one Verifier between goroutines, for the race
// detector.
func TestVerifyConcurrent(t *testing.T) {
	f := newFixture(t)
	v := f.verifier(t, f.authConfig(auth.RS256, auth.HS256))
	good := "Bearer " + authtest.MintRS(t, f.key2, "RS256", f.claims(0, time.Minute))
	bad := "Bearer " + authtest.MintRS(t, f.bad, "RS256", f.claims(0, time.Minute))
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			header, wantOK := good, i%2 == 0
			if !wantOK {
				header = bad
			}
			_, err := v.Verify(header)
			if (err == nil) != wantOK {
				errs <- fmt.Errorf("goroutine %d: Verify error = %v, want ok %v", i, err, wantOK)
				return
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// withHeader returns a header func minting a token signed by sign (RS256
// with key, or HS256 with secret) whose JOSE header has name = value.
func withHeader(t *testing.T, method jwt.SigningMethod, key any, c jwt.Claims, name string, value any) func() string {
	return func() string {
		tok := jwt.NewWithClaims(method, c)
		tok.Header[name] = value
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
}

// TestVerifyCrit: a JWS whose crit header names extensions the recipient
// does not understand must be refused (RFC 7515 §4.1.11), even when the
// signature and every claim are good; the proxy understands none, and a
// crit that is not a non-empty list is malformed. golang-jwt alone would
// accept these tokens.
func TestVerifyCrit(t *testing.T) {
	f := newFixture(t)
	w := f.world(t)
	rs := func(v any) func() string { return withHeader(t, jwt.SigningMethodRS256, f.key1, w.ok, "crit", v) }
	hs := func(v any) func() string {
		return withHeader(t, jwt.SigningMethodHS256, []byte(secret), w.ok, "crit", v)
	}
	runVerify(t, w, []verifyCase{
		{"unknown extension", "rs", rs([]string{"http://example.com/ext"}), `crit ["http://example.com/ext"] names extensions this proxy does not understand`},
		{"b64 (RFC 7797), not supported", "rs", rs([]string{"b64"}), `crit ["b64"]`},
		{"several", "rs", rs([]string{"a", "b"}), `crit ["a", "b"]`},
		{"HS256 with crit", "hs", hs([]string{"exp"}), `crit ["exp"]`},
		{"empty list", "rs", rs([]string{}), "crit must be a non-empty list"},
		{"a string", "rs", rs("b64"), "crit must be a non-empty list"},
		{"without crit the same token passes", "rs", w.rs(t, f.key1, "RS256", w.ok), ""},
		{"another unknown header without crit passes", "rs", withHeader(t, jwt.SigningMethodRS256, f.key1, w.ok, "x-ext", "v"), ""},
	})
}
