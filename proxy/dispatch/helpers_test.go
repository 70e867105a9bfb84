package dispatch_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// t0 is the tests' epoch: whole seconds, so an HTTP-date (second
// precision) computed from the injected clock is exact.
var t0 = time.UnixMilli(1_700_000_000_000)

const (
	testIssuer = "https://org.my.salesforce.com"
	testSecret = "dispatch-test-hs256-secret-0123456789abcdef"
	// loopback lets a test endpoint reach its httptest upstream.
	loopback = "allowed_networks: [127.0.0.0/8]"
)

func newClock() *clocktest.Clock { return clocktest.New(t0) }

// fixed returns a jitter source that always answers v.
func fixed(v float64) func() float64 { return func() float64 { return v } }

// ep is one endpoint of a test configuration: its name, upstream URL and
// extra "key: value" lines.
type ep struct {
	name, url string
	extra     []string
}

// newConfig parses a complete configuration (defaults filled, endpoints
// loaded) with the given policy lines and endpoints; every endpoint may
// reach loopback.
func newConfig(t testing.TB, policyLines []string, eps ...ep) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nauth:\n  issuers: [" + testIssuer +
		"]\n  audience: callout-proxy\n  algorithms: [HS256]\n  hs256_secret_env: TEST_JWT_SECRET\n")
	if len(policyLines) > 0 {
		b.WriteString("policy:\n")
		for _, l := range policyLines {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("endpoints:\n")
	for _, e := range eps {
		fmt.Fprintf(&b, "  %s:\n    url: %s\n    %s\n", e.name, e.url, loopback)
		for _, l := range e.extra {
			b.WriteString("    " + l + "\n")
		}
	}
	cfg, err := config.Parse([]byte(b.String()), func(k string) string {
		if k == "TEST_JWT_SECRET" {
			return testSecret
		}
		return ""
	})
	if err != nil {
		t.Fatalf("config: %v\n%s", err, b.String())
	}
	return cfg
}

// harness is one Redis backend with everything a dispatcher test needs:
// the shared clock, a store ("replica" one), a fresh metrics registry and
// an events recorder.
type harness struct {
	t     testing.TB
	b     redistest.Backend
	clk   *clocktest.Clock
	cfg   *config.Config
	store *redisstore.Store
	m     *metrics.Metrics
	ended atomic.Int64 // calls of Options.Ended: the endings reported
	seeds atomic.Uint64
}

// newHarness returns a harness on b with cfg, its clock at t0.
func newHarness(t testing.TB, b redistest.Backend, cfg *config.Config) *harness {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	h := &harness{t: t, b: b, clk: newClock(), cfg: cfg, m: m}
	h.store = h.newStore()
	return h
}

// newStore returns another Store (another replica) on the backend, with a
// deterministic id source and the shared clock.
func (h *harness) newStore() *redisstore.Store {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], h.seeds.Add(1))
	return redisstore.New(h.b.Client, redisstore.Options{
		PinScriptTime: true, Now: h.clk.Now, Rand: rand.NewChaCha8(seed),
		IdempotencyRetention: 24 * time.Hour, DeadLetterRetention: 720 * time.Hour,
	})
}

// newForwarder returns a Forwarder on the shared clock.
func (h *harness) newForwarder() *forward.Forwarder {
	f := forward.New(forward.Options{Now: h.clk.Now})
	h.t.Cleanup(f.CloseIdleConnections)
	return f
}

// dispatcher returns a Dispatcher over store with its own forwarder, the
// shared clock and metrics, its endings counted in h.ended, jitter 0.5, and o's bounds
// (and o's Logger; none: discarded).
func (h *harness) dispatcher(store dispatch.Store, o dispatch.Options) *dispatch.Dispatcher {
	o.Config, o.Store, o.Upstream = h.cfg, store, h.newForwarder()
	o.Metrics, o.Now = h.m, h.clk.Now
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Ended = func() { h.ended.Add(1) }
	if o.Rand == nil {
		o.Rand = fixed(0.5)
	}
	return dispatch.New(o)
}

// dispatchOpts are the bounds most tests use: small enough to matter.
func dispatchOpts() dispatch.Options {
	return dispatch.Options{Concurrency: 8, PerEndpoint: 4, Batch: 4}
}

// round runs one Round of d and waits for its attempts; it returns how
// many callouts the round claimed.
func (h *harness) round(d *dispatch.Dispatcher) int {
	n := d.Round(ctxT(h.t))
	d.Wait()
	return n
}

// enqueue records a callout due at due (zero: now) the way the ingress does
// for Prefer: respond-async; key, when set, is the Idempotency-Key the
// caller sent (kept in the stored header, contract §5).
func (h *harness) enqueue(endpoint, method, path, key string, due time.Time) string {
	h.t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		hdr.Set("Idempotency-Key", `"`+key+`"`)
	}
	res, err := h.store.Enqueue(ctxT(h.t), policy.NewCallout{
		Endpoint: endpoint, Issuer: testIssuer, Method: method, Path: path, Header: hdr,
		Body: []byte(`{"amount":42}`), IdempotencyKey: key, SourceRecord: "001000000000001AAA",
	}, policy.EnqueueOptions{DueAt: due})
	if err != nil || res.ID == "" {
		h.t.Fatalf("enqueue %s %s: %+v, %v", endpoint, path, res, err)
	}
	return res.ID
}

// enqueueMany enqueues n POSTs to endpoint, due now, 8 at a time, and
// returns their ids (path /<endpoint>/<i> for the i-th).
func (h *harness) enqueueMany(endpoint string, n int) []string {
	h.t.Helper()
	ids, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				res, err := h.store.Enqueue(ctxT(h.t), policy.NewCallout{
					Endpoint: endpoint, Issuer: testIssuer, Method: http.MethodPost,
					Path: fmt.Sprintf("/%s/%d", endpoint, i), Body: []byte(`{}`),
				}, policy.EnqueueOptions{})
				ids[i], errs[i] = res.ID, err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.t.Fatalf("enqueue %d on %s: %v", n, endpoint, err)
	}
	return ids
}

// get reads a callout, failing the test on error.
func (h *harness) get(id string) *policy.Callout {
	h.t.Helper()
	c, err := h.store.Get(ctxT(h.t), id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return c
}

// state reads an endpoint's state, failing the test on error.
func (h *harness) state(endpoint string) policy.EndpointState {
	h.t.Helper()
	st, err := h.store.EndpointState(ctxT(h.t), endpoint)
	if err != nil {
		h.t.Fatalf("endpoint state %s: %v", endpoint, err)
	}
	return st
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recStore is a dispatch.Store that records what Complete returned and
// counts the claims that included each endpoint.
type recStore struct {
	dispatch.Store
	mu     sync.Mutex
	errs   []error
	claims map[string]int
}

func (s *recStore) ClaimBatch(ctx context.Context, reqs []policy.ClaimRequest, total int) ([]policy.ClaimResult, error) {
	s.mu.Lock()
	if s.claims == nil {
		s.claims = map[string]int{}
	}
	for _, r := range reqs {
		s.claims[r.Endpoint]++
	}
	s.mu.Unlock()
	return s.Store.ClaimBatch(ctx, reqs, total)
}

// claimsOf is how many claims (batched or not) included endpoint.
func (s *recStore) claimsOf(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims[endpoint]
}

func (s *recStore) Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	res, err := s.Store.Complete(ctx, cl, c)
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	return res, err
}

// completeErrs returns the errors of every Complete so far (nil entries
// for successes).
func (s *recStore) completeErrs() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// eventually polls cond every 2ms until it holds, failing the test after
// 10s (proctest.Eventually). It waits for an event another goroutine
// causes (a request reaching an upstream), never for time to pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	proctest.Eventually(t, 10*time.Second, 2*time.Millisecond, what, cond)
}

func wantErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// wantDeadLetter fails the test at once unless callout id is dead-lettered
// with reason after attempts attempts; it returns the callout.
func (h *harness) wantDeadLetter(id string, reason policy.DeadLetterReason, attempts int) *policy.Callout {
	h.t.Helper()
	c := h.get(id)
	if c.State != policy.DeadLettered || c.DeadLetterReason != reason || c.Attempts != attempts {
		h.t.Fatalf("%s: state %s reason %q attempts %d, want dead_lettered %s after %d",
			id, c.State, c.DeadLetterReason, c.Attempts, reason, attempts)
	}
	return c
}

// breakerHarness is a harness with one endpoint, pay, whose breaker opens
// after 2 failures (and msPolicy), in front of an upstream that fails
// until healthy is set.
func breakerHarness(t *testing.T, b redistest.Backend, healthy *atomic.Bool) *harness {
	t.Helper()
	up := proctest.NewUpstream(t, healable(healthy))
	return newHarness(t, b, newConfig(t, append([]string{"breaker_failures: 2"}, msPolicy...),
		ep{name: "pay", url: up.URL}))
}

// payHarness is a harness on b with one endpoint, pay, in front of an
// upstream answering with handler, and policy lines as newConfig's.
func payHarness(t *testing.T, b redistest.Backend, policyLines []string, handler http.HandlerFunc) (*harness, *proctest.Upstream) {
	t.Helper()
	up := proctest.NewUpstream(t, handler)
	return newHarness(t, b, newConfig(t, policyLines, ep{name: "pay", url: up.URL})), up
}
