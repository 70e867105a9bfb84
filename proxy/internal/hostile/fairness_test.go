//go:build hostile

package hostile

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// orgC is the third organisation of the shared-endpoint cases.
const orgC = "https://third.my.salesforce.com"

// sharedEndpointProxy starts Redis, an upstream whose /hang path answers
// nothing until the attempt gives up and whose /fast path answers 200, and
// a proxy with orgA, orgB and orgC on two endpoints in front of it:
// "shared" with attempt_timeout 1s (org-a's 20 timeouts come quickly) and
// the default breaker (20 failures, breaker.partition organisation), and
// "queue" with the default attempt limit and breaker_failures 1000 (its
// breaker never opens: what holds org-b back there can only be the
// dispatch order). It returns the proxy and an admin token of scope read.
func sharedEndpointProxy(t *testing.T) (*proctest.Proxy, string) {
	redisURL := proctest.StartRedis(t, false).URL
	stop := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/hang") {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(func() { close(stop); up.Close() })
	adminToken, admin := adminTokenFile(t)
	cfg := proctest.Config{RedisURL: redisURL, Issuers: []string{orgA, orgB, orgC}, Sections: admin,
		Endpoints: []string{proctest.Endpoint("healthy", up.URL, proctest.Loopback),
			proctest.Endpoint("shared", up.URL, proctest.Loopback, "attempt_timeout: 1s"),
			proctest.Endpoint("queue", up.URL, proctest.Loopback, "breaker_failures: 1000")}}.YAML()
	return proctest.StartProxy(t, proxyBinary, cfg, proxyOptions()), adminToken
}

// call sends one callout and returns its status, Callout-Id and
// Callout-Outcome, and the problem type's last segment for an error or the
// state of a 202's status document.
func call(c *http.Client, method, url, token, key string, async bool) (status int, id, outcome, detail string) {
	var body io.Reader
	if method != http.MethodGet {
		body = strings.NewReader(`{"n":1}`)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if async {
		req.Header.Set("Prefer", "respond-async")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err.Error()
	}
	defer resp.Body.Close()
	var doc struct{ Type, State string }
	if resp.StatusCode == http.StatusAccepted || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		_ = json.NewDecoder(resp.Body).Decode(&doc)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	detail = doc.State
	if doc.Type != "" {
		detail = doc.Type[strings.LastIndexByte(doc.Type, '/')+1:]
	}
	return resp.StatusCode, resp.Header.Get("Callout-Id"), resp.Header.Get("Callout-Outcome"), detail
}

// statusDoc reads a callout's status document as token's organisation.
func statusDoc(t *testing.T, c *http.Client, p *proctest.Proxy, token, id string) api.StatusDocument {
	t.Helper()
	var d api.StatusDocument
	proctest.GetJSON(t, c, p.URL+"/v1/callouts/"+id, token, &d)
	return d
}

// endpointState reads GET /admin/v1/endpoints/{name}.
func endpointState(t *testing.T, c *http.Client, p *proctest.Proxy, adminToken, name string) api.EndpointDoc {
	t.Helper()
	var d api.EndpointDoc
	proctest.GetJSON(t, c, p.AdminURL+"/admin/v1/endpoints/"+name, "Bearer "+adminToken, &d)
	return d
}

// partitionOf is the breaker partition of issuer in d, if it has one.
func partitionOf(d api.EndpointDoc, issuer string) (api.PartitionDoc, bool) {
	for _, p := range d.Partitions {
		if p.Issuer == issuer {
			return p, true
		}
	}
	return api.PartitionDoc{}, false
}

// TestHostileSharedBreaker: org-a floods the hanging path of the shared
// endpoint with keyed writes until its timeouts (20 by default) open its
// breaker partition, and keeps flooding; meanwhile org-b's and org-c's 25
// keyed writes each to the healthy path of the same endpoint are answered
// 200 success — none 202 held — and their 10 reads each 200, none 503
// breaker-open; org-a's later writes are held; the endpoint's own breaker
// stays closed (one organisation is not the two its opening needs,
// contract §6).
func TestHostileSharedBreaker(t *testing.T) {
	p, adminToken := sharedEndpointProxy(t)
	tokenA, tokenB, tokenC := bearer(t, orgA), bearer(t, orgB), bearer(t, orgC)
	w := watchProxy(t, p)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

	// org-a: 60 keyed writes to the hanging path, 20 at a time (each hangs
	// for the attempt timeout until its partition opens).
	var mu sync.Mutex
	aCodes := map[string]int{}
	flood := func(from, n int) {
		parallel(n, 20, func(i int) {
			code, _, outcome, state := call(client, http.MethodPost, p.URL+"/callout/shared/hang", tokenA,
				"a-"+strconv.Itoa(from+i), false)
			mu.Lock()
			aCodes[fmt.Sprintf("%d %s %s", code, outcome, state)]++
			mu.Unlock()
		})
	}
	flood(0, 60)
	firstCodes := fmt.Sprint(aCodes)
	var part api.PartitionDoc
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if part, _ = partitionOf(endpointState(t, client, p, adminToken, "shared"), orgA); part.Breaker == "open" {
			break
		}
	}
	if part.Breaker != "open" || part.ConsecutiveFailures < 20 {
		t.Fatalf("org-a's partition after 60 hanging writes = %+v, want open after at least 20 failures", part)
	}
	// the flood goes on while org-b and org-c call the healthy path
	floodDone := make(chan struct{})
	go func() { defer close(floodDone); flood(1000, 200) }()
	type result struct{ code, outcome, problem string }
	others := map[string]map[result]int{}
	var wg sync.WaitGroup
	for _, org := range []struct{ name, token string }{{"org-b", tokenB}, {"org-c", tokenC}} {
		others[org.name] = map[result]int{}
		wg.Go(func() {
			parallel(35, 5, func(i int) {
				method, key := http.MethodPost, org.name+"-"+strconv.Itoa(i)
				if i >= 25 {
					method, key = http.MethodGet, ""
				}
				code, _, outcome, problem := call(client, method, p.URL+"/callout/shared/fast", org.token, key, false)
				mu.Lock()
				others[org.name][result{method + " " + strconv.Itoa(code), outcome, problem}]++
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	<-floodDone
	after := endpointState(t, client, p, adminToken, "shared")
	part, _ = partitionOf(after, orgA)
	w.finish(t)
	t.Logf("org-a: first 60 %s, all %v; org-a's partition %+v; endpoint breaker %s gate %s; org-b %v; org-c %v",
		firstCodes, aCodes, part, after.Breaker, after.Gate, others["org-b"], others["org-c"])
	for org, got := range others {
		want := map[result]int{{"POST 200", "success", ""}: 25, {"GET 200", "success", ""}: 10}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s during org-a's flood: %v, want 25 writes and 10 reads answered 200 success", org, got)
		}
	}
	if after.Breaker != "closed" || after.Gate != "open" {
		t.Errorf("the endpoint's own breaker %s, gate %s; want closed and open (one organisation's partition open)",
			after.Breaker, after.Gate)
	}
	if part.Breaker != "open" {
		t.Errorf("org-a's partition %+v after its flood, want open", part)
	}
	// its first 60 are accepted (scheduled after a hanging attempt, or
	// held once its partition opened); the 200 after are held at once
	if aCodes["202 retryable scheduled"]+aCodes["202 retryable held"] != 260 ||
		aCodes["202 retryable held"] < 200 {
		t.Errorf("org-a's writes: the first 60 %s, all 260 %v; want every one 202, the last 200 held",
			firstCodes, aCodes)
	}
}

// TestHostileFairDispatch: two organisations, org-a and org-c, queue 150
// Prefer: respond-async writes each to the hanging path of the "queue"
// endpoint (whose breaker never opens; the default attempt limit, so each
// of their attempts holds its slot until the upstream's 10 s header
// timeout); their attempts together fill 15 of the 16 dispatch slots, never
// the 16th, kept for organisations with none in flight; org-b's 10 async
// writes to the healthy path, sent after, each start within 2 s by the
// proxy's own attempt records — not behind the flooders' backlog, nor after
// one of their attempts gives up — and before at most one of their attempts
// per dispatch slot has started since they were sent (contract §10 "Fair
// dispatch"). One flooding organisation is the simpler case of this one.
func TestHostileFairDispatch(t *testing.T) {
	const slots = 16 // the dispatcher's default max_concurrency per endpoint
	const kept = 1   // of them, kept for organisations with none in flight
	p, adminToken := sharedEndpointProxy(t)
	tokenA, tokenB, tokenC := bearer(t, orgA), bearer(t, orgB), bearer(t, orgC)
	w := watchProxy(t, p)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

	var mu sync.Mutex
	floodIDs := map[string]string{} // callout id -> its organisation's token
	parallel(300, 16, func(i int) {
		tok := tokenA
		if i%2 == 1 {
			tok = tokenC
		}
		code, id, _, _ := call(client, http.MethodPost, p.URL+"/callout/queue/hang", tok, "f-"+strconv.Itoa(i), true)
		if code == http.StatusAccepted {
			mu.Lock()
			floodIDs[id] = tok
			mu.Unlock()
		}
	})
	if len(floodIDs) != 300 {
		t.Fatalf("org-a's and org-c's async writes: %d accepted, want 300", len(floodIDs))
	}
	// the dispatcher has filled all but the kept slot with the flooders'
	// hanging attempts, and leaves the kept one free
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if endpointState(t, client, p, adminToken, "queue").InFlight >= slots-kept {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // a few dispatcher rounds: none may take the kept slot
	if n := endpointState(t, client, p, adminToken, "queue").InFlight; n != slots-kept {
		t.Fatalf("the flooders' attempts in flight: %d, want %d (every slot but the kept one)", n, slots-kept)
	}
	sent := time.Now()
	var bIDs []string
	for i := range 10 {
		code, id, _, _ := call(client, http.MethodPost, p.URL+"/callout/queue/fast", tokenB, "b-"+strconv.Itoa(i), true)
		if code != http.StatusAccepted {
			t.Fatalf("org-b's async write %d answered %d, want 202", i, code)
		}
		bIDs = append(bIDs, id)
	}
	var last time.Time
	var waits []time.Duration
	for _, id := range bIDs {
		var d api.StatusDocument
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if d = statusDoc(t, client, p, tokenB, id); d.State == "succeeded" {
				break
			}
		}
		if d.State != "succeeded" || len(d.Attempts) == 0 {
			t.Fatalf("org-b's callout %s: state %s, %d attempts; want succeeded", id, d.State, len(d.Attempts))
		}
		start := d.Attempts[0].StartedAt
		waits = append(waits, start.Sub(sent).Round(time.Millisecond))
		if start.After(last) {
			last = start
		}
	}
	// the flooders' attempts that started after org-b's writes were sent
	// and before org-b's last first attempt: the delay their backlog caused
	between := 0
	for id, tok := range floodIDs {
		for _, a := range statusDoc(t, client, p, tok, id).Attempts {
			if a.StartedAt.After(sent) && a.StartedAt.Before(last) {
				between++
			}
		}
	}
	w.finish(t)
	t.Logf("org-b's 10 async writes started %v after they were sent (org-a and org-c: 150 each queued to a path that hangs until "+
		"the attempt gives up); %d attempts of theirs started in between", waits, between)
	for i, d := range waits {
		if d > 2*time.Second {
			t.Errorf("org-b's write %d started %s after it was sent, want within 2 s", i, d)
		}
	}
	if between > slots {
		t.Errorf("%d attempts of org-a and org-c started before org-b's last, want at most one per slot (%d)", between, slots)
	}
}
