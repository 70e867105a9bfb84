package realclients

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const (
	secret = "realclients-secret-of-at-least-32-bytes!"
	issuer = "https://realclients.my.salesforce.com"
)

// proxyBinary is the callout-proxy binary of this run: CALLOUT_PROXY_BINARY
// (.ci/hostile.sh sets it), or one TestMain built from this checkout. It
// is written once, before any test runs, and only read afterwards.
var proxyBinary string

// startProxy runs the binary with caller JWTs (HS256, secret, issuer) and
// an endpoint per entry of endpoints (name: upstream URL, loopback
// allowed); extra is more top-level configuration (an admin section),
// env more environment.
func startProxy(t *testing.T, extra string, endpoints map[string]string, env ...string) *proctest.Proxy {
	t.Helper()
	cfg := proctest.Config{Issuers: []string{issuer}, Sections: extra}
	for _, name := range slices.Sorted(maps.Keys(endpoints)) {
		cfg.Endpoints = append(cfg.Endpoints, proctest.Endpoint(name, endpoints[name], proctest.Loopback))
	}
	vars := map[string]string{"TEST_JWT_SECRET": secret}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	return proctest.StartProxy(t, proxyBinary, cfg.YAML(), proctest.ProxyOptions{Env: vars})
}

// TestMain builds the binary unless CALLOUT_PROXY_BINARY names one, runs
// the tests and removes what it built.
func TestMain(m *testing.M) {
	os.Exit(proctest.RunWithBinary(m, "realclients", "CALLOUT_PROXY_BINARY", false, &proxyBinary))
}

// TestStripeGoThroughTheProxy: stripe-go, pointed at the proxy's endpoint
// for a Stripe-like upstream with the proxy's JWT as its API key (it sends
// it as Authorization: Bearer, which the proxy verifies and never
// forwards), creates customers. Its own keys ("<nanoseconds>_<random>",
// digit first) are accepted and reach the upstream unchanged; a key it is
// given is replayed from the proxy's record the second time, without
// calling the upstream again.
func TestStripeGoThroughTheProxy(t *testing.T) {
	upstream := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cus_%d","object":"customer","email":"x@example.com"}`, proctest.Received(r).N)
	})
	p := startProxy(t, "", map[string]string{"stripe": upstream.URL})
	sc := stripeClient(t, p.URL, 0, 30*time.Second)
	ctx := context.Background()

	for i := range 5 {
		c, err := sc.V1Customers.Create(ctx, &stripe.CustomerCreateParams{Email: stripe.String("x@example.com")})
		if err != nil {
			t.Fatalf("create %d through the proxy: %v", i, err)
		}
		if !strings.HasPrefix(c.ID, "cus_") {
			t.Errorf("customer %+v", c)
		}
	}
	stripeKey := regexp.MustCompile(`^[0-9]+_[A-Za-z0-9_-]{6}$`)
	keys, auths := headers(upstream, "Idempotency-Key"), headers(upstream, "Authorization")
	if len(keys) != 5 {
		t.Fatalf("upstream got %d requests, want 5", len(keys))
	}
	for _, k := range keys {
		if !stripeKey.MatchString(k) {
			t.Errorf("upstream got Idempotency-Key %q, not stripe-go's shape", k)
		}
	}
	for _, a := range auths {
		if a != "" {
			t.Errorf("the caller's Authorization reached the upstream: %q", a)
		}
	}

	params := &stripe.CustomerCreateParams{Email: stripe.String("x@example.com")}
	params.SetIdempotencyKey("KG5LxwFBepaKHyUD")
	first, err := sc.V1Customers.Create(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	again, err := sc.V1Customers.Create(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("second create with one key = %s (replayed %q), want %s replayed", again.ID,
			again.LastResponse.Header.Get("Idempotent-Replayed"), first.ID)
	}
	keys = headers(upstream, "Idempotency-Key")
	if len(keys) != 6 || keys[5] != "KG5LxwFBepaKHyUD" {
		t.Errorf("upstream got %d requests (last key %q), want 6 with the given key once", len(keys), keys[len(keys)-1])
	}
}

// stripeClient is a stripe-go client of the proxy at base, endpoint
// "stripe", with the proxy's JWT as its API key (stripe-go sends it as
// Authorization: Bearer), retries network errors and 409s at most retries
// times, and gives up on a try after timeout.
func stripeClient(t *testing.T, base string, retries int64, timeout time.Duration) *stripe.Client {
	t.Helper()
	// stripe-go insists its request paths start with /v1, so the
	// endpoint's prefix is added below it, by the transport.
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(base), MaxNetworkRetries: stripe.Int64(retries),
		HTTPClient:    &http.Client{Timeout: timeout, Transport: prefixed{"/callout/stripe"}},
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient(strings.TrimPrefix(proctest.Bearer(t, secret, issuer, 10*time.Minute), "Bearer "),
		stripe.WithBackends(&stripe.Backends{API: backend, Connect: backend, Uploads: backend, MeterEvents: backend}))
}

// headers is the field name of every request u received, in order.
func headers(u *proctest.Upstream, name string) []string {
	var out []string
	for _, r := range u.Requests("") {
		out = append(out, r.Header.Get(name))
	}
	return out
}

// prefixed sends each request under prefix (a clone: the caller's request
// is not changed).
type prefixed struct{ prefix string }

func (p prefixed) RoundTrip(r *http.Request) (*http.Response, error) {
	c := r.Clone(r.Context())
	c.URL.Path = p.prefix + c.URL.Path
	return http.DefaultTransport.RoundTrip(c)
}

// TestStripeGoRetriesInFlight: stripe-go retries a 409 by default (Stripe's
// own API answers 409 to a request whose key is still being processed),
// and so does a 409 in-flight of the proxy, with its own backoff (0.5 s
// growing to 5 s; it does not read Retry-After). A create whose 1 s timeout
// fires during the synchronous attempt is retried with the same key, meets
// the 409 in-flight, retries again and gets the first attempt's answer,
// replayed; the upstream is called once.
func TestStripeGoRetriesInFlight(t *testing.T) {
	upstream := proctest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		proctest.Hold(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"cus_1","object":"customer"}`))
	})
	p := startProxy(t, "", map[string]string{"stripe": upstream.URL})
	sc := stripeClient(t, p.URL, 30, time.Second)
	type result struct {
		c   *stripe.Customer
		err error
	}
	done := make(chan result, 1)
	go func() {
		params := &stripe.CustomerCreateParams{Email: stripe.String("x@example.com")}
		params.SetIdempotencyKey("stripe-in-flight-1")
		c, err := sc.V1Customers.Create(context.Background(), params)
		done <- result{c, err}
	}()
	met := awaitInFlight(t, p, "stripe")
	upstream.Release()
	r := <-done
	if !met {
		t.Fatal("no retry met the in-flight callout within 60 s")
	}
	if r.err != nil {
		t.Fatalf("stripe-go gave up: %v", r.err)
	}
	if r.c.ID != "cus_1" || r.c.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("customer %s replayed %q, want cus_1, replayed", r.c.ID, r.c.LastResponse.Header.Get("Idempotent-Replayed"))
	}
	if n := upstream.Hits(); n != 1 {
		t.Errorf("upstream called %d times, want once", n)
	}
}
