//go:build hostile

package hostile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// The memory-share attack's sizes: org-a's stalled uploads, org-b's write.
const (
	stalledUploads = 400
	stalledBytes   = 960 << 10
	orgBWrite      = 1 << 20
	// fairShare is limits.max_inflight_bytes_per_issuer by default with the
	// two issuers of the suite: half the budget.
	fairShare = budget / 2
)

// tenantProxy starts Redis, an upstream that reads every body and answers
// 200, and a proxy with orgA and orgB, endpoints "healthy" (the monitor's)
// and "shared", default limits but body_read_timeout 30s (org-a's stalled
// uploads must outlast the attack) and the extra limits lines given, and
// an admin token of scope read in a file. It returns the proxy and the
// admin token's value.
func tenantProxy(t *testing.T, extraLimits string) (*proctest.Proxy, string) {
	return tenantProxyWith(t, extraLimits, func(*http.Request) {})
}

// tenantProxyWith is tenantProxy with an upstream that runs handle on
// each request once it has read its body, before it answers 200.
func tenantProxyWith(t *testing.T, extraLimits string, handle func(*http.Request)) (*proctest.Proxy, string) {
	return tenantProxyServing(t, extraLimits, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		handle(r)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
}

// tenantProxyServing starts Redis, an upstream serving up and a proxy of
// orgA and orgB with endpoints healthy, shared and the more named, all on
// that upstream, body_read_timeout 30s and the extra limits lines given; it
// returns the proxy and an admin token of scope read.
func tenantProxyServing(t *testing.T, extraLimits string, up http.HandlerFunc, more ...string) (*proctest.Proxy, string) {
	redisURL := proctest.StartRedis(t, false).URL
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	adminToken, admin := adminTokenFile(t)
	eps := []string{proctest.Endpoint("healthy", srv.URL, proctest.Loopback),
		proctest.Endpoint("shared", srv.URL, proctest.Loopback)}
	for _, name := range more {
		eps = append(eps, proctest.Endpoint(name, srv.URL, proctest.Loopback))
	}
	cfg := proctest.Config{RedisURL: redisURL, Issuers: []string{orgA, orgB},
		Sections: admin + "limits:\n  body_read_timeout: 30s\n" + extraLimits + "\n", Endpoints: eps}.YAML()
	return proctest.StartProxy(t, proxyBinary, cfg, proxyOptions()), adminToken
}

// TestHostileMemoryShare: org-a opens 400 chunked uploads to the shared
// endpoint, sends 960 KiB of each (each holds a 1 MiB buffer) and stalls.
// Its fair share (half the 256 MiB budget) stops it near 128 uploads: the
// rest are refused 503 overloaded naming the share; org-b's 1 MiB write to
// the same endpoint is then answered 200 while org-a's uploads still hang,
// and the monitor's org-b callouts answer within 1 s throughout.
func TestHostileMemoryShare(t *testing.T) {
	p, _ := tenantProxy(t, "")
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	w := watchProxy(t, p)

	var (
		sent     sync.WaitGroup // each upload: 960 KiB sent, or refused
		mu       sync.Mutex
		statuses = map[int]int{}
		details  = map[string]int{}
		conns    []net.Conn
		unsent   atomic.Int64
	)
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 16<<10, strings.Repeat("a", 16<<10))
	for i := range stalledUploads {
		sent.Add(1)
		go func() {
			c, err := dial(p.Addr, 60*time.Second)
			if err != nil {
				unsent.Add(1)
				sent.Done()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			answered := make(chan struct{})
			go func() {
				defer close(answered)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return // closed by the test at the end, still stalled
				}
				var doc struct{ Detail string }
				_ = json.NewDecoder(resp.Body).Decode(&doc)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				details[doc.Detail]++
				mu.Unlock()
			}()
			head := "PUT /callout/shared/upload-" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + tokenA +
				"\r\nIdempotency-Key: upload-" + strconv.Itoa(i) + "\r\nTransfer-Encoding: chunked\r\n\r\n"
			_, err = io.WriteString(c, head)
			for n := 0; err == nil && n < stalledBytes; n += 16 << 10 {
				_, err = io.WriteString(c, chunk)
			}
			if err != nil { // refused: the proxy answered and closed
				<-answered
			}
			sent.Done() // then stall: no last chunk
		}()
	}
	sent.Wait()
	// The refused uploads are answered once overload_wait (1 s) has run
	// out; wait until the in-flight bytes settle.
	var inflight float64
	for prev, end := -1.0, time.Now().Add(20*time.Second); time.Now().Before(end); prev = inflight {
		time.Sleep(500 * time.Millisecond)
		if inflight = p.Metric(t, "callout_inflight_bytes"); inflight == prev {
			break
		}
	}

	body := strings.Repeat("b", orgBWrite)
	req, _ := http.NewRequest(http.MethodPut, p.URL+"/callout/shared/org-b", strings.NewReader(body))
	req.Header.Set("Authorization", tokenB)
	req.Header.Set("Idempotency-Key", "org-b-1")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	bStatus := 0
	if resp, err := client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		bStatus = resp.StatusCode
	} else {
		t.Errorf("org-b's 1 MiB write: %v", err)
	}
	shareRefused := p.Metric(t, "callout_overloaded_share_total")

	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	refused, shareDetail := statuses[http.StatusServiceUnavailable], 0
	for d, n := range details {
		if strings.Contains(d, "limits.max_inflight_bytes_per_issuer: "+strconv.Itoa(fairShare)+" bytes") {
			shareDetail += n
		}
	}
	st := fmt.Sprint(statuses)
	mu.Unlock()
	w.finish(t)
	stalled := stalledUploads - int(unsent.Load()) - refused
	t.Logf("org-a: %d uploads of 960 KiB, %d refused 503 (%d naming the share of %d MiB), %d stalled holding "+
		"%.0f MiB in flight, %d dials failed; statuses %s; share refusals %v; org-b's 1 MiB write: %d",
		stalledUploads, refused, shareDetail, fairShare>>20, stalled, inflight/(1<<20), unsent.Load(), st,
		shareRefused, bStatus)
	if bStatus != http.StatusOK {
		t.Errorf("org-b's 1 MiB write answered %d while org-a stalls, want 200", bStatus)
	}
	// The proxy counts its share refusals (callout_overloaded_share_total);
	// every refusal the attacker read must name the share.
	if shareRefused < stalledUploads/2 || shareDetail != refused || refused == 0 {
		t.Errorf("org-a: %v uploads refused for the share, %d answers read, %d naming it; want most of the %d "+
			"refused, every answer naming the share", shareRefused, refused, shareDetail, stalledUploads)
	}
	if inflight > fairShare+4<<20 {
		t.Errorf("%.0f MiB in flight for org-a, past its share of %d MiB", inflight/(1<<20), fairShare>>20)
	}
}

// TestHostileLoginFlood: 500 wrong admin tokens from one address (250
// admin API writes, 250 console logins), 32 at a time, with
// admin_login_failures 10 in an admin_login_window of 4s: 10 are answered
// 401, the rest 429 with Retry-After; the audit log holds a handful of
// lines for them (the first, and one with the window's count), not 500;
// the right token is accepted during the throttle and after the window.
func TestHostileLoginFlood(t *testing.T) {
	const window = 4 * time.Second
	p, adminToken := tenantProxy(t, "  admin_login_failures: 10\n  admin_login_window: 4s")
	w := watchProxy(t, p)
	send := func(i int, token string) (int, string) { return loginSend(p, "", i, token) } // loginSend's kinds by i
	auditBefore := p.Count(`"msg":"audit"`)
	var mu sync.Mutex
	codes := map[int]int{}
	badRetry := 0
	start := time.Now()
	parallel(500, 32, func(i int) {
		code, retry := send(i, "wrong-"+strconv.Itoa(100000+i)+"-token-value")
		mu.Lock()
		defer mu.Unlock()
		codes[code]++
		if n, err := strconv.Atoi(retry); code == http.StatusTooManyRequests && (err != nil || n < 1 || n > 4) {
			badRetry++
		}
	})
	took := time.Since(start)
	during, _ := send(-1, adminToken)
	floodLines := p.Count(`"msg":"audit"`) - auditBefore
	time.Sleep(window - time.Since(start) + 200*time.Millisecond) // the window runs out
	after, _ := send(-1, adminToken)                              // sweeps: the window's line is written
	again, _ := send(2, "wrong-after-the-window-token")
	time.Sleep(100 * time.Millisecond) // the log line reaches the pipe
	lines := p.Count(`"msg":"audit"`) - auditBefore
	summaries := p.Count(`"result":"unauthorized_repeated"`)
	w.finish(t)
	t.Logf("500 wrong tokens in %s: statuses %v (%d 429s without a Retry-After of 1-4 s); %d audit lines "+
		"during the flood, %d in all with the window's (%d with result unauthorized_repeated); "+
		"right token during the throttle %d, after the window %d; a wrong token after it %d",
		took.Round(time.Millisecond), codes, badRetry, floodLines, lines, summaries, during, after, again)
	windows := int(took/window) + 1
	if codes[http.StatusUnauthorized] > 10*windows || codes[http.StatusTooManyRequests] < 500-10*windows ||
		codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 500 {
		t.Errorf("statuses %v over %d window(s) of 4 s, want at most %d × 401 and the rest 429", codes, windows, 10*windows)
	}
	if took < window && codes[http.StatusUnauthorized] != 10 {
		t.Errorf("%d × 401 within one window, want 10", codes[http.StatusUnauthorized])
	}
	if badRetry != 0 {
		t.Errorf("%d 429s without a Retry-After of 1 to 4 s", badRetry)
	}
	if lines > 4*windows || summaries < 1 {
		t.Errorf("%d audit lines for 500 failures in %d window(s) (%d summaries), want at most %d and a summary",
			lines, windows, summaries, 4*windows)
	}
	if during != http.StatusOK || after != http.StatusOK || again != http.StatusUnauthorized {
		t.Errorf("right token during the throttle %d, after it %d; wrong after it %d; want 200, 200, 401",
			during, after, again)
	}
}

// memoryProxy starts Redis, an upstream and a proxy with orgA and orgB,
// endpoints "healthy", "shared" and "shared2", body_read_timeout 30s and
// the extra limits lines given; it returns the proxy and an admin token of
// scope read. The upstream answers {"ok":true} at once, but on a path
// ending in /medium 2 MiB (more than a small callout's 64 KiB: it may not
// use the budget's last eighth), and on one ending in /big a response
// announcing 12,000,000 bytes of which it sends 600 KiB and then nothing
// until the request ends (the proxy then reserves the announced length).
func memoryProxy(t *testing.T, extraLimits string) (*proctest.Proxy, string) {
	stop := make(chan struct{})
	p, adminToken := tenantProxyServing(t, extraLimits, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/medium"):
			_, _ = w.Write(make([]byte, 2<<20))
		case strings.HasSuffix(r.URL.Path, "/big"):
			w.Header().Set("Content-Length", "12000000")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(make([]byte, 600<<10))
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	}, "shared2")
	t.Cleanup(func() { close(stop) }) // first: the stalled answers end, so the proxy stops at once
	return p, adminToken
}

// TestHostileMemoryShareDispatchedResponses: the dispatcher's attempts
// buffer their answers toward their callout's organisation, under its
// share like its requests (docs/limits.md "The memory share"). Org-a
// queues 60 respond-async writes, alternately to two endpoints, whose
// upstream announces a 12,000,000-byte answer, sends 600 KiB and stalls
// until the attempt gives up: each attempt reserves the announced length.
// Org-a's attempts stop at its fair share (128 MiB of the 256 MiB budget)
// — the rest are refused for the share and retried later — and org-b's
// writes of 1 MiB and of 12 MiB (max_request_bytes) are all answered 200.
func TestHostileMemoryShareDispatchedResponses(t *testing.T) {
	p, _ := memoryProxy(t, "")
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}
	codes := map[int]int{}
	var mu sync.Mutex
	parallel(60, 16, func(i int) {
		ep := []string{"shared", "shared2"}[i%2]
		code, _, _, _ := call(client, http.MethodPost, p.URL+"/callout/"+ep+"/big", tokenA, "big-"+strconv.Itoa(i), true)
		mu.Lock()
		codes[code]++
		mu.Unlock()
	})
	// Until org-a's attempts hold within one answer of its share, then 1 s
	// more: the most in flight is all org-a's.
	var inflight, peak float64
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end) && inflight < fairShare-12<<20; time.Sleep(200 * time.Millisecond) {
		inflight = p.Metric(t, "callout_inflight_bytes")
		peak = max(peak, inflight)
	}
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		peak = max(peak, p.Metric(t, "callout_inflight_bytes"))
	}
	shareRefused := p.Metric(t, "callout_overloaded_share_total")

	bGot := map[string]int{}
	for i, size := range []int{1 << 20, 1 << 20, 1 << 20, 12 << 20, 12 << 20, 12 << 20} {
		req, _ := http.NewRequest(http.MethodPut, p.URL+"/callout/healthy/org-b", strings.NewReader(strings.Repeat("b", size)))
		req.Header.Set("Authorization", tokenB)
		req.Header.Set("Idempotency-Key", "mem-b-"+strconv.Itoa(i))
		got := ""
		if resp, err := newMemoryClient().Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got = strconv.Itoa(resp.StatusCode) + " " + resp.Header.Get("Callout-Outcome")
		} else {
			got = err.Error()
		}
		bGot[strconv.Itoa(size>>20)+" MiB: "+got]++
	}
	t.Logf("org-a's 60 async writes to a stalling 12 MB answer: %v; in flight at most %.0f MiB (budget %d, org-a's "+
		"share %d), %.0f attempts refused for the share; org-b's writes: %v",
		codes, peak/(1<<20), budget>>20, fairShare>>20, shareRefused, bGot)
	if codes[http.StatusAccepted] != 60 {
		t.Errorf("org-a's async writes: %v, want 60 × 202", codes)
	}
	if peak > fairShare+2<<20 || shareRefused == 0 {
		t.Errorf("org-a's dispatched attempts held %.0f MiB with %.0f refused for the share; want at most its share "+
			"of %d MiB, the rest refused", peak/(1<<20), shareRefused, fairShare>>20)
	}
	if bGot["1 MiB: 200 success"] != 3 || bGot["12 MiB: 200 success"] != 3 {
		t.Errorf("org-b's writes while org-a's dispatched attempts hold %.0f MiB: %v, want every one 200 success",
			peak/(1<<20), bGot)
	}
}

// newMemoryClient is a client of one request per connection.
func newMemoryClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
}

// TestHostileMemoryPressureNeverOpensAnotherPartition: an answer the proxy
// cannot buffer because its memory budget is full is the proxy's limit,
// not the upstream's failure (reason overloaded): the callout is retried,
// and its breaker partition is not told (contract §6: one organisation's
// use of the proxy never holds another's callouts). The budget is 64 MiB,
// and the share as large (several organisations at their shares can fill
// a budget too): org-a's 60 uploads promising 1 MiB each, 600 KiB sent,
// then stalled, fill the part of the budget larger requests may use (7/8,
// 56 MiB). Org-b's 30 respond-async writes to its own healthy endpoint are
// accepted (small requests), but none of their 2 MiB answers can be
// buffered; its partition must stay closed (under the 20 failures that
// open it), its callouts scheduled for a retry with error overloaded — none
// held — and its small synchronous write answered 200.
func TestHostileMemoryPressureNeverOpensAnotherPartition(t *testing.T) {
	p, adminToken := memoryProxy(t, "  max_inflight_bytes: 67108864\n  max_inflight_bytes_per_issuer: 67108864\n")
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	part := strings.Repeat("a", 600<<10)
	parallel(60, 20, func(i int) {
		c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		_, _ = io.WriteString(c, "PUT /callout/shared/up-"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: x\r\nAuthorization: "+tokenA+
			"\r\nIdempotency-Key: up-"+strconv.Itoa(i)+"\r\nContent-Length: 1048576\r\n\r\n"+part)
	})
	// The uploads past the budget are refused once overload_wait (1 s)
	// has run out; wait until the in-flight bytes settle.
	var full float64
	for prev, end := -1.0, time.Now().Add(10*time.Second); time.Now().Before(end); prev = full {
		time.Sleep(500 * time.Millisecond)
		if full = p.Metric(t, "callout_inflight_bytes"); full == prev && full > 50<<20 {
			break
		}
	}

	var ids []string
	accepted := map[string]int{}
	for i := range 30 {
		code, id, _, detail := call(client, http.MethodPost, p.URL+"/callout/healthy/medium", tokenB, "mb-"+strconv.Itoa(i), true)
		accepted[strconv.Itoa(code)+" "+detail]++
		if code == http.StatusAccepted {
			ids = append(ids, id)
		}
	}
	// Every accepted callout has had its first attempt (or 10 s passed).
	states, errs := map[string]int{}, map[string]int{}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		clear(states)
		clear(errs)
		tried := 0
		for _, id := range ids {
			d := statusDoc(t, client, p, tokenB, id)
			states[string(d.State)]++
			if len(d.Attempts) > 0 {
				errs[d.Attempts[0].Error]++
				tried++
			}
		}
		if tried == len(ids) {
			break
		}
	}
	pt, _ := partitionOf(endpointState(t, client, p, adminToken, "healthy"), orgB)
	smallB, _, smallOut, smallDetail := call(newMemoryClient(), http.MethodPost, p.URL+"/callout/healthy/b", tokenB, "mb-sync", false)
	t.Logf("in flight %.0f MiB of 64 with org-a's stalled uploads; org-b's 30 async writes: %v, now %v, first "+
		"attempts' errors %v; its partition of healthy %+v; org-b's small sync write %d %s %s",
		full/(1<<20), accepted, states, errs, pt, smallB, smallOut, smallDetail)
	if full < 50<<20 {
		t.Fatalf("org-a's uploads hold only %.0f MiB: the case did not fill the budget", full/(1<<20))
	}
	if len(ids) != 30 {
		t.Errorf("org-b's async writes: %v, want 30 × 202", accepted)
	}
	if errs[policy.ReasonOverloaded] != len(ids) {
		t.Errorf("org-b's first attempts failed with %v, want every one %q (the answer not buffered)", errs,
			policy.ReasonOverloaded)
	}
	if pt.Breaker == policy.BreakerOpen || pt.ConsecutiveFailures != 0 || states[string(policy.Held)] != 0 {
		t.Errorf("org-b's partition %+v, callouts %v: the proxy's own memory pressure was told to its breaker; want "+
			"closed, no failures, none held", pt, states)
	}
	if smallB != http.StatusOK {
		t.Errorf("org-b's small write %d %s %s while the budget is full, want 200", smallB, smallOut, smallDetail)
	}
}
