package realclients

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// followCalloutOutcome is the CheckRetry that contract §2 ("Generic HTTP
// clients") gives for go-retryablehttp: when the proxy answered, retry
// exactly what it classes retryable, except a 202 (the proxy goes on with
// the callout: poll its Location instead), and the 409 in-flight (the
// key's first attempt is still running: ask again after Retry-After);
// without an answer (a timeout, a reset), go-retryablehttp's own rules.
func followCalloutOutcome(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if resp != nil && resp.Header.Get("Callout-Problem") == "in-flight" {
		return true, nil
	}
	if resp != nil && resp.Header.Get("Callout-Outcome") != "" {
		return resp.StatusCode != http.StatusAccepted && resp.Header.Get("Callout-Outcome") == "retryable", nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// retryAfterOn409 is the Backoff of the same recipe: go-retryablehttp's
// DefaultBackoff reads Retry-After on 429 and 503 only, so on a 409 (the
// in-flight one) it sleeps the header's seconds itself.
func retryAfterOn409(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
	if resp != nil && resp.StatusCode == http.StatusConflict {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return retryablehttp.DefaultBackoff(lo, hi, n, resp)
}

// retryableClient is go-retryablehttp with short waits (its defaults are
// 1–30 s between tries; Retry-After on a 429 or 503 overrides them), up to
// retries retries, and a per-request timeout of 1 s, the caller's own.
func retryableClient(check retryablehttp.CheckRetry, retries int) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryMax = retries
	c.RetryWaitMin, c.RetryWaitMax = 10*time.Millisecond, 50*time.Millisecond
	c.HTTPClient.Timeout = time.Second
	if check != nil {
		c.CheckRetry, c.Backoff = check, retryAfterOn409
	}
	return c
}

// TestRetryableHTTPWaitsOutItsOwnInFlightCallout: a go-retryablehttp
// caller with the Callout-Outcome recipe whose own timeout fires during the
// synchronous attempt sends the POST again with its key; the proxy answers
// 409 in-flight, Retry-After 1, class rejected, which the recipe waits on
// (Retry-After, not the client's short backoff) and retries, until the
// retry gets the first attempt's answer, replayed. The upstream is called
// once.
func TestRetryableHTTPWaitsOutItsOwnInFlightCallout(t *testing.T) {
	g := newGenericRig(t)
	type result struct {
		resp *http.Response
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := retryablehttp.NewRequest(http.MethodPost, g.p.URL+"/callout/api/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Authorization", g.token)
		req.Header.Set("Idempotency-Key", "retryablehttp-in-flight-1")
		// Enough retries for a loaded machine, where a try can time out
		// more than once before the proxy answers in-flight.
		resp, err := retryableClient(followCalloutOutcome, 30).Do(req)
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- result{resp, string(body), err}
	}()
	if !g.releaseAfterInFlight(t) {
		t.Fatal("no retry met the in-flight callout within 60 s")
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("go-retryablehttp gave up: %v", r.err)
	}
	if r.resp.StatusCode != http.StatusCreated || r.resp.Header.Get("Idempotent-Replayed") != "true" || r.body != `{"id":"ch_1"}` {
		t.Errorf("final answer %d replayed=%q %s, want the first attempt's 201, replayed",
			r.resp.StatusCode, r.resp.Header.Get("Idempotent-Replayed"), r.body)
	}
	g.wantChargedOnce(t)
}

// TestRetryableHTTPDefaultsStopAtInFlight: go-retryablehttp's default
// policy retries no 4xx but 429, so a duplicate of a keyed POST whose first
// attempt is still held upstream gets the 409 in-flight back at once
// (Retry-After 1, class rejected, the first request's Callout-Id), sent
// once; the recipe's Backoff sleeps that Retry-After, where DefaultBackoff
// would sleep its short exponential wait.
func TestRetryableHTTPDefaultsStopAtInFlight(t *testing.T) {
	g := newGenericRig(t)
	defer g.upstream.Release()
	first := g.holdFirst(t, "retryablehttp-default-1")
	req, _ := retryablehttp.NewRequest(http.MethodPost, g.p.URL+"/callout/api/v1/charges", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Authorization", g.token)
	req.Header.Set("Idempotency-Key", "retryablehttp-default-1")
	resp, err := retryableClient(nil, 6).Do(req)
	if err != nil {
		t.Fatalf("default policy: %v, want the 409 answer", err)
	}
	resp.Body.Close()
	wantInFlight(t, resp)
	if n := g.rejectedCount(t, "api", "in-flight"); n != 1 {
		t.Errorf("the proxy answered in-flight %d times, want 1 (no retry)", n)
	}
	if d := retryAfterOn409(10*time.Millisecond, 50*time.Millisecond, 1, resp); d != time.Second {
		t.Errorf("recipe Backoff on the 409: %v, want Retry-After's 1 s", d)
	}
	if d := retryablehttp.DefaultBackoff(10*time.Millisecond, 50*time.Millisecond, 1, resp); d == time.Second {
		t.Errorf("DefaultBackoff on the 409: %v; it reads Retry-After on 429 and 503 only", d)
	}
	g.upstream.Release()
	if r := first(); r.StatusCode != http.StatusCreated || r.Header.Get("Callout-Id") != resp.Header.Get("Callout-Id") {
		t.Errorf("first request: %d Callout-Id %q, want 201 and the 409's %q", r.StatusCode,
			r.Header.Get("Callout-Id"), resp.Header.Get("Callout-Id"))
	}
}

// TestRetryableHTTPAndRejected503s: go-retryablehttp's default policy
// retries every 5xx, so it sends a request the proxy refused as rejected
// (503 endpoint-disabled) RetryMax more times; with the Callout-Outcome
// policy it sends it once and returns the 503.
func TestRetryableHTTPAndRejected503s(t *testing.T) {
	g := newGenericRig(t)
	for _, tt := range []struct {
		name  string
		check retryablehttp.CheckRetry
		sent  int
	}{{"default policy", nil, 7}, {"Callout-Outcome policy", followCalloutOutcome, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			before := g.rejectedCount(t, "off", "endpoint-disabled")
			req, _ := retryablehttp.NewRequest(http.MethodGet, g.p.URL+"/callout/off/v1/status", nil)
			req.Header.Set("Authorization", g.token)
			resp, err := retryableClient(tt.check, 6).Do(req)
			switch {
			case tt.check == nil && (err == nil || !strings.Contains(err.Error(), "giving up after 7 attempt")):
				t.Errorf("default policy: %v, want it to give up after 7 attempts", err)
			case tt.check != nil && (err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
				resp.Header.Get("Callout-Outcome") != "rejected"):
				t.Errorf("Callout-Outcome policy: %v %v, want the 503 rejected answer at once", resp, err)
			}
			if resp != nil {
				resp.Body.Close()
			}
			if got := g.rejectedCount(t, "off", "endpoint-disabled") - before; got != tt.sent {
				t.Errorf("the proxy refused %d requests, want %d", got, tt.sent)
			}
		})
	}
}
