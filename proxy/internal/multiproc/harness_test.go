package multiproc

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

const (
	// testSecret is the HS256 secret every replica verifies tokens with.
	testSecret = "multiproc-test-secret-of-at-least-32-bytes"
	// prodIssuer and sandboxIssuer are the two orgs of the configuration.
	prodIssuer    = "https://test.my.salesforce.com"
	sandboxIssuer = "https://test--uat.sandbox.my.salesforce.com"
	// loopbackNets lets an endpoint reach the httptest upstreams on
	// 127.0.0.1.
	loopbackNets = proctest.Loopback
	// replicaHeader injects the replica's name upstream on every attempt,
	// so an upstream can tell which process dispatched a request.
	replicaHeader = "headers: {X-Replica: {env: REPLICA}}"
	// finalDeadline bounds the wait for a chain with a millisecond policy
	// to end; generous for -race on two busy cores.
	finalDeadline = 20 * time.Second
)

// msPolicy is a retry policy in milliseconds (base 10 ms, ×2, at most
// 50 ms), so an asynchronous chain of 12 attempts ends within a second.
func msPolicy() []string {
	return []string{"base_delay: 10ms", "max_delay: 50ms", "connect_timeout: 1s",
		"header_timeout: 5s", "attempt_timeout: 5s"}
}

// statusDoc is the status document of GET /v1/callouts/{id} and of a 202.
type statusDoc = api.StatusDocument

// harness is one test's view of the shared real Redis and the replicas.
type harness struct {
	// redisURL is the real single-node Redis every replica of the test uses.
	redisURL string
	// store reads the shared Redis directly (backlog figures).
	store  *redisstore.Store
	client *http.Client
}

// newHarness takes the real single-node Redis for the whole test
// (redistest.Backends: exclusive across test processes, flushed first). It
// skips the test when no real Redis is configured and
// CALLOUT_TEST_REQUIRE_REAL is not "1"; with it, a missing Redis fails.
func newHarness(t *testing.T) *harness {
	t.Helper()
	url := os.Getenv(redistest.EnvURL)
	if url == "" && os.Getenv(redistest.EnvRequireReal) != "1" {
		t.Skipf("no real Redis: set %s (proxy/internal/redistest/start-redis.sh)", redistest.EnvURL)
	}
	var single *redistest.Backend
	for _, b := range redistest.Backends(t) {
		if b.Name == "single" {
			single = &b
		}
	}
	if single == nil || url == "" {
		t.Fatalf("no real single-node Redis (%s=%q)", redistest.EnvURL, url)
	}
	if proxyBinary == "" {
		t.Fatal("TestMain did not build the binary")
	}
	client := proctest.NewClient(60*time.Second, 8)
	t.Cleanup(client.CloseIdleConnections)
	return &harness{redisURL: url, store: redisstore.New(single.Client, redisstore.Options{}), client: client}
}

// config is a whole configuration on port 0 for the shared Redis, with
// HS256 auth for both orgs, the policy lines and the endpoints.
func (h *harness) config(policy []string, endpoints ...string) string {
	return proctest.Config{RedisURL: h.redisURL, Issuers: []string{prodIssuer, sandboxIssuer}, Policy: policy,
		Endpoints: endpoints}.YAML()
}

// replicaEnv is the environment of every replica (proctest.StartReplicas
// adds its REPLICA).
func replicaEnv() map[string]string { return proctest.SecretEnv(testSecret, prodIssuer, sandboxIssuer) }

// bearer returns an Authorization value with a fresh token from iss.
func bearer(t *testing.T, iss string) string {
	return proctest.Bearer(t, proctest.IssuerSecret(testSecret, iss), iss, 10*time.Minute)
}

// response is a proxy answer with its body read and the time it took.
type response struct {
	proctest.Answer
	Elapsed time.Duration
}

// send makes one request to base+path (proctest.Send), authenticated only
// by hdr's Authorization, if any. It returns errors instead of failing, so
// it may run on any goroutine.
func (h *harness) send(base, method, path string, hdr http.Header, body string) (response, error) {
	start := time.Now()
	a, err := proctest.Send(h.client, method, base+path, hdr, body)
	return response{Answer: a, Elapsed: time.Since(start)}, err
}

// call is send on the test goroutine, authenticated as prodIssuer unless
// hdr has Authorization; it fails the test on a transport error.
func (h *harness) call(t *testing.T, r *proctest.Proxy, method, path string, hdr http.Header, body string) response {
	t.Helper()
	if hdr == nil {
		hdr = http.Header{}
	}
	if _, ok := hdr["Authorization"]; !ok {
		hdr = hdr.Clone()
		hdr.Set("Authorization", bearer(t, prodIssuer))
	}
	resp, err := h.send(r.URL, method, path, hdr, body)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, r.Name, err)
	}
	return resp
}

// status fetches GET /v1/callouts/{id} from r as iss.
func (h *harness) status(t *testing.T, r *proctest.Proxy, id, iss string) (response, statusDoc) {
	t.Helper()
	resp := h.call(t, r, http.MethodGet, "/v1/callouts/"+id, http.Header{"Authorization": {bearer(t, iss)}}, "")
	var doc statusDoc
	if resp.Status == http.StatusOK {
		if err := json.Unmarshal(resp.Body, &doc); err != nil {
			t.Fatalf("status document %s: %v", resp.Body, err)
		}
	}
	return resp, doc
}

// waitFinal polls GET /v1/callouts/{id} on r every 25 ms until the callout
// is finished (succeeded, failed, dead_lettered), failing the test after
// deadline. It returns the final status document.
func (h *harness) waitFinal(t *testing.T, r *proctest.Proxy, id string, deadline time.Duration) statusDoc {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		resp, doc := h.status(t, r, id, prodIssuer)
		if resp.Status != http.StatusOK {
			t.Fatalf("GET /v1/callouts/%s = %d: %s", id, resp.Status, resp.Body)
		}
		if doc.State.Finished() {
			return doc
		}
		if time.Now().After(end) {
			t.Fatalf("callout %s still %s after %s: %s", id, doc.State, deadline, resp.Body)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// decodeDoc decodes a 202's status document.
func decodeDoc(t *testing.T, body []byte) statusDoc {
	t.Helper()
	var doc statusDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("status document %q: %v", body, err)
	}
	return doc
}

// hdr builds a request header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
