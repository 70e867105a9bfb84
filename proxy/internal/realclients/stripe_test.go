package realclients

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

const (
	secret = "realclients-secret-of-at-least-32-bytes!"
	issuer = "https://realclients.my.salesforce.com"
)

// proxyBinary returns the callout-proxy binary: CALLOUT_PROXY_BINARY, or
// one built from this repository.
func proxyBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CALLOUT_PROXY_BINARY"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "callout-proxy")
	cmd := exec.Command("go", "build", "-C", "../../..", "-o", bin, "./cmd/callout-proxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProxy runs the binary on cfg and returns its callout listener's URL.
func startProxy(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(proxyBinary(t), "--config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TEST_JWT_SECRET=" + secret}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				addr <- rec["listen"].(string)
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy did not listen within 30 s")
	}
	return ""
}

// token is an HS256 JWT for the proxy (RFC 7519), made by hand: this module
// does not import the proxy's packages.
func token(t *testing.T) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	header := enc([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims := enc(fmt.Appendf(nil, `{"iss":%q,"aud":"callout-proxy","sub":"005000000000001AAA","iat":%d,"exp":%d}`,
		issuer, now, now+600))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(header + "." + claims))
	return header + "." + claims + "." + enc(mac.Sum(nil))
}

// TestStripeGoThroughTheProxy: stripe-go, pointed at the proxy's endpoint
// for a Stripe-like upstream with the proxy's JWT as its API key (it sends
// it as Authorization: Bearer, which the proxy verifies and never
// forwards), creates customers. Its own keys ("<nanoseconds>_<random>",
// digit first) are accepted and reach the upstream unchanged; a key it is
// given is replayed from the proxy's record the second time, without
// calling the upstream again.
func TestStripeGoThroughTheProxy(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var auths []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		auths = append(auths, r.Header.Get("Authorization"))
		n := len(keys)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"cus_%d","object":"customer","email":"x@example.com"}`, n)
	}))
	defer upstream.Close()
	base := startProxy(t, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [`+issuer+`]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: TEST_JWT_SECRET
endpoints:
  stripe:
    url: `+upstream.URL+`
    allowed_networks: [127.0.0.0/8]
`)
	// stripe-go insists its request paths start with /v1, so the
	// endpoint's prefix is added below it, by the transport.
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(base), MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:    &http.Client{Timeout: 30 * time.Second, Transport: prefixed{"/callout/stripe"}},
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := stripe.NewClient(token(t), stripe.WithBackends(&stripe.Backends{API: backend, Connect: backend,
		Uploads: backend, MeterEvents: backend}))
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
	mu.Lock()
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
	mu.Unlock()

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
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 6 || keys[5] != "KG5LxwFBepaKHyUD" {
		t.Errorf("upstream got %d requests (last key %q), want 6 with the given key once", len(keys), keys[len(keys)-1])
	}
}

// prefixed sends each request under prefix (a clone: the caller's request
// is not changed).
type prefixed struct{ prefix string }

func (p prefixed) RoundTrip(r *http.Request) (*http.Response, error) {
	c := r.Clone(r.Context())
	c.URL.Path = p.prefix + c.URL.Path
	return http.DefaultTransport.RoundTrip(c)
}
