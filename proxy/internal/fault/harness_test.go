//go:build fault

package fault

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

const (
	// testSecret is the HS256 secret every replica verifies tokens with.
	testSecret = "fault-suite-secret-of-at-least-32-bytes!"
	issuer     = "https://fault.my.salesforce.com"
	// loopback lets an endpoint reach upstreams on 127.0.0.1.
	loopback = proctest.Loopback
)

// replicaEnv is the environment of every replica.
var replicaEnv = map[string]string{"TEST_JWT_SECRET": testSecret}

// config is a whole configuration on port 0 for redisURL with HS256
// auth, a millisecond retry policy plus policy lines, and the endpoints.
func config(redisURL string, policy []string, endpoints ...string) string {
	lines := []string{"base_delay: 20ms", "max_delay: 200ms", "max_attempts: 30", "breaker_failures: 100000"}
	for _, l := range policy { // a line for the same key replaces the default
		k, _, _ := strings.Cut(l, ":")
		lines = slices.DeleteFunc(lines, func(d string) bool { return strings.HasPrefix(d, k+":") })
		lines = append(lines, l)
	}
	return proctest.Config{RedisURL: redisURL, Issuers: []string{issuer}, Policy: lines, Endpoints: endpoints}.YAML()
}

// endpoint renders one entry of the endpoints block, reaching loopback.
func endpoint(name, url string, extra ...string) string {
	return proctest.Endpoint(name, url, append([]string{loopback}, extra...)...)
}

// client talks to the replicas as Apex does.
type client struct {
	http  *http.Client
	token string
}

func newClient(t *testing.T) *client {
	t.Helper()
	c := proctest.NewClient(30*time.Second, 32)
	t.Cleanup(c.CloseIdleConnections)
	return &client{token: proctest.Bearer(t, testSecret, issuer, 30*time.Minute), http: c}
}

// do sends one request with the client's token and returns the status,
// headers and body.
func (c *client) do(method, url string, hdr http.Header, body string) (int, http.Header, []byte, error) {
	hdr = hdr.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Authorization", c.token)
	a, err := proctest.Send(c.http, method, url, hdr, body)
	return a.Status, a.Header, a.Body, err
}

// accepted is a callout the proxy answered 202 for.
type accepted struct{ ID, Key string }

// postAsync sends n POSTs with Prefer: respond-async to endpoint ep,
// keys prefix-0 … prefix-(n-1), from workers goroutines, each to
// target(i) (a replica base URL, "" to skip). It returns the accepted
// callouts and the count of requests not accepted (transport errors and
// non-202 answers). between runs after request i was answered.
func (c *client) postAsync(n, workers int, ep, prefix string, target func(i int) string, between func(i int)) ([]accepted, int) {
	var (
		mu      sync.Mutex
		out     []accepted
		refused int
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				key := fmt.Sprintf("%s-%d", prefix, i)
				base := target(i)
				status, _, body, err := c.do(http.MethodPost, base+"/callout/"+ep+"/v1/charges",
					http.Header{"Idempotency-Key": {`"` + key + `"`}, "Prefer": {"respond-async"},
						"Content-Type": {"application/json"}}, `{"n":`+fmt.Sprint(i)+`}`)
				var doc api.StatusDocument
				ok := err == nil && status == http.StatusAccepted && json.Unmarshal(body, &doc) == nil && doc.ID != ""
				mu.Lock()
				if ok {
					out = append(out, accepted{ID: doc.ID, Key: `"` + key + `"`})
				} else {
					refused++
				}
				mu.Unlock()
				if between != nil {
					between(i)
				}
			}
		}()
	}
	wg.Wait()
	return out, refused
}

// status fetches the status document of id from base.
func (c *client) status(base, id string) (api.StatusDocument, error) {
	var doc api.StatusDocument
	code, _, body, err := c.do(http.MethodGet, base+"/v1/callouts/"+id, nil, "")
	if err != nil {
		return doc, err
	}
	if code != http.StatusOK {
		return doc, fmt.Errorf("GET /v1/callouts/%s = %d: %s", id, code, body)
	}
	return doc, json.Unmarshal(body, &doc)
}

// waitFinal polls every accepted callout on base until each is finished,
// failing the test after deadline, and returns the final documents by id.
func (c *client) waitFinal(t *testing.T, base string, cs []accepted, deadline time.Duration) map[string]api.StatusDocument {
	t.Helper()
	final := map[string]api.StatusDocument{}
	end := time.Now().Add(deadline)
	for {
		var pending []string
		for _, a := range cs {
			if _, ok := final[a.ID]; ok {
				continue
			}
			doc, err := c.status(base, a.ID)
			switch {
			case err != nil:
				t.Fatalf("callout %s (key %s): %v", a.ID, a.Key, err)
			case doc.State.Finished():
				final[a.ID] = doc
			default:
				pending = append(pending, a.ID+"="+string(doc.State))
			}
		}
		if len(pending) == 0 {
			return final
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d callouts not finished after %s: %v", len(pending), len(cs), deadline,
				pending[:min(10, len(pending))])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wantAll fails the test unless every document is in state want.
func wantAll(t *testing.T, final map[string]api.StatusDocument, want policy.State) {
	t.Helper()
	bad := 0
	for id, doc := range final {
		if doc.State != want {
			bad++
			if bad <= 5 {
				t.Errorf("callout %s ended %s (%s), want %s", id, doc.State, doc.LastError, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d callouts did not end %s", bad, len(final), want)
	}
}

// payReplicas starts n replicas on rs with one endpoint, pay, in front of
// an upstream that answers 200: config's text with policy lines, and
// redisLines (each ending in a newline; "" for none) added to its redis
// block. It returns the upstream, the replicas and a client.
func payReplicas(t *testing.T, rs *proctest.Redis, n int, policy []string, redisLines string) (*proctest.Upstream, []*proctest.Proxy, *client) {
	t.Helper()
	up := proctest.NewUpstream(t, nil)
	cfg := strings.Replace(config(rs.URL, policy, endpoint("pay", up.URL)), "redis:\n", "redis:\n"+redisLines, 1)
	return up, proctest.StartReplicas(t, proxyBinary, n, cfg, replicaEnv), newClient(t)
}
