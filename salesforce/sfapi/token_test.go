package sfapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestMintBackoff: while the token endpoint fails, one replica makes one
// token request per backoff step however many goroutines need a token —
// 1 s, doubling, at most 5 min — and a success resets the backoff. (Before:
// every waiting goroutine minted in turn; two replicas made 15 token
// requests in 4 s.)
func TestMintBackoff(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(sfemu.Fault{Kind: "token", Status: 503, Body: `{"error":"unavailable"}`, Times: 1000})
	if got := e.mintConcurrently(16); got != 1 {
		t.Fatalf("16 goroutines made %d token requests, want 1", got)
	}
	if got := e.mintConcurrently(16); got != 0 {
		t.Fatalf("%d token requests inside the backoff", got)
	}
	for _, step := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		e.clk.Advance(step - time.Millisecond)
		if got := e.mintConcurrently(4); got != 0 {
			t.Fatalf("token request %v before a %v backoff ended", time.Millisecond, step)
		}
		e.clk.Advance(time.Millisecond)
		if got := e.mintConcurrently(4); got != 1 {
			t.Fatalf("after a %v backoff: %d token requests, want 1", step, got)
		}
	}
	for range 20 { // the backoff is capped
		e.clk.Advance(MintBackoffMax)
		e.mintConcurrently(1)
	}
	if wait := e.client.tokens.retryAt.Sub(e.clk.Now()); wait != MintBackoffMax {
		t.Errorf("backoff after many failures = %v, want %v", wait, MintBackoffMax)
	}
	_, err := e.client.tokens.get(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "no new token request before") {
		t.Errorf("error inside the backoff = %v", err)
	}
	e.emu.ClearFaults()
	e.clk.Advance(MintBackoffMax)
	if got := e.mintConcurrently(8); got != 1 {
		t.Fatalf("recovery: %d token requests, want 1", got)
	}
	if e.client.tokens.fails != 0 || !e.client.tokens.retryAt.IsZero() {
		t.Errorf("backoff not reset after a success: %d fails, retry at %v", e.client.tokens.fails, e.client.tokens.retryAt)
	}
	if logs := e.logs.String(); strings.Count(logs, "Salesforce token request failed") != 1 ||
		!strings.Contains(logs, "Salesforce token minted again") {
		t.Errorf("want one log line for the failure streak and one for the recovery:\n%s", logs)
	}
}

// TestLoginRateExceeded: past the user's login allocation the emulator
// refuses tokens as Login Rate Exceeded; the proxy then waits an hour, as
// Salesforce Help advises, instead of adding logins to the count.
func TestLoginRateExceeded(t *testing.T) {
	e := newEnvWith(t, func(o *sfemu.Options) { o.LoginsPerHour = 2 })
	login := func() *Error {
		e.client.tokens.cur = Token{} // as after INVALID_SESSION_ID
		_, err := e.client.tokens.get(ctxT(t))
		return err
	}
	for range 2 {
		if err := login(); err != nil {
			t.Fatal(err)
		}
	}
	err := login()
	if err == nil || err.Code != loginRateExceeded || err.Class != AuthFailed {
		t.Fatalf("third login in the hour: %v, want LOGIN_RATE_EXCEEDED", err)
	}
	if wait := e.client.tokens.retryAt.Sub(e.clk.Now()); wait != LoginRateWait {
		t.Errorf("wait after LOGIN_RATE_EXCEEDED = %v, want %v", wait, LoginRateWait)
	}
	e.clk.Advance(LoginRateWait - time.Second)
	if got := e.mintConcurrently(4); got != 0 {
		t.Errorf("%d token requests within the hour", got)
	}
	e.clk.Advance(time.Second)
	if err := login(); err != nil {
		t.Errorf("after the hour: %v", err)
	}
}

// TestInvalidGrantBacksOff: a refused assertion (invalid_grant: the
// connected app, the user's pre-authorisation, the certificate) is not
// retried at once either, and says what to check.
func TestInvalidGrantBacksOff(t *testing.T) {
	e := newEnv(t)
	e.client.tokens.creds.Username = "someone@else.com"
	_, err := e.client.tokens.get(context.Background())
	if err == nil || err.Code != "invalid_grant" {
		t.Fatalf("wrong user: %v", err)
	}
	if got := e.mintConcurrently(8); got != 0 {
		t.Errorf("%d token requests right after invalid_grant", got)
	}
	if !strings.Contains(mintHint("invalid_grant"), "pre-authorized") {
		t.Error("no hint for invalid_grant")
	}
}
