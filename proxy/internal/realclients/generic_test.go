package realclients

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const adminToken = "realclients-admin-token-0123456789"

// genericRig is the proxy as generic HTTP clients meet it (contract §2,
// "Generic HTTP clients"): an endpoint "api" whose upstream holds POST
// /v1/charges until the test releases it (a slow synchronous attempt)
// and answers everything else 200, and an endpoint "off" that the test
// disables through the admin API (503 endpoint-disabled, class rejected).
type genericRig struct {
	p        *proctest.Proxy
	upstream *proctest.Upstream
	token    string // the caller's Authorization value
}

func newGenericRig(t *testing.T) *genericRig {
	t.Helper()
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/charges" {
			proctest.Hold(r)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ch_1"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	p := startProxy(t, "admin:\n  tokens: [{name: ops, token_env: TEST_ADMIN_TOKEN, scope: write}]\n",
		map[string]string{"api": up.URL, "off": up.URL}, "TEST_ADMIN_TOKEN", adminToken)
	req, _ := http.NewRequest(http.MethodPost, p.AdminURL+"/admin/v1/endpoints/off/disable", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("disabling endpoint off: %s", resp.Status)
	}
	return &genericRig{p: p, upstream: up, token: proctest.Bearer(t, secret, issuer, 10*time.Minute)}
}

// releaseAfterInFlight waits until the proxy has answered a retry 409
// in-flight (the first attempt of its key still held upstream), then lets
// the upstream answer. It returns false when no such answer came within
// 60 s (the client under test never retried).
func (g *genericRig) releaseAfterInFlight(t *testing.T) bool {
	t.Helper()
	defer g.upstream.Release()
	return awaitInFlight(t, g.p, "api")
}

// awaitInFlight waits until p has answered a request to endpoint 409
// in-flight (a retry meeting its key's first attempt, still held
// upstream); it returns false when none came within 60 s.
func awaitInFlight(t *testing.T, p *proctest.Proxy, endpoint string) bool {
	t.Helper()
	for range 1200 {
		if p.Metric(t, `callout_rejected_total{code="in-flight",endpoint="`+endpoint+`"}`) >= 1 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// holdFirst sends a POST /callout/api/v1/charges with key from a plain
// client and returns once the upstream holds it (the synchronous first
// attempt still running); the function it returns waits for that
// request's answer, after the test releases the upstream.
func (g *genericRig) holdFirst(t *testing.T, key string) func() *http.Response {
	t.Helper()
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.p.URL+"/callout/api/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Authorization", g.token)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			done <- &http.Response{}
			return
		}
		resp.Body.Close()
		done <- resp
	}()
	for g.upstream.HitsFor("/v1/charges") == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return func() *http.Response { return <-done }
}

// wantChargedOnce fails t unless the upstream was sent the charge exactly
// once: however often a client retried, only the proxy's first attempt
// reached it (contract §5).
func (g *genericRig) wantChargedOnce(t *testing.T) {
	t.Helper()
	if n := g.upstream.HitsFor("/v1/charges"); n != 1 {
		t.Errorf("upstream called %d times, want once", n)
	}
}

// wantInFlight checks that resp is the proxy's 409 in-flight of contract
// §5: class rejected, Retry-After 1, a Callout-Id.
func wantInFlight(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Callout-Problem") != "in-flight" ||
		resp.Header.Get("Callout-Outcome") != "rejected" || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("Callout-Id") == "" {
		t.Errorf("answer %d %v, want 409 in-flight, rejected, Retry-After 1, a Callout-Id", resp.StatusCode, resp.Header)
	}
}

// rejectedCount is how many requests to endpoint the proxy refused with
// problem code (callout_rejected_total).
func (g *genericRig) rejectedCount(t *testing.T, endpoint, code string) int {
	t.Helper()
	return int(max(0, g.p.Metric(t, `callout_rejected_total{code="`+code+`",endpoint="`+endpoint+`"}`)))
}

// TestBreakerRetryAfterIsTheNextProbe: a breaker whose probe is 5 minutes
// away answers reads 503 breaker-open, class rejected, with Retry-After the
// seconds until that probe (contract §4), as the detail says: a generic
// client that sleeps for Retry-After (go-retryablehttp, urllib3 without
// retry_after_max) waits for the probe, so the recipes of contract §2 stop
// at the rejected class instead.
func TestBreakerRetryAfterIsTheNextProbe(t *testing.T) {
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	p := startProxy(t, "policy:\n  breaker_failures: 1\n  breaker_probe_interval: 5m\n", map[string]string{"flaky": up.URL})
	token := proctest.Bearer(t, secret, issuer, 10*time.Minute)
	var resp *http.Response
	var body []byte
	for range 50 { // the first read opens the breaker; the gate cache may pass one more
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/callout/flaky/v1/status", nil)
		req.Header.Set("Authorization", token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
		if resp = r; r.Header.Get("Callout-Problem") == "breaker-open" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Callout-Problem") != "breaker-open" {
		t.Fatalf("no breaker-open answer: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	ra := resp.Header.Get("Retry-After")
	if !regexp.MustCompile(`^(29\d|300)$`).MatchString(ra) || !strings.Contains(string(body), "next probe is in "+ra+" s") ||
		resp.Header.Get("Callout-Outcome") != "rejected" {
		t.Errorf("Retry-After %q, body %s; want the probe's 300 s (rounded up), also in the detail, class rejected", ra, body)
	}
}
