//go:build fault

package fault

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// toxic is an in-process toxiproxy proxy in front of an upstream.
type toxic struct {
	p *toxiproxy.Proxy
	// URL is the proxied upstream's base URL.
	URL string
}

// newToxic starts a toxiproxy proxy on a free loopback port forwarding to
// the upstream at base (an http://host:port URL).
func newToxic(t *testing.T, base string) *toxic {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "upstream", "127.0.0.1:0", strings.TrimPrefix(base, "http://"))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &toxic{p: p, URL: "http://" + p.Listen}
}

// add adds a toxic of typ on stream with attributes (JSON object text).
func (x *toxic) add(t *testing.T, name, typ, stream, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := x.p.Toxics.AddToxicJson(bytes.NewBufferString(js)); err != nil {
		t.Fatalf("toxic %s: %v", name, err)
	}
}

// remove removes the toxic name.
func (x *toxic) remove(t *testing.T, name string) {
	t.Helper()
	if err := x.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// timeouts is the policy of the toxic scenarios: a 1 s attempt.
var timeouts = []string{"connect_timeout: 500ms", "header_timeout: 1s", "attempt_timeout: 1s"}

// TestToxicWritesEndCorrectly puts each toxic between one replica and the
// upstream while 150 asynchronous writes are sent, for 2 s (or for the
// whole run when it only slows the upstream down). Every callout ends
// succeeded once the toxic is gone, and no key is attempted twice at once
// — timeouts and resets are retryable (contract §2) and are retried.
func TestToxicWritesEndCorrectly(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	cases := []struct {
		name, typ, stream, attrs string
		lift                     time.Duration // 0: never removed
	}{
		{"latency", "latency", "downstream", `{"latency":200,"jitter":50}`, 0},
		{"timeout", "timeout", "downstream", `{"timeout":0}`, 2 * time.Second},
		{"reset", "reset_peer", "upstream", `{"timeout":0}`, 2 * time.Second},
		{"slow-body", "slicer", "downstream", `{"average_size":16,"size_variation":8,"delay":20000}`, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := proctest.NewUpstream(t, nil)
			x := newToxic(t, up.URL)
			r := proctest.StartProxy(t, proxyBinary, config(rs.URL, timeouts, endpoint("pay", x.URL)),
				proctest.ProxyOptions{Name: "r-" + tc.name, Env: replicaEnv})
			c := newClient(t)
			x.add(t, tc.name, tc.typ, tc.stream, tc.attrs)
			if tc.lift > 0 {
				time.AfterFunc(tc.lift, func() { _ = x.p.Toxics.RemoveToxic(context.Background(), tc.name) })
			}
			acc, refused := c.postAsync(150, 8, "pay", fmt.Sprintf("toxic%d", i),
				func(int) string { return r.URL }, nil)
			if refused > 0 {
				t.Errorf("%d of 150 writes were not accepted", refused)
			}
			wantAll(t, c.waitFinal(t, r.URL, acc, 90*time.Second), policy.Succeeded)
			up.CheckNoOverlap(t)
		})
	}
}

// TestToxicSlowBodyOutcomes checks synchronous reads through a slow body:
// 16 KiB in 256-byte slices 5 ms apart arrives whole within the attempt
// (success, body intact); at 4 KiB/s it cannot (the attempt limit cuts it:
// outcome retryable, contract §2 "attempt timeout").
func TestToxicSlowBodyOutcomes(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	body := strings.Repeat("0123456789abcdef", 1024)
	up := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
	})
	x := newToxic(t, up.URL)
	r := proctest.StartProxy(t, proxyBinary, config(rs.URL, timeouts, endpoint("files", x.URL)), proctest.ProxyOptions{Name: "r-body", Env: replicaEnv})
	c := newClient(t)

	x.add(t, "slices", "slicer", "downstream", `{"average_size":256,"delay":5000}`)
	code, h, got, err := c.do(http.MethodGet, r.URL+"/callout/files/blob", nil, "")
	if err != nil || code != http.StatusOK || h.Get("Callout-Outcome") != "success" || string(got) != body {
		t.Errorf("sliced body: %d %q err %v, %d of %d bytes intact", code, h.Get("Callout-Outcome"), err,
			len(got), len(body))
	}
	x.remove(t, "slices")
	x.add(t, "trickle", "bandwidth", "downstream", `{"rate":4}`)
	code, h, _, err = c.do(http.MethodGet, r.URL+"/callout/files/blob", nil, "")
	if err == nil && h.Get("Callout-Outcome") != "retryable" {
		t.Errorf("trickled body: %d, Callout-Outcome %q, want retryable", code, h.Get("Callout-Outcome"))
	}
}

// TestSlowUpstreamDoesNotExhaustWorkers: 200 asynchronous writes to an
// endpoint whose upstream takes 2 s per answer (behind toxiproxy) (max_concurrency: 50) and,
// meanwhile, 50 writes to a healthy endpoint. The healthy ones finish
// within 5 s, the slow endpoint never has more than 50 attempts in flight
// from the replica, and every callout ends succeeded.
func TestSlowUpstreamDoesNotExhaustWorkers(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	slowUp := proctest.NewUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Second)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	fastUp := proctest.NewUpstream(t, nil)
	x := newToxic(t, slowUp.URL)
	x.add(t, "slow", "latency", "upstream", `{"latency":50}`)
	cfg := config(rs.URL, []string{"connect_timeout: 1s", "header_timeout: 5s", "attempt_timeout: 5s"},
		endpoint("slow", x.URL, "max_concurrency: 50", "max_backlog_items: 1000"), endpoint("fast", fastUp.URL))
	r := proctest.StartProxy(t, proxyBinary, cfg, proctest.ProxyOptions{Name: "r-pool", Env: replicaEnv})
	c := newClient(t)

	slow, refused := c.postAsync(200, 16, "slow", "slow", func(int) string { return r.URL }, nil)
	if refused > 0 {
		t.Fatalf("%d of 200 slow writes were not accepted", refused)
	}
	time.Sleep(500 * time.Millisecond) // the slow attempts are in flight now
	start := time.Now()
	fast, refused := c.postAsync(50, 8, "fast", "fast", func(int) string { return r.URL }, nil)
	if refused > 0 {
		t.Fatalf("%d of 50 fast writes were not accepted", refused)
	}
	wantAll(t, c.waitFinal(t, r.URL, fast, 5*time.Second), policy.Succeeded)
	busy := slowUp.InFlight.Running()
	t.Logf("50 healthy callouts done in %s while %d slow attempts were in flight", time.Since(start), busy)
	if busy == 0 {
		t.Error("no slow attempt was in flight while the healthy callouts ran: the scenario proved nothing")
	}
	wantAll(t, c.waitFinal(t, r.URL, slow, 60*time.Second), policy.Succeeded)
	if p := slowUp.InFlight.Peak(); p > 50 {
		t.Errorf("slow upstream saw %d attempts at once, want at most max_concurrency 50", p)
	}
	slowUp.CheckNoOverlap(t)
	fastUp.CheckNoOverlap(t)
}
