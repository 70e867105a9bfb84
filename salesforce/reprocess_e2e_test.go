package salesforce

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
)

// statusUpstream is a real HTTP upstream answering its current status and
// recording the Idempotency-Key of every request.
type statusUpstream struct {
	*httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	keys   []string
}

func newStatusUpstream(t *testing.T) *statusUpstream {
	u := &statusUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.keys = append(u.keys, r.Header.Get("Idempotency-Key"))
		u.mu.Unlock()
		w.WriteHeader(int(u.status.Load()))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *statusUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.keys)
}

// withUpstream gives the env an endpoint "orders" at url (loopback
// allowed) with every policy limit filled in as config.Load does, and one
// attempt per chain: a failure dead-letters at once.
func withUpstream(t *testing.T, url string) envOption {
	t.Helper()
	yaml := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nauth:\n  issuers: [https://org.my.salesforce.com]\n" +
		"  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_env: JWT_SECRET\n" +
		"policy:\n  max_attempts: 1\nendpoints:\n  orders:\n    url: " + url + "\n    allowed_networks: [127.0.0.0/8]\n"
	parsed, err := config.Parse([]byte(yaml), func(string) string { return "a-test-secret-of-at-least-32-bytes!!" })
	if err != nil {
		t.Fatal(err)
	}
	return func(c *config.Config) { c.Policy, c.Endpoints = parsed.Policy, parsed.Endpoints }
}

// dispatcher returns a function that runs one round of a real dispatcher
// (forwarder, metrics) on the env's store and clock, waits for its
// attempts and drains the outbox.
func (e *env) dispatcher() func() {
	e.t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		e.t.Fatal(err)
	}
	fwd := forward.New(forward.Options{Now: e.clk.Now})
	e.t.Cleanup(fwd.CloseIdleConnections)
	d := dispatch.New(dispatch.Options{Config: e.cfg, Store: e.store, Upstream: fwd, Metrics: m,
		Logger: slog.New(slog.DiscardHandler), Now: e.clk.Now, Rand: func() float64 { return 0.5 }})
	return func() {
		d.Round(ctxT(e.t))
		d.Wait()
		e.drain()
	}
}

// TestReprocessEndToEnd: an admin reprocesses a dead letter from Salesforce
// (emulated), through the real store, replay service, dispatcher and an
// HTTP upstream: the record goes New, Reprocess Requested, Reprocessing,
// Failed Again (the upstream still fails), then — requested again once it
// recovered — Reprocessing and Reprocessed. Every attempt carries the
// caller's Idempotency-Key; the record stays keyed on the first id.
func TestReprocessEndToEnd(t *testing.T) {
	up := newStatusUpstream(t)
	e := newEnv(t, withUpstream(t, up.URL))
	round := e.dispatcher()
	counter := newCounting(e.replays("replays-1"))
	_, p := e.replica("replica-a", counter)
	status := func(want, replay string) {
		t.Helper()
		r := e.record(root(t, e))
		if got, _ := r["Replay_Callout_Id__c"].(string); r["Status__c"] != want || got != replay {
			t.Fatalf("record: %v, %q; want %s, %q", r["Status__c"], got, want, replay)
		}
	}

	up.status.Store(http.StatusServiceUnavailable)
	nc := newCallout("orders")
	nc.IdempotencyKey = "order-42"
	nc.Header.Set("Idempotency-Key", `"order-42"`)
	if _, err := e.store.Enqueue(ctxT(t), nc, policy.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	round()
	status(policy.RecordNew, "")

	// Requested while the upstream still fails: the chain dead-letters.
	id := root(t, e)
	e.clk.Advance(time.Minute)
	e.request(id)
	if r := poll(t, p); r.Replayed != 1 {
		t.Fatalf("poll = %+v", r)
	}
	e.drain()
	first := chainOf(t, e, id)
	status(policy.RecordReprocessing, first)
	round()
	status(policy.RecordFailedAgain, first)

	// Requested again after it recovered: the latest dead letter is
	// replayed, and succeeds.
	up.status.Store(http.StatusCreated)
	e.clk.Advance(time.Minute)
	e.request(id)
	if r := poll(t, p); r.Replayed != 1 || counter.count(first) != 1 {
		t.Fatalf("poll = %+v; replays of the failed chain %d", r, counter.count(first))
	}
	e.drain()
	second := chainOf(t, e, id)
	status(policy.RecordReprocessing, second)
	round()
	status(policy.RecordReprocessed, second)
	if c, err := e.store.Get(ctxT(t), second); err != nil || c.State != policy.Succeeded || c.ReplayOf != first {
		t.Errorf("second chain: %+v, %v", c, err)
	}
	if keys := up.seen(); !slices.Equal(keys, []string{`"order-42"`, `"order-42"`, `"order-42"`}) {
		t.Errorf("upstream saw keys %q, want the caller's on all three attempts", keys)
	}
	if n := len(e.emu.Records(FailedCalloutObject)); n != 1 {
		t.Errorf("%d Failed_Callout__c records, want 1", n)
	}
	if poll(t, p).Requests != 0 {
		t.Error("a Reprocessed record is still polled")
	}
}

// root returns the only Failed_Callout__c record's Callout_Id__c.
func root(t *testing.T, e *env) string {
	t.Helper()
	recs := e.emu.Records(FailedCalloutObject)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	return recs[0][ExternalIDField].(string)
}

// chainOf returns the replay chain the record of id names.
func chainOf(t *testing.T, e *env, id string) string {
	t.Helper()
	chain, _ := e.record(id)["Replay_Callout_Id__c"].(string)
	if chain == "" {
		t.Fatalf("record of %s names no replay chain", id)
	}
	return chain
}
