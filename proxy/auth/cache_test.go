package auth

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

const (
	cacheSecret = "cache-test-secret-of-at-least-32-bytes!"
	cacheIssuer = "https://cache.my.salesforce.com"
)

// cacheVerifier is an HS256 Verifier of cacheSecret with room for entries
// verified tokens (0: the default), on the clock it returns (at
// 2026-11-29 10:00 UTC).
func cacheVerifier(t *testing.T, entries int) (*Verifier, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	v, err := NewVerifier(config.Auth{Issuers: []string{cacheIssuer}, Audience: "callout-proxy",
		Algorithms: []string{HS256}, HS256SecretEnv: "S", TokenCacheEntries: entries},
		func(string) string { return cacheSecret }, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return v, clk
}

// mint is an HS256 token of cacheSecret for subject, issued at clk's now.
func mint(t *testing.T, clk *clocktest.Clock, subject string, lifetime time.Duration) string {
	t.Helper()
	tok, err := MintHS256([]byte(cacheSecret), cacheIssuer, "callout-proxy", subject, lifetime, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// mustVerify is v.Verify(tok), failing the test at once on an error.
func mustVerify(t *testing.T, v *Verifier, tok string) Caller {
	t.Helper()
	c, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forgetKeys takes the verifier's key material away, so any token it
// accepts afterwards can only have come from its cache.
func forgetKeys(v *Verifier) { v.secrets, v.keys = nil, nil }

// TestVerifyCachedOnce: a token that passed is served from the cache (the
// verifier, robbed of its secret, still accepts it with the same Caller,
// and refuses any other token); a token that failed is not remembered.
func TestVerifyCachedOnce(t *testing.T) {
	v, clk := cacheVerifier(t, 0)
	tok := mint(t, clk, "005A", 10*time.Minute)
	first := mustVerify(t, v, tok)
	bad := tok[:len(tok)-2] + "xx" // signature broken
	if _, err := v.Verify(bad); err == nil {
		t.Fatal("a token with a broken signature passed")
	}
	if n := v.cache.len(); n != 1 {
		t.Fatalf("cache holds %d entries after one good and one bad token, want 1", n)
	}
	other := mint(t, clk, "005B", 10*time.Minute)
	forgetKeys(v)
	clk.Advance(9 * time.Minute)
	again, err := v.Verify(tok)
	if err != nil || again != first {
		t.Fatalf("the same token again = %+v, %v; want %+v from the cache", again, err, first)
	}
	if _, err := v.Verify(other); err == nil {
		t.Fatal("a token never verified passed without key material")
	}
	if _, err := v.Verify(bad); err == nil {
		t.Fatal("the broken token passed the second time")
	}
}

// TestVerifyCacheExpiresAtExp: the entry ends at the token's exp; within
// the leeway after exp the token is verified in full again (and passes),
// past it the token is refused — the cache never widens the leeway.
func TestVerifyCacheExpiresAtExp(t *testing.T) {
	v, clk := cacheVerifier(t, 0)
	tok := mint(t, clk, "005A", 5*time.Minute)
	mustVerify(t, v, tok)
	clk.Advance(5 * time.Minute) // at exp
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("at exp, within the 30 s leeway: %v", err)
	}
	if n := v.cache.len(); n != 0 {
		t.Fatalf("cache holds %d entries at exp, want none (an expired token is not remembered)", n)
	}
	clk.Advance(31 * time.Second)
	_, err := v.Verify(tok)
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.Unauthorized {
		t.Fatalf("31 s past exp = %v, want 401 expired", err)
	}

	// An entry found expired is never served: without key material, the
	// token cached at 10:00 and looked up at its exp fails.
	clk.Set(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	tok = mint(t, clk, "005A", 5*time.Minute)
	mustVerify(t, v, tok)
	forgetKeys(v)
	clk.Advance(5 * time.Minute)
	if _, err := v.Verify(tok); err == nil {
		t.Fatal("a cached token was served at its exp")
	}
}

// TestVerifyCacheBounded pushes past token_cache_entries: 50 distinct
// tokens through a cache of 8 are all verified, the cache never holds more
// than 8, and every caller is still served when they come back.
func TestVerifyCacheBounded(t *testing.T) {
	v, clk := cacheVerifier(t, 8)
	toks := make([]string, 50)
	for i := range toks {
		toks[i] = mint(t, clk, fmt.Sprintf("005%03d", i), 10*time.Minute)
	}
	for round := range 2 {
		for i, tok := range toks {
			c, err := v.Verify(tok)
			if err != nil || c.Subject != fmt.Sprintf("005%03d", i) {
				t.Fatalf("round %d, token %d: %+v, %v", round, i, c, err)
			}
			if n := v.cache.len(); n > 8 {
				t.Fatalf("cache holds %d entries, over its 8", n)
			}
		}
	}
	// Expired entries are the first to go: after every token expired, 8
	// new ones fill the cache with themselves alone.
	clk.Advance(11 * time.Minute)
	for i := range 8 {
		if _, err := v.Verify(mint(t, clk, fmt.Sprintf("006%03d", i), 10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	now := clk.Now()
	v.cache.mu.RLock()
	defer v.cache.mu.RUnlock()
	for _, c := range v.cache.entries {
		if !now.Before(c.ExpiresAt) {
			t.Errorf("an expired entry (exp %v) survived while new tokens needed room", c.ExpiresAt)
		}
	}
}

// TestVerifyCacheNotAcrossVerifiers: the cache belongs to one Verifier and
// its keys. A rotated secret (a new Verifier) refuses a token the old one
// had cached; per-request checks (allowed_issuers) run on a cached token.
func TestVerifyCacheNotAcrossVerifiers(t *testing.T) {
	old, clk := cacheVerifier(t, 0)
	tok := mint(t, clk, "005A", 10*time.Minute)
	c := mustVerify(t, old, tok)
	rotated, err := NewVerifier(config.Auth{Issuers: []string{cacheIssuer}, Audience: "callout-proxy",
		Algorithms: []string{HS256}, HS256SecretEnv: "S"},
		func(string) string { return "another-secret-of-at-least-32-bytes-long" }, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Verify(tok); err == nil {
		t.Fatal("a new Verifier with a rotated secret accepted a token only the old one had cached")
	}
	if _, err := old.Verify(tok); err != nil {
		t.Fatal(err)
	}
	ep := &config.Endpoint{Name: "pay", AllowedIssuers: []string{"https://other.my.salesforce.com"}}
	var pe *problem.Error
	if err := old.AllowedOn(c, ep); !errors.As(err, &pe) || pe.Code != problem.Forbidden {
		t.Fatalf("AllowedOn for a cached caller = %v, want 403", err)
	}
}

// TestVerifyCacheConfig: a negative token_cache_entries is refused.
func TestVerifyCacheConfig(t *testing.T) {
	_, err := NewVerifier(config.Auth{Issuers: []string{cacheIssuer}, Audience: "callout-proxy",
		Algorithms: []string{HS256}, HS256SecretEnv: "S", TokenCacheEntries: -1},
		func(string) string { return cacheSecret }, nil)
	if err == nil || err.Error() != "auth.token_cache_entries: -1 is negative" {
		t.Fatalf("NewVerifier with -1 entries = %v", err)
	}
}
