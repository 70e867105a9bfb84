package forward

import (
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Client credentials of the OAuth2 tests. The secrets must never show up in
// a log line, an Attempt.Err or a printed token.
const (
	testClientID = "proxy-client"
	secretOne    = "s3cr3t-one-VALUE-0123456789"
	secretTwo    = "s3cr3t-two-VALUE-9876543210"
)

func newFakeClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// oauthRig is an OAuth2 endpoint under test: a token server, an upstream
// that accepts only the token server's valid tokens (it records every
// request, refused ones too), a client-secret file, and a Forwarder on a
// fake clock logging at debug level into logs.
type oauthRig struct {
	t          *testing.T
	refuse     atomic.Bool // the upstream answers 401 to every request
	clock      *clocktest.Clock
	ts         *credtest.TokenServer
	rc         *recorder
	f          *Forwarder
	logs       *proctest.LogBuffer
	secretFile string
	ep         *config.Endpoint
}

// newOAuthRig builds the rig; the upstream answers accepted requests with
// answer (nil: an empty 200). The client secret file holds secretOne, and
// the token server accepts secretOne.
func newOAuthRig(t *testing.T, name string, answer http.HandlerFunc) *oauthRig {
	t.Helper()
	r := &oauthRig{t: t, clock: newFakeClock(), logs: &proctest.LogBuffer{}}
	r.ts = credtest.NewTokenServer(t, testClientID, secretOne)
	if answer == nil {
		answer = func(http.ResponseWriter, *http.Request) {}
	}
	protected := r.ts.Protect(answer)
	srv, rc := newBackend(t, func(w http.ResponseWriter, req *http.Request) {
		if r.refuse.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		protected.ServeHTTP(w, req)
	})
	r.rc = rc
	r.secretFile = credtest.WriteFile(t, t.TempDir(), "client-secret", []byte(secretOne+"\n"))
	r.ep = newEndpoint(t, name, srv.URL)
	r.ep.OAuth2 = &config.OAuth2{
		TokenURL: r.ts.URL, ClientID: config.SecretRef{Env: "CLIENT_ID"},
		ClientSecret: config.SecretRef{File: r.secretFile}, CAFile: r.ts.CAFile,
	}
	r.f = newForwarder(t, Options{
		Now: r.clock.Now, Getenv: env(map[string]string{"CLIENT_ID": testClientID}),
		Logger: slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return r
}

// tokensSent returns the Authorization values the upstream received, in
// order, with "Bearer " removed.
func (r *oauthRig) tokensSent() []string {
	var out []string
	for _, s := range r.rc.all() {
		out = append(out, strings.TrimPrefix(s.Header.Get("Authorization"), "Bearer "))
	}
	return out
}

// minted returns the tokens the token server issued, in order.
func (r *oauthRig) minted() []string {
	var out []string
	for _, q := range r.ts.Requests() {
		if q.Token != "" {
			out = append(out, q.Token)
		}
	}
	return out
}

// assertNoCredentials fails the test if any of texts contains a client
// secret, a minted token, or any of extra.
func assertNoCredentials(t *testing.T, r *oauthRig, texts map[string]string, extra ...string) {
	t.Helper()
	needles := append([]string{secretOne, secretTwo}, extra...)
	if r != nil {
		needles = append(needles, r.minted()...)
	}
	for where, text := range texts {
		for _, n := range needles {
			if n != "" && strings.Contains(text, n) {
				t.Errorf("%s contains a credential (%.12s…):\n%s", where, n, text)
			}
		}
	}
}
