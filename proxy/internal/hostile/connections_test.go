//go:build hostile

package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestHostileConnectionShare: org-a holds every connection of the callout
// listener (limits.max_connections, 256 here) with uploads that carry a
// valid token, promise 1 MiB and trickle one byte every 2 s, and opens a
// new one whenever one is answered. That holds some 33 KiB each, 8 MiB in
// all: far below half the memory budget, so the memory share never
// applies. Its share of the connections (limits.max_connections_per_issuer,
// by default 256 / 3 = 85 with two issuers) does: at the cap, each new
// connection cuts one of org-a's trickling uploads (503 overloaded naming
// the share). Org-b's five writes on new connections, one a second, must be
// answered 200 success within Apex's 10 s callout timeout each, and the monitor's
// /healthz on the callout listener (the liveness probe's port) and org-b's
// small callouts answer throughout (contract §10: no single caller can
// exhaust the proxy for the others).
func TestHostileConnectionShare(t *testing.T) {
	const conns, attackers = 256, 300
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	w := watchProxy(t, p)
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	var (
		answered atomic.Int64
		mu       sync.Mutex
		aGot     = map[string]int{} // org-a's answers: "status problem"
	)
	full := trickleStorm(t, p, attackers, conns, true, func(i, n int) string {
		return "POST /callout/shared/upload HTTP/1.1\r\nHost: x\r\nAuthorization: " + tokenA +
			"\r\nIdempotency-Key: a-" + strconv.Itoa(i) + "-" + strconv.Itoa(n) + "\r\nContent-Length: 1048576\r\n\r\n"
	}, func(resp *http.Response) {
		answered.Add(1)
		mu.Lock()
		aGot[strconv.Itoa(resp.StatusCode)+" "+resp.Header.Get("Callout-Problem")]++
		mu.Unlock()
	})
	if !full {
		t.Fatalf("org-a's %d uploads never filled the %d connections", attackers, conns)
	}
	held := p.Metric(t, "callout_inflight_bytes")
	results := map[string]int{}
	var slowest time.Duration
	for i := range 5 {
		if i > 0 { // spread over 4 s, two of org-a's trickle periods
			time.Sleep(time.Second)
		}
		// Apex's default callout timeout: a caller waiting longer has given up.
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		start := time.Now()
		code, _, outcome, detail := call(c, http.MethodPost, p.URL+"/callout/shared/b", tokenB, "b-"+strconv.Itoa(i), false)
		slowest = max(slowest, time.Since(start))
		if code == 0 {
			detail = "no answer within 10 s"
		}
		results[fmt.Sprintf("%d %s %s", code, outcome, detail)]++
	}
	w.finish(t)
	cuts := p.Metric(t, `callout_listener_share_cuts_total{listener="callout"}`)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("org-a: %d connections open, %.0f bytes in flight, %d of its uploads answered (%v), %.0f cut for its share; "+
		"org-b's 5 writes: %v, the slowest in %s", conns, held, answered.Load(), aGot, cuts, results, slowest.Round(time.Millisecond))
	if results["200 success "] != 5 {
		t.Errorf("org-b's writes while org-a holds the connections: %v, want 5 × 200 success", results)
	}
	if cuts < 1 || aGot["503 overloaded"] < 1 {
		t.Errorf("org-a's uploads: %.0f cut, answers %v; want its requests over the share cut with 503 overloaded", cuts, aGot)
	}
}

// trickleStorm starts a storm of workers attackers writing head and
// reports whether the listener reached conns open connections within
// 20 s. The attackers run until the test ends.
func trickleStorm(t *testing.T, p *proctest.Proxy, workers, conns int, trickle bool, head func(worker, n int) string,
	onAnswer func(*http.Response)) bool {
	storm(t, p, workers, trickle, head, onAnswer)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if p.Metric(t, `callout_listener_connections{listener="callout"}`) >= float64(conns) {
			return true
		}
	}
	return false
}

// storm starts workers attackers that each, until stopped, dial p's
// callout listener, write head(worker, n) (its n-th connection), then one
// body byte every 2 s (with trickle) until the proxy answers — onAnswer,
// when set, gets the answer — or closes the connection (onAnswer nil: the
// worker reads nothing but the close, so it holds on after an answer), and
// dial again. It returns the function that stops the attackers and waits
// for them; it runs when the test ends too.
func storm(t *testing.T, p *proctest.Proxy, workers int, trickle bool, head func(worker, n int) string,
	onAnswer func(*http.Response)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					if onAnswer == nil {
						_, _ = io.Copy(io.Discard, c) // until the proxy closes it
						return
					}
					if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
						onAnswer(resp)
						resp.Body.Close()
					}
				}()
				_, _ = io.WriteString(c, head(i, n))
			wait:
				for {
					select {
					case <-closed:
						break wait
					case <-done:
						break wait
					case <-time.After(2 * time.Second):
						if trickle {
							_, _ = io.WriteString(c, "x")
						}
					}
				}
				c.Close()
			}
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}
