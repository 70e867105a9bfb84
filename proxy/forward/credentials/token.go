package credentials

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// maxRefreshMargin is the longest time before its expiry that a cached
// token is replaced: a token is refreshed once less than
// min(maxRefreshMargin, half its lifetime) remains, so it never expires
// while an attempt that took it is under way, and a short-lived token is
// still reused.
const maxRefreshMargin = 30 * time.Second

// Token is an OAuth 2.0 access token as the cache holds it. Its value never
// appears in String, GoString or LogValue, so a Token printed or logged by
// mistake shows nothing.
type Token struct {
	typ, value string
	// expiry is when it expires by the token endpoint's expires_in, on the
	// injected clock; zero when expires_in was absent (the token is then
	// used until the upstream answers 401).
	expiry time.Time
	// refreshAt is when a new token is fetched instead; zero with expiry.
	refreshAt time.Time
}

// SetHeader sets `Authorization: <token_type> <access_token>` in h (RFC 6750
// §2.1; token_type as oauth2.Token.Type normalises it, Bearer by default).
func (t *Token) SetHeader(h http.Header) { h.Set("Authorization", t.typ+" "+t.value) }

// String implements fmt.Stringer without the token's value.
func (t *Token) String() string { return "oauth2 token (redacted)" }

// GoString implements fmt.GoStringer without the token's value.
func (t *Token) GoString() string { return "credentials.Token{redacted}" }

// LogValue implements slog.LogValuer without the token's value.
func (t *Token) LogValue() slog.Value { return slog.StringValue("redacted") }

func (t *Token) fresh(now time.Time) bool { return t.refreshAt.IsZero() || now.Before(t.refreshAt) }

func (t *Token) usable(now time.Time) bool { return t.expiry.IsZero() || now.Before(t.expiry) }

// flight is one token request under way; every caller that needs a token
// meanwhile waits for it instead of sending its own.
type flight struct {
	done chan struct{}
	tok  *Token
	err  error
}

// tokenSource caches one endpoint's access token and fetches a new one by
// the client credentials grant (RFC 6749 §4.4) when it is about to expire
// or was refused: one request at a time, shared by every goroutine.
type tokenSource struct {
	endpoint     string
	cfg          config.OAuth2
	clientID     *secret
	clientSecret *secret
	ca           *watched[*x509.CertPool] // nil: the base roots
	client       func(roots *x509.CertPool, rootsID uint64) (*http.Client, error)
	now          func() time.Time
	timeout      time.Duration // one token request's own limit
	logger       *slog.Logger

	mu     sync.Mutex
	cur    *Token  // nil: none, or refused
	flight *flight // nil: no request under way
}

// token returns a fresh cached token, or waits for the one request that
// fetches a new one (starting it when none is under way) until ctx ends.
// A failed refresh falls back to the cached token while it has not
// expired. The request runs in its own goroutine, bounded by s.timeout and
// not by ctx, so one caller going away does not fail the others.
//
// Errors: *Error (matches policy.ErrCredentials), *ConfigError, an error
// matching context.Canceled when ctx was canceled, or the transport's error
// for a dial the token client refused (the caller maps it).
func (s *tokenSource) token(ctx context.Context) (*Token, error) {
	s.mu.Lock()
	if c := s.cur; c != nil && c.fresh(s.now()) {
		s.mu.Unlock()
		return c, nil
	}
	f := s.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.flight = f
		go s.fetch(context.WithoutCancel(ctx), f)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		return nil, &Error{Endpoint: s.endpoint, Err: &limitError{ctx.Err()}}
	}
	if f.err == nil {
		return f.tok, nil
	}
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c != nil && c.usable(s.now()) {
		return c, nil
	}
	return nil, f.err
}

// unauthorized drops t from the cache after the upstream refused it (401),
// unless a newer token replaced it already, so the next token call fetches
// a new one — once, however many attempts saw the 401.
func (s *tokenSource) unauthorized(t *Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == t {
		s.cur = nil
	}
}

// fetch makes the token request of f and publishes its result.
func (s *tokenSource) fetch(parent context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()
	tok, err := s.request(ctx)
	if err != nil {
		s.logger.Warn("oauth2 token request failed", slog.String("endpoint", s.endpoint), slog.Any("error", err))
	} else {
		s.logger.Debug("oauth2 token fetched", slog.String("endpoint", s.endpoint),
			slog.Bool("expires", !tok.expiry.IsZero()), slog.Time("refresh_at", tok.refreshAt))
	}
	s.mu.Lock()
	if err == nil {
		s.cur = tok
	}
	s.flight = nil
	f.tok, f.err = tok, err
	s.mu.Unlock()
	close(f.done)
}

// request sends one client credentials token request (RFC 6749 §4.4.2) with
// the client id and secret as they are now (a rotated file is picked up).
func (s *tokenSource) request(ctx context.Context) (*Token, error) {
	id, err := s.clientID.value()
	if err != nil {
		return nil, err
	}
	sec, err := s.clientSecret.value()
	if err != nil {
		return nil, err
	}
	var roots *x509.CertPool
	var gen uint64
	if s.ca != nil {
		if roots, gen, err = s.ca.get(); err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
	hc, err := s.client(roots, gen)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	cc := clientcredentials.Config{
		ClientID: id, ClientSecret: sec, TokenURL: s.cfg.TokenURL, Scopes: s.cfg.Scopes,
		EndpointParams: s.params(), AuthStyle: oauth2.AuthStyleInHeader,
	}
	if s.cfg.AuthStyle == config.AuthStyleParams {
		cc.AuthStyle = oauth2.AuthStyleInParams
	}
	started := s.now()
	t, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
	if err != nil {
		return nil, tokenError(s.endpoint, err)
	}
	return newToken(s.endpoint, t, started)
}

// params are the extra form parameters: Params and audience.
func (s *tokenSource) params() url.Values {
	v := url.Values{}
	for k, p := range s.cfg.Params {
		v.Set(k, p)
	}
	if s.cfg.Audience != "" {
		v.Set("audience", s.cfg.Audience)
	}
	return v
}

// newToken makes the cache's Token of t, fetched at started: its expiry is
// started + expires_in (RFC 6749 §5.1) on the injected clock, and it is
// refreshed min(30 s, half its lifetime) before that. An access token that
// could not be sent in a header field (RFC 9110 §5.5) is refused.
func newToken(endpoint string, t *oauth2.Token, started time.Time) (*Token, error) {
	if strings.ContainsFunc(t.AccessToken, func(r rune) bool { return isControl(r) || r == ' ' }) {
		return nil, &Error{Endpoint: endpoint, Err: errors.New("the token endpoint returned an access token that cannot be sent in a header")}
	}
	tok := &Token{typ: t.Type(), value: t.AccessToken}
	if life, ok := expiresIn(t); ok {
		tok.expiry = started.Add(life)
		tok.refreshAt = tok.expiry.Add(-min(maxRefreshMargin, life/2))
	}
	return tok, nil
}

// expiresIn reads expires_in from the token response: a JSON number, or a
// string (some servers, PayPal among them, quote it; form-encoded answers
// are strings too). Absent, zero or negative: false.
func expiresIn(t *oauth2.Token) (time.Duration, bool) {
	var secs float64
	switch v := t.Extra("expires_in").(type) {
	case float64:
		secs = v
	case int64:
		secs = float64(v)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, false
		}
		secs = f
	default:
		return 0, false
	}
	if secs <= 0 || secs > float64(100*365*24*3600) {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
