package realclients

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// followCalloutOutcome is the CheckRetry that contract §2 ("Generic HTTP
// clients") gives for go-retryablehttp: when the proxy answered, retry
// exactly what it classes retryable, except a 202 (the proxy goes on with
// the callout: poll its Location instead); without an answer (a timeout, a
// reset), go-retryablehttp's own rules.
func followCalloutOutcome(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if resp != nil && resp.Header.Get("Callout-Outcome") != "" {
		return resp.StatusCode != http.StatusAccepted && resp.Header.Get("Callout-Outcome") == "retryable", nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
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
		c.CheckRetry = check
	}
	return c
}

// TestRetryableHTTPWaitsOutItsOwnInFlightCallout: a go-retryablehttp
// caller whose own timeout fires during the synchronous attempt sends the
// POST again with its key; the proxy answers 503 in-flight, Retry-After 1,
// class retryable, which the client (its default policy, and the
// Callout-Outcome one) waits on and retries, until the retry gets the
// first attempt's answer, replayed. The upstream is called once.
func TestRetryableHTTPWaitsOutItsOwnInFlightCallout(t *testing.T) {
	for _, tt := range []struct {
		name  string
		check retryablehttp.CheckRetry
	}{{"default policy", nil}, {"Callout-Outcome policy", followCalloutOutcome}} {
		t.Run(tt.name, func(t *testing.T) {
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
				req.Header.Set("Idempotency-Key", "retryablehttp-"+strings.ReplaceAll(tt.name, " ", "-"))
				// Enough retries for a loaded machine, where a try can time out
				// more than once before the proxy answers in-flight.
				resp, err := retryableClient(tt.check, 30).Do(req)
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
			if n := g.upstream.HitsFor("/v1/charges"); n != 1 {
				t.Errorf("upstream called %d times, want once", n)
			}
		})
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
