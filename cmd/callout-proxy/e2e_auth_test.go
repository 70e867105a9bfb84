package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// sandboxIssuer is devConfig's second issuer.
const sandboxIssuer = "https://sandbox--uat.sandbox.my.salesforce.com"

// authCase is one Authorization header and the answer it must get.
type authCase struct {
	name   string
	header http.Header
	path   string // default /callout/open/x
	status int    // 200: passed through; 401/403: problem
}

// runAuthCases sends each case in parallel; refusals must be problem
// documents, 401s with a Bearer challenge (RFC 6750 §3).
func runAuthCases(t *testing.T, p *proxyUnderTest, cases []authCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.path
			if path == "" {
				path = "/callout/open/x"
			}
			resp, body := p.call(t, http.MethodGet, path, nil, tc.header)
			switch tc.status {
			case http.StatusOK:
				wantUpstream(t, resp, body, http.StatusOK, policy.Success)
			case http.StatusUnauthorized:
				wantProblem(t, resp, body, tc.status, problem.Unauthorized, policy.Rejected)
				if c := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", c)
				}
			case http.StatusForbidden:
				wantProblem(t, resp, body, tc.status, problem.Forbidden, policy.Rejected)
			default:
				t.Fatalf("bad case status %d", tc.status)
			}
		})
	}
}

// claims are Named Credential claims for the test audience.
func claims(iss, aud string, issuedAt time.Time, lifetime time.Duration) jwt.RegisteredClaims {
	return authtest.Claims(iss, aud, "005000000000001AAA", issuedAt, lifetime)
}

// noneToken is an unsigned token (`alg: none`, RFC 7519 §6).
func noneToken(t *testing.T, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestE2EAuthHS256: the claim checks of contract §9 on the HS256 dev set-up,
// and per-endpoint allowed_issuers.
func TestE2EAuthHS256(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	p := startProxy(t, devConfig(
		proctest.Endpoint("open", up.URL, loopbackNets)+
			proctest.Endpoint("prod-only", up.URL, loopbackNets, "allowed_issuers: ["+testIssuer+"]")),
		testEnv())
	secret := []byte(testSecret)
	now := time.Now()
	hs := func(c jwt.Claims) http.Header { return authHeader("Bearer " + authtest.MintHS256(t, secret, c)) }
	cases := []authCase{
		{name: "valid", header: hs(claims(testIssuer, "callout-proxy", now, 10*time.Minute)), status: 200},
		{name: "missing", header: noAuth(), status: 401},
		{name: "empty bearer", header: authHeader("Bearer "), status: 401},
		{name: "basic scheme", header: authHeader("Basic ZGV2OmRldg=="), status: 401},
		{name: "malformed", header: authHeader("Bearer not-a-jwt"), status: 401},
		{name: "expired", header: hs(claims(testIssuer, "callout-proxy", now.Add(-2*time.Hour), time.Hour)),
			status: 401},
		{name: "not yet valid", header: hs(claims(testIssuer, "callout-proxy", now.Add(10*time.Minute),
			10*time.Minute)), status: 401},
		{name: "lifetime over max_token_lifetime", header: hs(claims(testIssuer, "callout-proxy", now,
			2*time.Hour)), status: 401},
		{name: "wrong audience", header: hs(claims(testIssuer, "another-service", now, 10*time.Minute)),
			status: 401},
		{name: "unknown issuer", header: hs(claims("https://evil.my.salesforce.com", "callout-proxy", now,
			10*time.Minute)), status: 401},
		{name: "wrong secret", header: authHeader("Bearer " + authtest.MintHS256(t,
			[]byte("another-secret-of-at-least-32-bytes!!"), claims(testIssuer, "callout-proxy", now,
				10*time.Minute))), status: 401},
		{name: "alg none", header: authHeader("Bearer " + noneToken(t, claims(testIssuer, "callout-proxy", now,
			10*time.Minute))), status: 401},
		{name: "allowed issuer on restricted endpoint", path: "/callout/prod-only/x",
			header: authHeader(bearer(t, testIssuer)), status: 200},
		{name: "other issuer on restricted endpoint", path: "/callout/prod-only/x",
			header: authHeader(bearer(t, sandboxIssuer)), status: 403},
		{name: "other issuer on open endpoint", header: authHeader(bearer(t, sandboxIssuer)), status: 200},
		// A key signs only for the issuer it is bound to (contract §9).
		{name: "first issuer's secret signing for the second", header: hs(claims(sandboxIssuer, "callout-proxy", now,
			10*time.Minute)), status: 401},
	}
	t.Run("cases", func(t *testing.T) { runAuthCases(t, p, cases) })
	if got, want := up.Hits(), 3; got != want {
		t.Errorf("upstream called %d times, want %d (only the accepted callers)", got, want)
	}
}

// TestE2EAuthRSA: Salesforce-style RS256/RS512 tokens checked against two
// certificate files (rotation), and algorithm confusion refused.
func TestE2EAuthRSA(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, okHandler)
	dir := t.TempDir()
	oldKey, newKey, strangerKey := authtest.NewRSAKey(t), authtest.NewRSAKey(t), authtest.NewRSAKey(t)
	oldCert := authtest.WriteNamedCertificate(t, dir, "sf-2025", oldKey)
	newCert := authtest.WriteNamedCertificate(t, dir, "sf-2026", newKey)
	cfg := `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [` + testIssuer + `]
  audience: callout-proxy
  algorithms: [RS256, RS512]
  certificate_files: [` + oldCert + `, ` + newCert + `]
endpoints:
` + proctest.Endpoint("open", up.URL, loopbackNets)
	p := startProxy(t, cfg, nil)

	certPEM, err := os.ReadFile(oldCert)
	if err != nil {
		t.Fatal(err)
	}
	c := claims(testIssuer, "callout-proxy", time.Now(), 5*time.Minute)
	rs := func(tok string) http.Header { return authHeader("Bearer " + tok) }
	cases := []authCase{
		{name: "RS256 first certificate", header: rs(authtest.MintRS(t, oldKey, "RS256", c)), status: 200},
		{name: "RS512 rotated certificate with its kid",
			header: rs(authtest.MintRSWithKID(t, newKey, "RS512", "sf-2026", c)), status: 200},
		{name: "RS512 rotated certificate, kid of the other",
			header: rs(authtest.MintRSWithKID(t, newKey, "RS512", "sf-2025", c)), status: 200},
		{name: "RS256 unknown key", header: rs(authtest.MintRS(t, strangerKey, "RS256", c)), status: 401},
		{name: "HS256 signed with the certificate PEM",
			header: rs(authtest.MintHS256(t, certPEM, c)), status: 401},
		{name: "alg none", header: rs(noneToken(t, c)), status: 401},
		{name: "RS256 expired", header: rs(authtest.MintRS(t, oldKey, "RS256",
			claims(testIssuer, "callout-proxy", time.Now().Add(-time.Hour), 5*time.Minute))), status: 401},
	}
	t.Run("cases", func(t *testing.T) { runAuthCases(t, p, cases) })
	if got, want := up.Hits(), 3; got != want {
		t.Errorf("upstream called %d times, want %d (only the accepted callers)", got, want)
	}
}
