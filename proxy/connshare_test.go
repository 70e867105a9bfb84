package proxy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/limit"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestConnectionShare: on a callout listener of 2 connections with a share
// of 1 (limits.max_connections_per_issuer), clockRigIssuer's organisation
// holds both with writes whose bodies never come. The other
// organisation's write on a new connection cuts org-a's oldest: that one is
// answered 503 overloaded naming the share, Retry-After 1, Connection:
// close, nothing forwarded; the other organisation's write is forwarded and
// answered 200, and org-a's second request is not cut (contract §10).
func TestConnectionShare(t *testing.T) {
	rig := &clockRig{}
	rig.build(t, rigSpec{
		upstream: func(w http.ResponseWriter, r *http.Request) { rig.hits.Add(1) },
		issuers:  []string{shareRigIssuer},
		extra:    "limits:\n  max_connections: 2\n  max_connections_per_issuer: 1\n",
	})
	l, addr, mint := shareListener(t, rig, 2)
	var stalled []net.Conn
	for i, key := range []string{"a-1", "a-2"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "PUT /callout/api/v1/a HTTP/1.1\r\nHost: x\r\nAuthorization: "+mint(clockRigIssuer)+
			"\r\nIdempotency-Key: "+key+"\r\nContent-Length: 100\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for l.Holding(clockRigIssuer) < i+1 { // its token verified, its body awaited
			time.Sleep(time.Millisecond)
		}
		stalled = append(stalled, c)
	}

	req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/callout/api/v1/b", strings.NewReader(`{"n":1}`))
	req.Header.Set("Authorization", mint(shareRigIssuer))
	req.Header.Set("Idempotency-Key", "b-1")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the other organisation's write at the cap: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the other organisation's write at the cap: %d, want 200", resp.StatusCode)
	}

	_ = stalled[0].SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a broken test, not a timing
	cut, err := http.ReadResponse(bufio.NewReader(stalled[0]), nil)
	if err != nil {
		t.Fatalf("org-a's oldest request: no answer: %v", err)
	}
	var doc struct{ Type, Detail string }
	_ = json.NewDecoder(cut.Body).Decode(&doc)
	cut.Body.Close()
	switch {
	case cut.StatusCode != http.StatusServiceUnavailable || cut.Header.Get("Retry-After") != "1" || !cut.Close:
		t.Errorf("cut request: %d, Retry-After %q, close %v; want 503, 1, true", cut.StatusCode, cut.Header.Get("Retry-After"), cut.Close)
	case doc.Type != "urn:callout-proxy:problem:overloaded" || cut.Header.Get("Callout-Outcome") != "rejected" ||
		!strings.Contains(doc.Detail, "limits.max_connections_per_issuer: 1"):
		t.Errorf("cut request: %s %q outcome %q, want overloaded naming the share, rejected", doc.Type, doc.Detail,
			cut.Header.Get("Callout-Outcome"))
	}
	if l.Cut() != 1 || l.Holding(clockRigIssuer) != 1 {
		t.Errorf("cut %d, org-a running %d; want 1 and 1 (its second request kept)", l.Cut(), l.Holding(clockRigIssuer))
	}
	if n := rig.hits.Load(); n != 1 {
		t.Errorf("upstream hits %d, want 1 (only the other organisation's write)", n)
	}
}

// shareListener serves rig's server on a loopback limit.Listener of max
// connections with the configuration's connection share, and gives its
// address and a token minter for an issuer.
func shareListener(t *testing.T, rig *clockRig, max int) (l *limit.Listener, addr string, mint func(iss string) string) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = limit.NewListener(raw, max)
	l.SetShare(rig.srv.d.Config.Limits.MaxConnectionsPerIssuer)
	hs := &http.Server{Handler: l.Handler(rig.srv.Handler()), ConnState: l.ConnState, ConnContext: l.ConnContext,
		ReadHeaderTimeout: time.Minute}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return l, raw.Addr().String(), func(iss string) string {
		tok, err := auth.MintHS256([]byte(clockRigSecret), iss, "callout-proxy", "005000000000001AAA",
			10*time.Minute, rig.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
}

// TestConnectionShareCutsAtUpstream: when the over-share organisation's
// requests are all past their bodies (at their upstream), the oldest is
// still cut to make room, but answered, never left with a closed
// connection (contract §10): a keyed write 202 with its id as a callout in
// flight, Connection: close, its attempt going on to its answer and the
// upstream reached once; a read 503 overloaded, outcome retryable
// (it is safe to send again), its breaker not told. Cap 2, share 1.
func TestConnectionShareCutsAtUpstream(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			rig := &clockRig{}
			arrived, release := make(chan string, 4), make(chan struct{})
			var mu sync.Mutex
			hits := map[string]int{}
			rig.build(t, rigSpec{
				upstream: func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					k := r.Header.Get("Idempotency-Key") + r.URL.RawQuery
					mu.Lock()
					hits[k]++
					mu.Unlock()
					if strings.HasSuffix(r.URL.Path, "/hang") {
						arrived <- k
						select {
						case <-release:
						case <-r.Context().Done():
						}
					}
				},
				issuers: []string{shareRigIssuer},
				extra:   "limits:\n  max_connections: 2\n  max_connections_per_issuer: 1\n",
			})
			t.Cleanup(func() { close(release) })
			l, addr, mint := shareListener(t, rig, 2)
			var first net.Conn
			for i := range 2 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				head := method + " /callout/api/v1/hang?n=" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: x\r\nAuthorization: " +
					mint(clockRigIssuer) + "\r\n"
				if method == http.MethodPut {
					head += "Idempotency-Key: a-" + strconv.Itoa(i) + "\r\nContent-Length: 7\r\n\r\n{\"n\":1}"
				} else {
					head += "\r\n"
				}
				if _, err := io.WriteString(c, head); err != nil {
					t.Fatal(err)
				}
				<-arrived // at its upstream, past its body
				first = cmp.Or(first, c)
			}
			req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/callout/api/v1/b", strings.NewReader(`{"n":1}`))
			req.Header.Set("Authorization", mint(shareRigIssuer))
			req.Header.Set("Idempotency-Key", "b-1")
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}).Do(req)
			if err != nil {
				t.Fatalf("the other organisation's write at the cap: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || l.Cut() != 1 {
				t.Fatalf("the other organisation's write at the cap: %d, cuts %d; want 200, 1", resp.StatusCode, l.Cut())
			}
			_ = first.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on a broken test, not a timing
			cut, err := http.ReadResponse(bufio.NewReader(first), nil)
			if err != nil {
				t.Fatalf("org-a's oldest request, cut at its upstream: no answer: %v", err)
			}
			var doc struct{ Type, State, ID string }
			_ = json.NewDecoder(cut.Body).Decode(&doc)
			cut.Body.Close()
			if !cut.Close {
				t.Errorf("cut request answered without Connection: close")
			}
			if method == http.MethodGet {
				if cut.StatusCode != http.StatusServiceUnavailable || doc.Type != "urn:callout-proxy:problem:overloaded" ||
					cut.Header.Get("Callout-Outcome") != "retryable" || cut.Header.Get("Retry-After") != "1" {
					t.Fatalf("cut read: %d %s outcome %q Retry-After %q; want 503 overloaded, retryable, 1",
						cut.StatusCode, doc.Type, cut.Header.Get("Callout-Outcome"), cut.Header.Get("Retry-After"))
				}
				gates, _ := rig.store.ReadGates(context.Background(),
					[]string{"api", keyspace.PartitionGate("api", clockRigIssuer)})
				for _, g := range gates {
					if g.ConsecutiveFailures != 0 {
						t.Errorf("a read cut by the share was told to the breaker: %+v", g)
					}
				}
				return
			}
			if cut.StatusCode != http.StatusAccepted || doc.State != string(policy.InFlight) || doc.ID == "" ||
				cut.Header.Get("Callout-Id") != doc.ID {
				t.Fatalf("cut write: %d state %q id %q; want 202 in_flight with its id", cut.StatusCode, doc.State, doc.ID)
			}
			release <- struct{}{} // its attempt, still running, gets its answer
			release <- struct{}{}
			for {
				c, err := rig.store.Get(context.Background(), doc.ID)
				if err != nil {
					t.Fatal(err)
				}
				if c.State == policy.Succeeded {
					break
				}
				time.Sleep(time.Millisecond) // the attempt's completion, in its own goroutine
			}
			mu.Lock()
			defer mu.Unlock()
			if hits["a-0n=0"] != 1 {
				t.Errorf("upstream hits for the cut write: %d, want 1", hits["a-0n=0"])
			}
		})
	}
}
