//go:build hostile

package hostile

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// slowUpstreamProxy is tenantProxy with an upstream whose /hang path
// answers 200 after hold, counting the requests it received per
// Idempotency-Key (reads: per path).
func slowUpstreamProxy(t *testing.T, extraLimits string, hold time.Duration) (*proctest.Proxy, func(string) int) {
	var mu sync.Mutex
	hits := map[string]int{}
	p, _ := tenantProxyWith(t, extraLimits, func(r *http.Request) {
		k := r.Header.Get("Idempotency-Key")
		if k == "" {
			k = r.URL.Path
		}
		mu.Lock()
		hits[k]++
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/hang") {
			time.Sleep(hold)
		}
	})
	return p, func(k string) int { mu.Lock(); defer mu.Unlock(); return hits[k] }
}

// keepAliveRun sends n requests (req(i): a whole request), 250 ms apart,
// each on the keep-alive connection the previous one was answered on, as
// an HTTP client with a connection pool does (a new connection only after
// the proxy closed one), and counts the answers by "status outcome"
// (Callout-Outcome), "new connection" for each connection opened, and
// "lost on a kept-alive connection" for a request whose connection was
// closed under it.
func keepAliveRun(addr string, n int, req func(i int) string) map[string]int {
	results := map[string]int{}
	var c net.Conn
	var br *bufio.Reader
	for i := range n {
		time.Sleep(250 * time.Millisecond)
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
				results["dial: "+err.Error()]++
				continue
			}
			br = bufio.NewReader(c)
			results["new connection"]++
		}
		_, err := io.WriteString(c, req(i))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			results["lost on a kept-alive connection"]++
			c.Close()
			c = nil
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		results[strconv.Itoa(resp.StatusCode)+" "+resp.Header.Get("Callout-Outcome")]++
		if resp.Close {
			c.Close()
			c = nil
		}
	}
	if c != nil {
		c.Close()
	}
	return results
}

// rawAnswer reads one response from c within d: "status problem" or the
// read error.
func rawAnswer(c net.Conn, d time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "no answer: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strconv.Itoa(resp.StatusCode) + " " + resp.Header.Get("Callout-Problem") + " " + resp.Header.Get("Callout-Outcome") +
		" " + string(b)
}

// TestHostileConnectionShareKeepAlive: org-a holds every
// connection with trickling uploads and reconnects as in
// TestHostileConnectionShare; org-b sends 20 writes, 250 ms apart, each on
// the keep-alive connection its previous write was answered on (as an
// HTTP client with a connection pool does; a new connection only after the
// proxy closed one). The share promises org-b's writes do not fail; the
// listener closes the oldest idle keep-alive connection first while org-a
// is over its share, and org-b's are the only idle ones.
func TestHostileConnectionShareKeepAlive(t *testing.T) {
	const conns, attackers = 256, 300
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	trickleStorm(t, p, attackers, conns, true, func(i, n int) string {
		return "POST /callout/shared/upload HTTP/1.1\r\nHost: x\r\nAuthorization: " + tokenA +
			"\r\nIdempotency-Key: ka-" + strconv.Itoa(i) + "-" + strconv.Itoa(n) + "\r\nContent-Length: 1048576\r\n\r\n"
	}, func(*http.Response) {})
	results := keepAliveRun(p.Addr, 20, func(i int) string {
		return keyedWrite("/callout/shared/b", tokenB, "kb-"+strconv.Itoa(i))
	})
	cuts := p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`)
	evicted := p.Metric(t, `callout_listener_evictions_total{listener="callout"}`)
	t.Logf("org-b's 20 keep-alive writes: %v; share cuts %.0f, evictions %.0f", results, cuts, evicted)
	if results["200 success"] != 20 {
		t.Errorf("org-b's keep-alive writes while org-a is over its share: %v, want 20 × 200 success", results)
	}
}

// TestHostileConnectionShareUnverified: an attacker with no token
// holds the connections with requests that never reach a token check —
// POST /healthz promising a 200 KB body it trickles (the probe answers at
// once; net/http then reads the rest of the body to keep the connection
// alive, which counts toward the unverified group), and Expect:
// 100-continue uploads of org-a that never send their body — reconnecting
// whenever one is closed. Org-b's 5 writes on new connections must be
// answered 200 within 10 s.
func TestHostileConnectionShareUnverified(t *testing.T) {
	const conns, attackers = 256, 300
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	for _, kind := range []string{"healthz-body", "expect-continue"} {
		t.Run(kind, func(t *testing.T) {
			full := trickleStorm(t, p, attackers, conns, kind == "healthz-body", func(i, n int) string {
				if kind == "expect-continue" {
					return "POST /callout/shared/e HTTP/1.1\r\nHost: x\r\nAuthorization: " + tokenA +
						"\r\nIdempotency-Key: e-" + strconv.Itoa(i) + "-" + strconv.Itoa(n) +
						"\r\nExpect: 100-continue\r\nContent-Length: 1048576\r\n\r\n"
				}
				return "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n"
			}, nil)
			results := map[string]int{}
			var slowest time.Duration
			for i := range 5 {
				time.Sleep(time.Second)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
				start := time.Now()
				code, _, outcome, detail := call(c, http.MethodPost, p.URL+"/callout/shared/b", tokenB, kind+"-b-"+strconv.Itoa(i), false)
				slowest = max(slowest, time.Since(start))
				results[strconv.Itoa(code)+" "+outcome+" "+detail]++
			}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
			hz := "error"
			if resp, err := hc.Get(p.URL + "/healthz"); err == nil {
				hz = resp.Status
				resp.Body.Close()
			}
			t.Logf("%s: full %v; org-b's 5 writes %v, slowest %s; /healthz %s; share cuts %.0f, evictions %.0f", kind, full,
				results, slowest.Round(time.Millisecond), hz,
				p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`),
				p.Metric(t, `callout_listener_evictions_total{listener="callout"}`))
			if results["200 success "] != 5 {
				t.Errorf("org-b's writes: %v, want 5 × 200 success", results)
			}
		})
	}
}

// TestHostileConnectionShareSilentStorm: an attacker with no token
// and 300 workers opens connections that send half a header, reconnecting
// as soon as one is closed (each new one closes the oldest past its 500 ms
// grace). Org-b's 20 writes, sent at once, each on a new connection, must
// all be answered 200 within 10 s: none of them is cut on its way in (in
// the moment between its header and its token check it is in the
// unverified group, which the storm keeps over its share).
func TestHostileConnectionShareSilentStorm(t *testing.T) {
	const conns = 256
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	tokenB := bearer(t, orgB)
	// the storm fills the cap and keeps reconnecting: whether it is full
	// says nothing here (each new one closes the oldest past its grace)
	trickleStorm(t, p, 300, conns, false, func(int, int) string {
		return "POST /callout/shared/x HTTP/1.1\r\nHost: x\r\n"
	}, nil)
	time.Sleep(2 * time.Second)
	var mu sync.Mutex
	results := map[string]int{}
	var slowest time.Duration
	parallel(20, 20, func(i int) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		start := time.Now()
		code, _, outcome, detail := call(c, http.MethodPost, p.URL+"/callout/shared/b", tokenB, "storm-b-"+strconv.Itoa(i), false)
		mu.Lock()
		defer mu.Unlock()
		slowest = max(slowest, time.Since(start))
		results[strconv.Itoa(code)+" "+outcome+" "+detail]++
	})
	t.Logf("org-b's 20 writes %v, slowest %s; open %.0f, evictions %.0f, cuts %.0f", results, slowest.Round(time.Millisecond),
		p.Metric(t, `callout_listener_connections{listener="callout"}`),
		p.Metric(t, `callout_listener_evictions_total{listener="callout"}`),
		p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`))
	if results["200 success "] != 20 {
		t.Errorf("org-b's writes during a tokenless storm of half headers: %v, want 20 × 200 success", results)
	}
}

// TestHostileConnectionShareCutsInFlight: org-a, a legitimate
// organisation, has one synchronous request (a keyed write, or a read)
// whose upstream takes 3 s (its body fully sent: it is past any trickle)
// and then a burst of 7 uploads still sending their bodies, filling
// max_connections 8 (share 8/3 = 2). Org-b's write needs room: the listener
// cuts one of org-a's uploads still arriving (503 overloaded, nothing
// stored), never the older request at its upstream, which gets its answer
// and reaches its upstream once.
func TestHostileConnectionShareCutsInFlight(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			p, hits := slowUpstreamProxy(t, "  max_connections: 8", 3*time.Second)
			tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
			key := "w1-" + method
			first, err := net.Dial("tcp", p.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			head := method + " /callout/shared/hang HTTP/1.1\r\nHost: x\r\nAuthorization: " + tokenA + "\r\n"
			if method == http.MethodPost {
				head += "Idempotency-Key: " + key + "\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"n\":1}"
			} else {
				head += "\r\n"
				key = "/hang"
			}
			_, _ = io.WriteString(first, head)
			for end := time.Now().Add(5 * time.Second); hits(key) == 0 && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			if hits(key) != 1 {
				t.Fatalf("org-a's first %s never reached the upstream", method)
			}
			var uploads []net.Conn
			for i := range 7 {
				c, err := net.Dial("tcp", p.Addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				uploads = append(uploads, c)
				_, _ = io.WriteString(c, "POST /callout/shared/up HTTP/1.1\r\nHost: x\r\nAuthorization: "+tokenA+
					"\r\nIdempotency-Key: up-"+method+strconv.Itoa(i)+"\r\nContent-Length: 1048576\r\n\r\nxx")
			}
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if p.Metric(t, `callout_listener_connections{listener="callout"}`) >= 8 {
					break
				}
			}
			got := make(chan string, 1)
			go func() { got <- rawAnswer(first, 8*time.Second) }()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
			code, _, outcome, detail := call(c, http.MethodPost, p.URL+"/callout/shared/b", tokenB, "b-"+method, false)
			firstGot := <-got // after the upstream's hold
			upAnswers := []string{}
			for _, u := range uploads {
				upAnswers = append(upAnswers, rawAnswer(u, 100*time.Millisecond)[:20])
			}
			retry := "-"
			if method == http.MethodPost {
				rc, rid, rout, rdet := call(c, http.MethodPost, p.URL+"/callout/shared/hang", tokenA, key, false)
				retry = strconv.Itoa(rc) + " " + rid + " " + rout + " " + rdet
			}
			cuts := p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`)
			t.Logf("org-b's write: %d %s %s; cuts %.0f\norg-a's first %s (at its upstream when cut): %q\n"+
				"org-a's uploads: %q\norg-a's retry with the same key: %s; upstream hits for it: %d",
				code, outcome, detail, cuts, method, firstGot, upAnswers, retry, hits(key))
			if code != 200 {
				t.Errorf("org-b's write: %d %s %s, want 200", code, outcome, detail)
			}
			if !strings.HasPrefix(firstGot, "200") {
				t.Errorf("org-a's %s at its upstream: %q; want its answer, 200 (an upload still arriving is cut first)",
					method, firstGot)
			}
			if !slices.ContainsFunc(upAnswers, func(a string) bool { return strings.HasPrefix(a, "503 overloaded") }) {
				t.Errorf("org-a's uploads: %q; want one cut with 503 overloaded to make org-b room", upAnswers)
			}
			if hits(key) != 1 {
				t.Errorf("upstream hits for org-a's %s: %d, want 1", key, hits(key))
			}
		})
	}
}

// TestHostileConnectionShareSilentCutsOthers: org-b runs 10 uploads at
// once (a genuine burst: the cap is 16, its share 16/3 = 5); without
// anybody else the cap is never reached and nothing is cut. An attacker
// with no token then opens 40 workers' connections that send half a
// request header and nothing more, reconnecting whenever one is closed.
// Those count toward the unverified group, fewer than org-b's at the cap
// (org-b is the group most over its share), yet the share closes them
// (past their 500 ms grace: a new connection waits for it), never one of
// org-b's uploads.
func TestHostileConnectionShareSilentCutsOthers(t *testing.T) {
	const conns = 16
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	tokenB := bearer(t, orgB)
	var mu sync.Mutex
	bGot := map[string]int{}
	var bConns []net.Conn
	var bwg sync.WaitGroup
	const burst = 10
	for i := range burst {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		bConns = append(bConns, c)
		_, _ = io.WriteString(c, "POST /callout/shared/up HTTP/1.1\r\nHost: x\r\nAuthorization: "+tokenB+
			"\r\nIdempotency-Key: bu-"+strconv.Itoa(i)+"\r\nContent-Length: 1048576\r\n\r\nxx")
		bwg.Go(func() {
			a := rawAnswer(c, 6*time.Second)
			if len(a) > 24 {
				a = a[:24]
			}
			mu.Lock()
			bGot[a]++
			mu.Unlock()
		})
	}
	time.Sleep(500 * time.Millisecond)
	before := p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`)
	stopAttack := storm(t, p, 40, false, func(int, int) string { return "POST /callout/shared/x HTTP/1.1\r\nHost: x\r\n" }, nil)
	bwg.Wait()
	stopAttack()
	for _, c := range bConns {
		c.Close()
	}
	cuts := p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`)
	t.Logf("org-b's %d uploads (cap %d, share %d) before the attack: %.0f cut; with a tokenless attacker's half headers: %v, %.0f cut",
		burst, conns, conns/3, before, bGot, cuts-before)
	if cuts > before {
		t.Errorf("org-b's uploads cut by a tokenless attacker's silent connections: %v", bGot)
	}
}
