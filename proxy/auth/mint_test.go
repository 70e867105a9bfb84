package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

func TestMintHS256RoundTrip(t *testing.T) {
	f := newHSFixture(t)
	v := f.verifier(t, config.Auth{
		Issuers: []string{issuer}, Audience: audience, Algorithms: []string{auth.HS256},
		HS256SecretEnv: secretEnv, MaxTokenLifetime: 10 * time.Minute,
	})
	tests := []struct {
		name     string
		lifetime time.Duration
		age      time.Duration // how long after minting it is presented
		want     string        // substring of the 401 detail; empty: accepted
	}{
		{"fresh", 5 * time.Minute, 0, ""},
		{"just before exp", 5 * time.Minute, 5*time.Minute - time.Second, ""},
		{"within leeway after exp", 5 * time.Minute, 5*time.Minute + 29*time.Second, ""},
		{"expired", 5 * time.Minute, 6 * time.Minute, "token expired at 2026-11-29T10:05:00Z"},
		{"at max lifetime", 10 * time.Minute, 0, ""},
		{"over max lifetime", 11 * time.Minute, 0, "exceeds max_token_lifetime 10m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := auth.MintHS256([]byte(secret), issuer, audience, subject, tt.lifetime, f.now)
			if err != nil {
				t.Fatalf("MintHS256: %v", err)
			}
			at := f.now.Add(tt.age)
			v, err := auth.NewVerifier(config.Auth{
				Issuers: []string{issuer}, Audience: audience, Algorithms: []string{auth.HS256},
				HS256SecretEnv: secretEnv, MaxTokenLifetime: 10 * time.Minute,
			}, env, func() time.Time { return at })
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Verify("Bearer " + tok)
			if tt.want != "" {
				wantProblem(t, err, "unauthorized", tt.want)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			want := auth.Caller{Issuer: issuer, Subject: subject, IssuedAt: f.now, ExpiresAt: f.now.Add(tt.lifetime)}
			if c.Issuer != want.Issuer || c.Subject != want.Subject ||
				!c.IssuedAt.Equal(want.IssuedAt) || !c.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("caller = %+v, want %+v", c, want)
			}
		})
	}
	t.Run("sub-second clock truncated", func(t *testing.T) {
		tok, err := auth.MintHS256([]byte(secret), issuer, audience, "", time.Minute, f.now.Add(900*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.Verify("Bearer " + tok)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if !c.IssuedAt.Equal(f.now) || !c.ExpiresAt.Equal(f.now.Add(time.Minute)) {
			t.Errorf("times = %v..%v, want whole seconds from %v", c.IssuedAt, c.ExpiresAt, f.now)
		}
	})
}

func TestMintHS256Errors(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		secret   string
		issuer   string
		audience string
		lifetime time.Duration
		want     string
	}{
		{"short secret", "short", issuer, audience, time.Minute, "HS256 secret is 5 bytes; at least 32 required"},
		{"no issuer", secret, "", audience, time.Minute, "issuer is required"},
		{"no audience", secret, issuer, "", time.Minute, "audience is required"},
		{"zero lifetime", secret, issuer, audience, 0, "lifetime 0s is under 1s"},
		{"sub-second lifetime", secret, issuer, audience, 500 * time.Millisecond, "lifetime 500ms is under 1s"},
		{"negative lifetime", secret, issuer, audience, -time.Minute, "lifetime -1m0s is under 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := auth.MintHS256([]byte(tt.secret), tt.issuer, tt.audience, subject, tt.lifetime, now)
			if err == nil {
				t.Fatalf("MintHS256 = %q, nil; want error containing %q", tok, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if tok != "" {
				t.Errorf("token = %q on error, want empty", tok)
			}
		})
	}
}
