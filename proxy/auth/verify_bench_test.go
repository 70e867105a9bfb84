package auth_test

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// BenchmarkVerify verifies the same caller token again and again, as the
// ingress does for every request of an Apex transaction that reuses its
// Named Credential's token: RS256 against a 2048-bit certificate (what
// Salesforce signs with) and HS256. `go test -run XXX -bench BenchmarkVerify
// ./proxy/auth/`.
func BenchmarkVerify(b *testing.B) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	key := authtest.NewRSAKey(b)
	cert := authtest.WriteNamedCertificate(b, b.TempDir(), "sf_jwt_2026", key)
	claims := authtest.Claims("https://example.my.salesforce.com", "callout-proxy", "005000000000001AAA", now, 30*time.Minute)
	getenv := func(string) string { return "0123456789abcdef0123456789abcdef-secret" }
	for _, tt := range []struct {
		name  string
		cfg   config.Auth
		token string
	}{
		{"RS256", config.Auth{Algorithms: []string{auth.RS256}, CertificateFiles: []string{cert}},
			authtest.MintRSWithKID(b, key, "RS256", "sf_jwt_2026", claims)},
		{"HS256", config.Auth{Algorithms: []string{auth.HS256}, HS256SecretEnv: "SECRET"},
			authtest.MintHS256(b, []byte(getenv("")), claims)},
	} {
		b.Run(tt.name, func(b *testing.B) {
			tt.cfg.Issuers, tt.cfg.Audience = []string{"https://example.my.salesforce.com"}, "callout-proxy"
			v, err := auth.NewVerifier(tt.cfg, getenv, func() time.Time { return now })
			if err != nil {
				b.Fatal(err)
			}
			authz := "Bearer " + tt.token
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(authz); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
