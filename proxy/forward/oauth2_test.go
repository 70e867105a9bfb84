package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestOAuth2ConcurrentCalloutsOneTokenRequest: callouts that need a token
// at the same time share one token request (held open until all of them
// were started), and all reach the upstream with that token.
func TestOAuth2ConcurrentCalloutsOneTokenRequest(t *testing.T) {
	r := newOAuthRig(t, "oauth-concurrent", nil)
	arrived, release := r.ts.Hold()
	const n = 24
	var started sync.WaitGroup
	started.Add(n)
	results := make(chan Attempt, n)
	for range n {
		go func() {
			started.Done()
			results <- do(r.f, r.ep, get("/charges"))
		}()
	}
	started.Wait()
	<-arrived
	release()
	for range n {
		if a := <-results; a.Err != nil || a.Response.Status != http.StatusOK {
			t.Fatalf("attempt = %+v, err %v; want 200", a.Response, a.Err)
		}
	}
	if reqs := r.ts.Requests(); len(reqs) != 1 {
		t.Fatalf("token server got %d requests, want 1", len(reqs))
	}
	tok := r.minted()[0]
	for i, sent := range r.tokensSent() {
		if sent != tok {
			t.Errorf("upstream request %d carried %.10s…, want the one minted token", i, sent)
		}
	}
}

// TestOAuth2TokenLifetime: a token is reused while fresh, replaced
// min(30 s, half its lifetime) before it expires, replaced when it expired
// between two attempts of a chain, and — without expires_in — reused until
// the upstream refuses it. Times are on the injected clock.
func TestOAuth2TokenLifetime(t *testing.T) {
	tests := []struct {
		name     string
		lifetime int             // expires_in, seconds; 0: absent
		gaps     []time.Duration // clock advance before each attempt after the first
		want     []int           // token number (1-based, by minting order) each attempt sent
	}{
		{"reused while fresh", 600, []time.Duration{time.Minute, 8 * time.Minute}, []int{1, 1, 1}},
		{"refreshed 30 s before expiry", 600, []time.Duration{570*time.Second - 1, time.Second}, []int{1, 1, 2}},
		{"short-lived: refreshed at half life", 20, []time.Duration{9 * time.Second, time.Second}, []int{1, 1, 2}},
		{"expired mid-chain", 60, []time.Duration{5 * time.Second, 61 * time.Second, 2 * time.Hour}, []int{1, 1, 2, 3}},
		{"no expires_in: reused", 0, []time.Duration{24 * time.Hour, 365 * 24 * time.Hour}, []int{1, 1, 1}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newOAuthRig(t, fmt.Sprintf("oauth-life-%d", i), nil)
			r.ts.SetLifetime(tt.lifetime)
			for n := range tt.want {
				if n > 0 {
					r.clock.Advance(tt.gaps[n-1])
				}
				if a := do(r.f, r.ep, get("/")); a.Err != nil || a.Response.Status != http.StatusOK {
					t.Fatalf("attempt %d: %+v, err %v", n+1, a.Response, a.Err)
				}
			}
			minted, sent := r.minted(), r.tokensSent()
			var got []int
			for _, s := range sent {
				got = append(got, slices.Index(minted, s)+1)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("tokens sent = %v, want %v (minted %d)", got, tt.want, len(minted))
			}
		})
	}
}

// TestOAuth2TokenFailuresAreRetryable: whatever goes wrong on the way to a
// token — the token server down, slow, answering 5xx, refusing the client,
// answering garbage — the attempt fails with an error that is not a
// refusal before dispatch but Retryable "credentials"; nothing reaches the
// upstream, and nothing of the secret leaks into the error or the logs.
func TestOAuth2TokenFailuresAreRetryable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *oauthRig)
	}{
		{"token server down", func(r *oauthRig) { r.ts.Close() }},
		{"token server 503", func(r *oauthRig) { r.ts.Fail(503, `{"error":"temporarily_unavailable"}`) }},
		{"invalid client echoing the secret", func(r *oauthRig) {
			r.ts.Fail(401, `{"error":"invalid_client","error_description":"bad secret `+secretOne+`"}`)
		}},
		{"not json", func(r *oauthRig) { r.ts.Fail(200, `<html>`+secretOne+`</html>`) }},
		{"no access token", func(r *oauthRig) { r.ts.Fail(200, `{"token_type":"bearer"}`) }},
		{"token with a newline", func(r *oauthRig) {
			r.ts.Fail(200, `{"access_token":"abc\r\nX-Injected: 1","token_type":"bearer"}`)
		}},
		{"slower than the attempt limit", func(r *oauthRig) {
			_, release := r.ts.Hold()
			r.ep.AttemptTimeout = 150 * time.Millisecond
			r.t.Cleanup(release) // runs before the token server closes
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newOAuthRig(t, fmt.Sprintf("oauth-fail-%d", i), nil)
			tt.setup(r)
			a := do(r.f, r.ep, &Request{Method: http.MethodPost, Path: "/charges", Header: http.Header{}, Body: []byte(`{}`)})
			if a.Err == nil || a.Response != nil || a.Sent {
				t.Fatalf("attempt = %+v, want an unsent attempt with an error", a)
			}
			if pe, ok := errors.AsType[*problem.Error](a.Err); ok {
				t.Fatalf("Err = %v, a refusal before dispatch (%s); want a retryable credentials error", a.Err, pe.Code)
			}
			if !errors.Is(a.Err, policy.ErrCredentials) {
				t.Errorf("Err = %v, want one matching policy.ErrCredentials", a.Err)
			}
			if c := policy.Classify(0, a.Err); c != (policy.Classification{Outcome: policy.Retryable, Reason: policy.ReasonCredentials}) {
				t.Errorf("Classify = %+v, want retryable credentials", c)
			}
			if n := len(r.rc.all()); n != 0 {
				t.Errorf("upstream got %d requests, want 0", n)
			}
			// The held request is still under way when the attempt gives
			// up; it logs when its own limit ends.
			if tt.name != "slower than the attempt limit" &&
				!strings.Contains(r.logs.String(), `"msg":"oauth2 token request failed"`) {
				t.Errorf("no warning logged:\n%s", r.logs)
			}
			assertNoCredentials(t, r, map[string]string{"Err": a.Err.Error(), "logs": r.logs.String()}, "X-Injected")
		})
	}
}

// TestOAuth2RefreshOn401: a 401 from the upstream drops the token, fetches
// one new token and re-sends once, within the same attempt; the attempt's
// result is the re-sent request's. A second 401 is the answer (permanent);
// a failed refresh is retryable; a non-OAuth2 endpoint never re-sends.
func TestOAuth2RefreshOn401(t *testing.T) {
	tests := []struct {
		name       string
		between    func(r *oauthRig) // after a first successful attempt
		wantStatus int               // 0: want a credentials error
		wantTokens int               // token requests in all
		wantHits   int               // upstream requests in all
	}{
		{"token revoked: refresh and re-send", func(r *oauthRig) { r.ts.Revoke() }, http.StatusOK, 2, 3},
		{"refused again: the 401 is the answer", func(r *oauthRig) { r.refuse.Store(true) }, http.StatusUnauthorized, 2, 3},
		{"refresh fails: retryable", func(r *oauthRig) { r.ts.Revoke(); r.ts.Fail(503, `{}`) }, 0, 2, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newOAuthRig(t, fmt.Sprintf("oauth-401-%d", i), nil)
			if a := do(r.f, r.ep, get("/")); a.Err != nil || a.Response.Status != http.StatusOK {
				t.Fatalf("first attempt: %+v, %v", a.Response, a.Err)
			}
			tt.between(r)
			a := do(r.f, r.ep, &Request{Method: http.MethodPut, Path: "/x", Header: http.Header{}, Body: []byte(`{"a":1}`)})
			switch {
			case tt.wantStatus == 0 && (a.Err == nil || policy.Classify(0, a.Err).Reason != policy.ReasonCredentials):
				t.Errorf("attempt = %+v, err %v; want a credentials error", a.Response, a.Err)
			case tt.wantStatus != 0 && (a.Err != nil || a.Response.Status != tt.wantStatus):
				t.Errorf("attempt = %+v, err %v; want %d", a.Response, a.Err, tt.wantStatus)
			}
			if n := len(r.ts.Requests()); n != tt.wantTokens {
				t.Errorf("token requests = %d, want %d", n, tt.wantTokens)
			}
			all := r.rc.all()
			if len(all) != tt.wantHits {
				t.Fatalf("upstream requests = %d, want %d", len(all), tt.wantHits)
			}
			if last := all[len(all)-1]; tt.wantHits == 3 && string(last.Body) != `{"a":1}` {
				t.Errorf("re-sent body = %q, want the whole body again", last.Body)
			}
		})
	}
	t.Run("no oauth2: no re-send", func(t *testing.T) {
		srv, rc := newBackend(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
		a := do(newForwarder(t, Options{}), newEndpoint(t, "plain-401", srv.URL), get("/"))
		if a.Err != nil || a.Response.Status != http.StatusUnauthorized || len(rc.all()) != 1 {
			t.Errorf("attempt = %+v, err %v, hits %d; want one 401", a.Response, a.Err, len(rc.all()))
		}
	})
}

// TestOAuth2ConcurrentRefusalsOneRefresh: many attempts refused with the
// same token at once cause one token request, not one each.
func TestOAuth2ConcurrentRefusalsOneRefresh(t *testing.T) {
	r := newOAuthRig(t, "oauth-herd", nil)
	if a := do(r.f, r.ep, get("/")); a.Err != nil {
		t.Fatal(a.Err)
	}
	r.ts.Revoke()
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if a := do(r.f, r.ep, get("/")); a.Err != nil || a.Response.Status != http.StatusOK {
				t.Errorf("attempt = %+v, err %v", a.Response, a.Err)
			}
		})
	}
	wg.Wait()
	if got := len(r.ts.Requests()); got != 2 {
		t.Errorf("token requests = %d, want 2 (the first, and one refresh)", got)
	}
}

// TestOAuth2TokenRequest: the token request carries the grant, scopes,
// audience and extra parameters, and the client credentials in the
// configured style (RFC 6749 §2.3.1, §4.4.2).
func TestOAuth2TokenRequest(t *testing.T) {
	tests := []struct {
		name, style, wantStyle string
	}{{"default", "", "header"}, {"header", "header", "header"}, {"params", "params", "params"}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newOAuthRig(t, fmt.Sprintf("oauth-req-%d", i), nil)
			r.ep.OAuth2.AuthStyle = tt.style
			r.ep.OAuth2.Scopes = []string{"payments.write", "payments.read"}
			r.ep.OAuth2.Audience = "https://api.example.com"
			r.ep.OAuth2.Params = map[string]string{"resource": "urn:payments"}
			if a := do(r.f, r.ep, get("/")); a.Err != nil {
				t.Fatal(a.Err)
			}
			q := r.ts.Requests()[0]
			want := map[string]string{"grant_type": "client_credentials", "scope": "payments.write payments.read",
				"audience": "https://api.example.com", "resource": "urn:payments"}
			for k, v := range want {
				if got := q.Form.Get(k); got != v {
					t.Errorf("form %s = %q, want %q", k, got, v)
				}
			}
			if q.Style != tt.wantStyle || q.ClientID != testClientID || q.Secret != secretOne {
				t.Errorf("client auth = %s %q (secret ok %v), want %s", q.Style, q.ClientID, q.Secret == secretOne, tt.wantStyle)
			}
		})
	}
}

// TestOAuth2TokenURLBlocked: a token URL outside the endpoint's allowed
// networks is refused by the same SSRF guard (a refusal before dispatch,
// since no retry fixes a configuration).
func TestOAuth2TokenURLBlocked(t *testing.T) {
	r := newOAuthRig(t, "oauth-blocked", nil)
	r.ep.Networks = nil
	a := do(r.f, r.ep, get("/"))
	pe, ok := errors.AsType[*problem.Error](a.Err)
	if !ok || pe.Code != problem.BlockedAddress || !errors.Is(a.Err, ErrBlockedAddress) {
		t.Fatalf("Err = %v, want problem %s", a.Err, problem.BlockedAddress)
	}
	if len(r.ts.Requests()) != 0 || len(r.rc.all()) != 0 {
		t.Errorf("something was sent")
	}
}

// TestOAuth2CanceledWhileWaiting: a caller that goes away while its token
// request is under way gets context.Canceled (not "credentials", which
// would count toward the breaker), and the token request still completes
// for the others.
func TestOAuth2CanceledWhileWaiting(t *testing.T) {
	r := newOAuthRig(t, "oauth-cancel", nil)
	arrived, release := r.ts.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	a := r.f.Do(ctx, r.ep, get("/"))
	if c := policy.Classify(0, a.Err); !errors.Is(a.Err, context.Canceled) || c.Reason != policy.ReasonCanceled {
		t.Errorf("Err = %v (%+v), want canceled", a.Err, c)
	}
	release()
	if a := do(r.f, r.ep, get("/")); a.Err != nil || a.Response.Status != http.StatusOK {
		t.Fatalf("next attempt: %+v, %v", a.Response, a.Err)
	}
	if n := len(r.ts.Requests()); n != 1 {
		t.Errorf("token requests = %d, want 1 (the held one served the next attempt)", n)
	}
}
