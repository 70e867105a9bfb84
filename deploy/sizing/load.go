package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// experiment is one kind of request sent n times through the proxy.
type experiment struct {
	// ID is a short name: read, write, async.
	ID   string
	Name string
	// Request builds the i-th request.
	Request func(base string, i int) *http.Request
	// Want is the status every answer must have.
	Want int
	// Async: the work finishes in the dispatcher after the answer; wait
	// until the endpoint has nothing pending.
	Async bool
}

// loadResult is the measured cost of one request of an experiment, net of
// the proxy's background work (dispatcher polling, gathering) measured
// while idle for the same time.
type loadResult struct {
	ID      string
	Name    string
	N       int
	Seconds float64
	// Commands are the Redis commands executed per request by name,
	// including those run inside Lua scripts (INFO commandstats); Total
	// is their sum.
	Commands map[string]float64
	Total    float64
	// Sent are the commands the proxy sent per request (MONITOR, script
	// internals excluded): EVALSHA is one script run; SentTotal is their
	// sum.
	Sent      map[string]float64
	SentTotal float64
	// RoundTrips are the socket reads Redis processed per request (INFO
	// stats total_reads_processed): the round trips, pipelines counted
	// once however many commands they carry.
	RoundTrips float64
	// RedisCPU and ProxyCPU are CPU time per request, microseconds.
	RedisCPU, ProxyCPU float64
	// Memory is used_memory's growth per request, bytes: what the records
	// left behind (idempotency retention) cost.
	Memory int64
}

// idle is the background cost of an idle proxy per second.
type idle struct {
	Commands map[string]float64
	Total    float64
	// Reads are the socket reads Redis processed per second.
	Reads float64
	// RedisCPU and ProxyCPU are CPU seconds per second.
	RedisCPU, ProxyCPU float64
}

// measureIdle watches the idle proxy for d.
func measureIdle(ctx context.Context, r *redisServer, p *proxyProcess, d time.Duration) (idle, error) {
	before, err := r.info(ctx)
	if err != nil {
		return idle{}, err
	}
	cpu := cpuSeconds(p.Pid())
	time.Sleep(d)
	after, err := r.info(ctx)
	if err != nil {
		return idle{}, err
	}
	dd := diff(before, after)
	s := d.Seconds()
	out := idle{Commands: map[string]float64{}, Total: float64(dd.total()) / s, Reads: float64(dd.Reads) / s,
		RedisCPU: dd.CPU / s, ProxyCPU: (cpuSeconds(p.Pid()) - cpu) / s}
	for name, n := range dd.Calls {
		out.Commands[name] = float64(n) / s
	}
	return out, nil
}

// run sends e's requests n times with conc clients and returns the cost
// per request net of the idle background bg.
func run(ctx context.Context, r *redisServer, p *proxyProcess, store *redisstore.Store, e experiment,
	n, conc int, bg idle) (loadResult, error) {
	before, err := r.info(ctx)
	if err != nil {
		return loadResult{}, err
	}
	cpu, start := cpuSeconds(p.Pid()), time.Now()
	if err := send(ctx, p, e, 0, n, conc); err != nil {
		return loadResult{}, err
	}
	if e.Async {
		if err := drained(ctx, store, "up", 60*time.Second); err != nil {
			return loadResult{}, err
		}
	}
	secs := time.Since(start).Seconds()
	after, err := r.info(ctx)
	if err != nil {
		return loadResult{}, err
	}
	dd := diff(before, after)
	res := loadResult{ID: e.ID, Name: e.Name, N: n, Seconds: secs, Commands: map[string]float64{},
		RedisCPU: (dd.CPU - bg.RedisCPU*secs) / float64(n) * 1e6,
		ProxyCPU: (cpuSeconds(p.Pid()) - cpu - bg.ProxyCPU*secs) / float64(n) * 1e6,
		Memory:   dd.Memory / int64(n), RoundTrips: (float64(dd.Reads) - bg.Reads*secs) / float64(n)}
	for name, c := range dd.Calls {
		v := (float64(c) - bg.Commands[name]*secs) / float64(n)
		if v >= 0.005 {
			res.Commands[name] = v
			res.Total += v
		}
	}
	return res, nil
}

// countSent sends n more of e's requests (numbered from first) under
// MONITOR and sets res.Sent, net of the idle background bg.
func countSent(ctx context.Context, r *redisServer, p *proxyProcess, store *redisstore.Store, e experiment,
	first, n, conc int, bg idle, res *loadResult) error {
	m, err := startMonitor(ctx, r.Addr)
	if err != nil {
		return err
	}
	start := time.Now()
	err = send(ctx, p, e, first, first+n, conc)
	if err == nil && e.Async {
		err = drained(ctx, store, "up", 60*time.Second)
	}
	secs := time.Since(start).Seconds()
	m.Stop()
	if err != nil {
		return err
	}
	res.Sent = map[string]float64{}
	for name, c := range m.counts() {
		if name == "monitor" || name == "info" {
			continue
		}
		if v := (float64(c) - bg.Commands[name]*secs) / float64(n); v >= 0.005 {
			res.Sent[name] = v
			res.SentTotal += v
		}
	}
	return nil
}

// send makes requests number first … end−1 with conc concurrent clients;
// every answer must have e.Want.
func send(ctx context.Context, p *proxyProcess, e experiment, first, end, conc int) error {
	client := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	next.Store(int64(first))
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < end; i = int(next.Add(1)) - 1 {
				req := e.Request("http://"+p.Listen, i).WithContext(ctx)
				req.Header.Set("Authorization", "Bearer "+p.Token)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != e.Want {
					errs <- fmt.Errorf("%s #%d: status %d, want %d", e.Name, i, resp.StatusCode, e.Want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drained waits until endpoint has nothing scheduled or in flight.
func drained(ctx context.Context, store *redisstore.Store, endpoint string, limit time.Duration) error {
	for deadline := time.Now().Add(limit); ; {
		st, err := store.EndpointState(ctx, endpoint)
		if err != nil {
			return err
		}
		if st.Due+st.Leased == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d callouts still pending after %s", st.Due+st.Leased, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// experiments are the request kinds measured: a read, a keyed write
// answered synchronously, and a keyed write with Prefer: respond-async
// (enqueue, then the dispatcher's claim, attempt and completion: the path
// every retry takes).
func experiments() []experiment {
	body := []byte(`{"amount":1999,"currency":"eur","source":"tok_visa","description":"Order 00012345",` +
		`"metadata":{"opportunity":"006000000000001AAA","line":"1"}}`)
	write := func(prefer string) func(string, int) *http.Request {
		return func(base string, i int) *http.Request {
			req, _ := http.NewRequest(http.MethodPost, base+"/callout/up/v1/charges", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf(`"%s-%08d"`, prefer+"7d3c1f0e-4b8a-4c7e-9f21", i))
			req.Header.Set("Callout-Source-Record", "006000000000001AAA")
			if prefer != "" {
				req.Header.Set("Prefer", prefer)
			}
			return req
		}
	}
	return []experiment{
		{ID: "read", Name: "read (GET, no key)", Want: http.StatusOK, Request: func(base string, i int) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, base+fmt.Sprintf("/callout/up/v1/charges/ch_%d", i), nil)
			return req
		}},
		{ID: "write", Name: "keyed write, synchronous (POST + Idempotency-Key)", Want: http.StatusOK, Request: write("")},
		{ID: "async", Name: "keyed write, Prefer: respond-async (dispatcher attempt)", Want: http.StatusAccepted,
			Request: write("respond-async"), Async: true},
	}
}

// commandList formats per-request commands as "evalsha 2.00, get 1.00",
// most frequent first.
func commandList(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return m[names[i]] > m[names[j]] || (m[names[i]] == m[names[j]] && names[i] < names[j])
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.2f", k, m[k])
	}
	return strings.Join(parts, ", ")
}
