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
	redisURL := proctest.StartRedis(t, false).URL
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		handle(r)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	adminToken, admin := adminTokenFile(t)
	cfg := proctest.Config{RedisURL: redisURL, Issuers: []string{orgA, orgB},
		Sections: admin + "limits:\n  body_read_timeout: 30s\n" + extraLimits + "\n",
		Endpoints: []string{proctest.Endpoint("healthy", up.URL, proctest.Loopback),
			proctest.Endpoint("shared", up.URL, proctest.Loopback)}}.YAML()
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
			c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
			if err != nil {
				unsent.Add(1)
				sent.Done()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
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
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}}
	// send sends token: i < 0 a read of the admin API, an even i an
	// admin write (audit-logged), an odd i a console login.
	send := func(i int, token string) (int, string) {
		var req *http.Request
		switch {
		case i < 0:
			req, _ = http.NewRequest(http.MethodGet, p.AdminURL+"/admin/v1/endpoints", nil)
			req.Header.Set("Authorization", "Bearer "+token)
		case i%2 == 0:
			req, _ = http.NewRequest(http.MethodPost, p.AdminURL+"/admin/v1/endpoints/shared/enable", nil)
			req.Header.Set("Authorization", "Bearer "+token)
		default:
			form := "nonce=n" + strconv.Itoa(i) + "&token=" + token
			req, _ = http.NewRequest(http.MethodPost, p.AdminURL+"/console/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", "callout_console_login=n"+strconv.Itoa(i))
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
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
