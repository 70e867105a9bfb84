package credentials

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// newOAuthSet returns the Set of an OAuth2 endpoint against ts, on clock.
func newOAuthSet(t *testing.T, ts *credtest.TokenServer, clock *clocktest.Clock, logs *proctest.LogBuffer) *Set {
	t.Helper()
	ep := &config.Endpoint{Name: "pay", AttemptTimeout: 5 * time.Second, OAuth2: &config.OAuth2{
		TokenURL: ts.URL, ClientID: config.SecretRef{Env: "ID"}, ClientSecret: config.SecretRef{Env: "SECRET"},
		CAFile: ts.CAFile,
	}}
	return New(ep, Options{
		Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Getenv: func(k string) string { return map[string]string{"ID": "client", "SECRET": "secret-1"}[k] },
		TokenClient: func(_ *config.Endpoint, roots *x509.CertPool, _ uint64) (*http.Client, error) {
			return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}, nil
		},
	})
}

// TestTokenFallsBackWhileUsable: a refresh that fails in the last
// 30 s before expiry keeps the cached token in use; once it expired, the
// failure is the answer.
func TestTokenFallsBackWhileUsable(t *testing.T) {
	ts := credtest.NewTokenServer(t, "client", "secret-1")
	ts.SetLifetime(60)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock, logs := clocktest.New(t0), &proctest.LogBuffer{}
	s := newOAuthSet(t, ts, clock, logs)
	ctx := context.Background()
	first, err := s.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ts.Fail(http.StatusServiceUnavailable, `{}`)
	clock.Set(t0.Add(45 * time.Second))
	if tok, err := s.Token(ctx); err != nil || tok != first {
		t.Fatalf("in the refresh window with the server failing: %v, %v; want the cached token", tok, err)
	}
	clock.Set(t0.Add(60 * time.Second))
	if _, err := s.Token(ctx); !errors.Is(err, policy.ErrCredentials) {
		t.Fatalf("expired with the server failing: err = %v, want credentials", err)
	}
	if n := len(ts.Requests()); n != 3 {
		t.Errorf("token requests = %d, want 3", n)
	}
}

// TestUnauthorizedDropsOnlyItsToken: a 401 reported for a token that was
// already replaced does not cause another token request.
func TestUnauthorizedDropsOnlyItsToken(t *testing.T) {
	ts := credtest.NewTokenServer(t, "client", "secret-1")
	s := newOAuthSet(t, ts, clocktest.New(time.Now()), &proctest.LogBuffer{})
	ctx := context.Background()
	first, err := s.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Unauthorized(first)
	second, err := s.Token(ctx)
	if err != nil || second == first {
		t.Fatalf("after a 401: %v, %v; want a new token", second, err)
	}
	s.Unauthorized(first) // a late report about the old token
	s.Unauthorized(nil)
	if third, err := s.Token(ctx); err != nil || third != second {
		t.Fatalf("after a stale 401: %v, %v; want the second token still", third, err)
	}
	if n := len(ts.Requests()); n != 2 {
		t.Errorf("token requests = %d, want 2", n)
	}
}

// TestSetWithoutCredentials: an endpoint with nothing configured has no
// headers, no token and no TLS material, and reads nothing.
func TestSetWithoutCredentials(t *testing.T) {
	s := New(&config.Endpoint{Name: "plain"}, Options{Now: func() time.Time { t.Fatal("clock read"); return time.Time{} }})
	h, err := s.Header()
	tok, terr := s.Token(context.Background())
	m, merr := s.TLS()
	if h != nil || err != nil || tok != nil || terr != nil || m != (TLS{}) || merr != nil || s.OAuth2() {
		t.Errorf("Header %v %v, Token %v %v, TLS %+v %v", h, err, tok, terr, m, merr)
	}
}
