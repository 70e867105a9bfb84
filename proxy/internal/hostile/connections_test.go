//go:build hostile

package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHostileConnectionShare: org-a holds every connection of the callout
// listener (limits.max_connections, 256 here) with uploads that carry a
// valid token, promise 1 MiB and trickle one byte every 2 s, and opens a
// new one whenever one is answered. That holds some 33 KiB each, 8 MiB in
// all: far below half the memory budget, so the memory share never
// applies, and a connection running a request is never evicted. Org-b's
// five writes on new connections (5 s each, as an Apex callout waits) must
// still be answered 200 success (contract §10: no single caller can
// exhaust the proxy for the others).
//
// It fails at the time of writing (org-b's writes
// time out, or are reset when org-a's next connection evicts theirs), so
// it runs only with CALLOUT_HOSTILE_GAPS=1 until the listener gives each
// organisation a share of its connections.
func TestHostileConnectionShare(t *testing.T) {
	if os.Getenv("CALLOUT_HOSTILE_GAPS") != "1" {
		t.Skip("known gap: one organisation's trickling uploads hold every connection; CALLOUT_HOSTILE_GAPS=1 runs it")
	}
	const conns, attackers = 256, 300
	p, _ := tenantProxy(t, "  max_connections: "+strconv.Itoa(conns))
	w := watchProxy(t, p)
	tokenA, tokenB := bearer(t, orgA), bearer(t, orgB)
	stop := make(chan struct{})
	var answered atomic.Int64
	var wg sync.WaitGroup
	for i := range attackers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				got := make(chan struct{})
				go func() {
					defer close(got)
					if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
						resp.Body.Close()
					}
				}()
				_, _ = io.WriteString(c, "POST /callout/shared/upload HTTP/1.1\r\nHost: x\r\nAuthorization: "+tokenA+
					"\r\nIdempotency-Key: a-"+strconv.Itoa(i)+"-"+strconv.Itoa(n)+"\r\nContent-Length: 1048576\r\n\r\n")
			trickle:
				for {
					select {
					case <-got:
						answered.Add(1)
						break trickle
					case <-stop:
						break trickle
					case <-time.After(2 * time.Second):
						_, _ = io.WriteString(c, "x")
					}
				}
				c.Close()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if p.Metric(t, `callout_listener_connections{listener="callout"}`) >= conns {
			break
		}
	}
	held := p.Metric(t, "callout_inflight_bytes")
	results := map[string]int{}
	for i := range 5 {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
		code, _, outcome, detail := call(c, http.MethodPost, p.URL+"/callout/shared/b", tokenB, "b-"+strconv.Itoa(i), false)
		if code == 0 {
			detail = "no answer"
		}
		results[fmt.Sprintf("%d %s %s", code, outcome, detail)]++
	}
	w.finish(t)
	t.Logf("org-a: %d connections open, %.0f bytes in flight, %d of its uploads answered; org-b's 5 writes: %v",
		conns, held, answered.Load(), results)
	if results["200 success "] != 5 {
		t.Errorf("org-b's writes while org-a holds the connections: %v, want 5 × 200 success", results)
	}
}
