//go:build hostile

package hostile

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// probeEvery is the monitor's period. probeLate is the answer time the
// proxy promises under attack ("answers /healthz and a small healthy
// callout within 1 s throughout"); probeTimeout is when a probe has failed
// outright: Apex's default callout timeout (10 s, Apex Reference "HttpRequest
// setTimeout"), where a real caller would have given up.
//
// The attacker runs on the same two cores as the proxy, so one probe
// scheduled behind a burst of the attacker's own goroutines can be late
// without the proxy starving anyone; starvation is late answers that
// persist. finish therefore fails on any failed probe, on two late answers
// in a row of one probe, and on more than maxLateShare of all probes late.
const (
	probeEvery   = 100 * time.Millisecond
	probeLate    = time.Second
	probeTimeout = 10 * time.Second
	maxLateShare = 0.1
)

// watch is the monitor of one attack: it asks /healthz, the admin
// listener's /metrics and a small callout of orgB every probeEvery, each on
// a new connection (so the callout listener's accept path is probed too),
// and samples the proxy's RSS.
type watch struct {
	p      *proctest.Proxy
	stop   chan struct{}
	done   sync.WaitGroup
	client *http.Client
	tokenB string

	mu       sync.Mutex
	probes   int
	failures []string
	late     []string
	lateRun  map[string]int // consecutive late answers of each probe
	slowest  map[string]time.Duration
	maxRSS   int64
}

// watchProxy starts the monitor.
func watchProxy(t *testing.T, p *proctest.Proxy) *watch {
	t.Helper()
	w := &watch{p: p, stop: make(chan struct{}), tokenB: bearer(t, orgB), slowest: map[string]time.Duration{},
		lateRun: map[string]int{},
		client:  &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}}
	w.done.Go(w.probeLoop)
	w.done.Go(w.rssLoop)
	return w
}

func (w *watch) probeLoop() {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		var wg sync.WaitGroup
		wg.Go(func() { w.probe("healthz", w.p.URL+"/healthz", "") })
		wg.Go(func() { w.probe("admin /metrics", w.p.AdminURL+"/metrics", "") })
		wg.Go(func() { w.probe("orgB callout", w.p.URL+"/callout/healthy/ping", w.tokenB) })
		wg.Wait()
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// probe makes one request and records its latency or failure.
func (w *watch) probe(name, url, token string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	start := time.Now()
	resp, err := w.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	took := time.Since(start)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.probes++
	w.slowest[name] = max(w.slowest[name], took)
	switch {
	case err != nil:
		w.failures = append(w.failures, fmt.Sprintf("%s at %s: %v", name, start.Format("15:04:05.000"), err))
	case resp.StatusCode != http.StatusOK:
		w.failures = append(w.failures, fmt.Sprintf("%s at %s: status %d", name, start.Format("15:04:05.000"), resp.StatusCode))
	case took > probeLate:
		w.late = append(w.late, fmt.Sprintf("%s at %s: %s", name, start.Format("15:04:05.000"), took))
		if w.lateRun[name]++; w.lateRun[name] == 2 {
			w.failures = append(w.failures, fmt.Sprintf("%s late twice in a row, the second at %s: %s", name,
				start.Format("15:04:05.000"), took))
		}
		return
	}
	w.lateRun[name] = 0
}

func (w *watch) rssLoop() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if rss, err := w.p.RSS(); err == nil {
			w.mu.Lock()
			w.maxRSS = max(w.maxRSS, rss)
			w.mu.Unlock()
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// finish stops the monitor and asserts: no probe failed, none was late
// (over 1 s) twice in a row, at most a tenth were late, and the peak RSS stayed under the budget plus 150 MiB. It logs the
// figures.
func (w *watch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	w.done.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var slow []string
	for k, v := range w.slowest {
		slow = append(slow, fmt.Sprintf("%s %dms", k, v.Milliseconds()))
	}
	sort.Strings(slow)
	t.Logf("monitor: %d probes, %d failed, %d late (over %s); slowest: %s; peak RSS %d MiB (limit %d MiB)",
		w.probes, len(w.failures), len(w.late), probeLate, strings.Join(slow, ", "), w.maxRSS>>20, (budget+rssSlack)>>20)
	for _, l := range w.late[:min(10, len(w.late))] {
		t.Logf("late: %s", l)
	}
	for _, f := range w.failures[:min(10, len(w.failures))] {
		t.Errorf("probe failed: %s", f)
	}
	if share := float64(len(w.late)) / float64(max(1, w.probes)); share > maxLateShare {
		t.Errorf("%d of %d probes late (over %s): more than %.0f%%", len(w.late), w.probes, probeLate, maxLateShare*100)
	}
	if w.probes < 3 {
		t.Errorf("only %d probes ran", w.probes)
	}
	if w.maxRSS >= budget+rssSlack {
		t.Errorf("peak RSS %d MiB, want under %d MiB (max_inflight_bytes + 150 MiB)", w.maxRSS>>20, (budget+rssSlack)>>20)
	}
}
