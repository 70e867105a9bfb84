//go:build hostile

package hostile

import (
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

// hangRig is a proxy of some issuers (their secrets as
// SecretEnv(testSecret, issuers...)) whose upstream holds a path ending in
// /hang until the request ends and answers {"ok":true} on any other, with
// an admin token of scope write, the most requests /hang held at once, and
// its configuration rendered with other sections (for a reload).
type hangRig struct {
	p      *proctest.Proxy
	admin  string
	peak   func() int
	render func(sections string) string
}

// startHangRig starts Redis, the upstream and the proxy of issuers with
// the sections and the endpoints rendered by eps(upstream URL).
func startHangRig(t *testing.T, issuers []string, sections string, eps func(url string) []string) *hangRig {
	redisURL := proctest.StartRedis(t, false).URL
	stop := make(chan struct{})
	var hmu sync.Mutex
	hanging, peak := 0, 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.URL.Path, "/hang") {
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		hmu.Lock()
		hanging++
		peak = max(peak, hanging)
		hmu.Unlock()
		defer func() { hmu.Lock(); hanging--; hmu.Unlock() }()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); up.Close() })
	adminToken, admin := adminTokenFileScope(t, "write")
	render := func(sections string) string {
		return proctest.Config{RedisURL: redisURL, Issuers: issuers, Sections: admin + sections,
			Endpoints: eps(up.URL)}.YAML()
	}
	p := proctest.StartProxy(t, proxyBinary, render(sections),
		proctest.ProxyOptions{Env: proctest.SecretEnv(testSecret, issuers...)})
	return &hangRig{p: p, admin: adminToken, render: render,
		peak: func() int { hmu.Lock(); defer hmu.Unlock(); return peak }}
}

// reload writes yaml over the rig's configuration and reloads it, failing
// the test unless the reload is put in force.
func (r *hangRig) reload(t *testing.T, yaml string) {
	t.Helper()
	rr := &reloadRig{p: r.p, admin: r.admin}
	if code, body := rr.reload(t, yaml); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
}

// TestHostileReloadKeepsMaxConcurrency: org-a and org-c flood the "queue"
// endpoint (max_concurrency 16 by default) with hanging async writes;
// three reloads (a harmless change each) follow 300 ms apart while the
// attempts hang. The upstream never sees more than the endpoint's 16
// attempts of this one replica at once: a reload's dispatcher shares the
// retired one's slots (dispatch.Slots). Before, each reload added another
// max_concurrency: 15 → 60 at once.
func TestHostileReloadKeepsMaxConcurrency(t *testing.T) {
	issuers := []string{orgA, orgB, orgC}
	r := startHangRig(t, issuers, "", func(u string) []string {
		return []string{proctest.Endpoint("queue", u, proctest.Loopback, "breaker_failures: 1000")}
	})
	tokenA, tokenC := bearer(t, orgA), bearer(t, orgC)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	parallel(200, 16, func(i int) {
		tok := tokenA
		if i%2 == 1 {
			tok = tokenC
		}
		call(client, http.MethodPost, r.p.URL+"/callout/queue/hang", tok, "mc-"+strconv.Itoa(i), true)
	})
	proctest.Eventually(t, 20*time.Second, 50*time.Millisecond, "15 attempts hanging", func() bool { return r.peak() >= 15 })
	before := r.peak()
	var inFlight []int64
	for i := range 3 {
		r.reload(t, r.render("limits:\n  write_timeout: "+strconv.Itoa(20+i)+"s\n"))
		time.Sleep(300 * time.Millisecond)
		inFlight = append(inFlight, endpointState(t, client, r.p, r.admin, "queue").InFlight)
	}
	t.Logf("hanging attempts at the upstream: at most %d before the reloads, %d after three (endpoint in_flight after each: %v; max_concurrency 16)",
		before, r.peak(), inFlight)
	if r.peak() > 16 {
		t.Errorf("the upstream saw %d attempts at once from one replica after 3 reloads, past max_concurrency 16", r.peak())
	}
}

// TestHostileReloadAddsOrganisationAfterSoleOneFailed: the proxy starts
// with org-a alone; its 25 writes to the hanging path of "shared"
// (attempt_timeout 1s) open its partition, which, as the endpoint's only
// organisation, opens the endpoint's breaker too (contract §6). A reload
// then adds org-b: org-b has never failed, so its writes to the fast path
// must be answered 200, not held by org-a's failures, and its reads not
// refused breaker-open: the reload closes the endpoint's own breaker and
// leaves org-a's partition open (redisstore.Store.CloseEndpointBreaker).
// Before, org-b's writes were held and its reads refused for the probe
// interval (5 minutes).
func TestHostileReloadAddsOrganisationAfterSoleOneFailed(t *testing.T) {
	issuers := []string{orgA, orgB}
	var render func(iss []string) string
	r := startHangRig(t, issuers, "", func(u string) []string {
		return []string{proctest.Endpoint("shared", u, proctest.Loopback, "attempt_timeout: 1s")}
	})
	single := func(y string) string {
		return strings.Replace(y, "  issuers: ["+orgA+", "+orgB+"]\n", "  issuers: ["+orgA+"]\n", 1)
	}
	render = func(iss []string) string {
		y := r.render("")
		if len(iss) == 1 {
			y = strings.Replace(single(y), "    - {issuer: "+orgB+", hs256_secret_env: TEST_JWT_SECRET_2}\n", "", 1)
		}
		return y
	}
	r.reload(t, render([]string{orgA}))
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	if code, _, out, det := call(client, http.MethodPost, r.p.URL+"/callout/shared/fast", tokenB, "pre-b", false); code != http.StatusUnauthorized {
		t.Fatalf("org-b before it is added: %d %s %s, want 401 (the reload to org-a alone not in force)", code, out, det)
	}
	aCodes := map[string]int{}
	var mu sync.Mutex
	parallel(25, 25, func(i int) {
		code, _, out, det := call(client, http.MethodPost, r.p.URL+"/callout/shared/hang", tokenA, "sole-"+strconv.Itoa(i), false)
		mu.Lock()
		aCodes[fmt.Sprintf("%d %s %s", code, out, det)]++
		mu.Unlock()
	})
	var ep api.EndpointDoc
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ep = endpointState(t, client, r.p, r.admin, "shared"); ep.Breaker == "open" {
			break
		}
	}
	r.reload(t, render(issuers))
	bGot := map[string]int{}
	for i := range 5 {
		code, _, out, det := call(client, http.MethodPost, r.p.URL+"/callout/shared/fast", tokenB, "added-b-"+strconv.Itoa(i), false)
		bGot[fmt.Sprintf("POST %d %s %s", code, out, det)]++
		code, _, out, det = call(client, http.MethodGet, r.p.URL+"/callout/shared/fast", tokenB, "", false)
		bGot[fmt.Sprintf("GET %d %s %s", code, out, det)]++
	}
	after := endpointState(t, client, r.p, r.admin, "shared")
	t.Logf("org-a alone: %v; endpoint breaker %s, partitions %+v; after the reload adding org-b: org-b %v; endpoint breaker %s",
		aCodes, ep.Breaker, ep.Partitions, bGot, after.Breaker)
	if bGot["POST 200 success "] != 5 || bGot["GET 200 success "] != 5 {
		t.Errorf("org-b, added after org-a alone opened the endpoint's breaker: %v; want 5 writes and 5 reads 200 success "+
			"(one organisation's failures never hold another's callouts)", bGot)
	}
}
