package replay

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/deadletters"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
)

// t0 is a round Unix-ms instant.
var t0 = time.UnixMilli(1_700_000_000_000)

const testLease = 30 * time.Second

// testEnv is one backend with a store, a replay store and a service.
type testEnv struct {
	b     redistest.Backend
	clk   *clocktest.Clock
	store *redisstore.Store
	jobs  *jobs.Store
	cfg   *config.Config
	logs  *proctest.LogBuffer
	seeds atomic.Uint64
	// traceContext, when set, is the stored trace context of what seed
	// makes (policy.NewCallout.TraceContext).
	traceContext string
}

// testConfig has pay-api and crm-api, with the default policy.
func testConfig() *config.Config {
	p := policy.Defaults()
	ep := func(name string) *config.Endpoint {
		return &config.Endpoint{Name: name, AttemptTimeout: p.AttemptTimeout,
			BreakerFailures: p.BreakerFailures, BreakerProbeInterval: p.BreakerProbeInterval}
	}
	return &config.Config{Policy: p, Endpoints: map[string]*config.Endpoint{
		"pay-api": ep("pay-api"), "crm-api": ep("crm-api"),
	}}
}

// forEachBackend runs fn as a subtest on every backend redistest offers.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *testEnv)) {
	t.Helper()
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		e := &testEnv{b: b, clk: clocktest.New(t0), cfg: testConfig(), logs: &proctest.LogBuffer{}}
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], e.seeds.Add(1))
		e.store = redisstore.New(b.Client, redisstore.Options{PinScriptTime: true, Now: e.clk.Now, Rand: rand.NewChaCha8(seed),
			DeadLetterRetention: 30 * 24 * time.Hour})
		binary.LittleEndian.PutUint64(seed[:], e.seeds.Add(1))
		e.jobs = jobs.New(b.Client, jobs.Options{PinScriptTime: true, Now: e.clk.Now, Rand: rand.NewChaCha8(seed)})
		fn(t, e)
	})
}

// deadLetters returns the dead-letter store over e's store, on e's clock.
func (e *testEnv) deadLetters() *deadletters.Store {
	return deadletters.New(e.b.Client, e.store, deadletters.Options{Now: e.clk.Now, PinScriptTime: true})
}

// service returns a Service of replica owner over e.
func (e *testEnv) service(owner string) *Service {
	return New(Options{Config: e.cfg, Store: e.store, DeadLetters: e.deadLetters(), Jobs: e.jobs, Owner: owner,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Now: e.clk.Now, Sleep: e.clk.Sleep,
		PollEvery: 10 * time.Millisecond})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// seeded is a dead letter made by seed.
type seeded struct {
	ID, Endpoint, Key string
	Status            int
	Reason            policy.DeadLetterReason
}

// seed makes a dead letter of endpoint at the clock's time, with an
// Idempotency-Key, the last response status (0: none) and reason.
func (e *testEnv) seed(t *testing.T, endpoint, key string, status int, reason policy.DeadLetterReason) seeded {
	t.Helper()
	ctx := ctxT(t)
	nc := policy.NewCallout{Endpoint: endpoint, Issuer: "https://org.my.salesforce.com",
		Method: http.MethodPost, Path: "/v1/charges",
		Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"` + key + `"`}},
		Body:   []byte(`{"key":"` + key + `"}`), IdempotencyKey: key, TraceContext: e.traceContext}
	if _, err := e.store.Enqueue(ctx, nc, policy.EnqueueOptions{}); err != nil {
		t.Fatalf("seed %s: %v", key, err)
	}
	cr, err := e.store.Claim(ctx, endpoint, redisstore.ClaimOptions{Batch: 1, Lease: testLease})
	if err != nil || len(cr.Claimed) != 1 {
		t.Fatalf("seed claim %s: %+v, %v", key, cr, err)
	}
	comp := policy.Completion{Action: policy.ActionDeadLetter, Reason: reason, Error: "seeded",
		Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: status, Outcome: policy.Permanent}}
	if status != 0 {
		comp.Response = &policy.Response{Status: status, Body: []byte("no")}
	}
	if _, err := e.store.Complete(ctx, cr.Claimed[0], comp); err != nil {
		t.Fatalf("seed complete %s: %v", key, err)
	}
	return seeded{ID: cr.Claimed[0].ID, Endpoint: endpoint, Key: key, Status: status, Reason: reason}
}

// seedN makes n dead letters of endpoint, step apart in time, keys
// prefix-0…; the clock ends after the last.
func (e *testEnv) seedN(t *testing.T, endpoint, prefix string, n int, step time.Duration) []seeded {
	t.Helper()
	out := make([]seeded, n)
	for i := range out {
		out[i] = e.seed(t, endpoint, fmt.Sprintf("%s-%d", prefix, i), 503, policy.DeadLetterExhausted)
		e.clk.Advance(step)
	}
	return out
}

// replayChains returns, for each replay chain in endpoint's due set, the
// dead letter it replays -> the chain's record.
func (e *testEnv) replayChains(t *testing.T, endpoint string) map[string]*policy.Callout {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]*policy.Callout{}
	for {
		cr, err := e.store.Claim(ctx, endpoint, redisstore.ClaimOptions{Batch: 1000, Lease: testLease})
		if err != nil {
			t.Fatal(err)
		}
		if len(cr.Claimed) == 0 {
			return out
		}
		for _, cl := range cr.Claimed {
			if _, dup := out[cl.ReplayOf]; dup {
				t.Errorf("dead letter %s replayed twice", cl.ReplayOf)
			}
			c, err := e.store.Get(ctx, cl.ID)
			if err != nil {
				t.Fatal(err)
			}
			out[cl.ReplayOf] = c
		}
	}
}

// wantJob reads a job and checks its state and counters.
func wantJob(t *testing.T, s *Service, id string, state policy.JobState, total, sent, skipped, refused int) policy.ReplayJob {
	t.Helper()
	j, err := s.Job(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != state || j.Total != total || j.Sent != sent || j.Skipped != skipped || j.Refused != refused || j.Failed != 0 {
		t.Fatalf("job = %+v\nwant state %s total %d sent %d skipped %d refused %d", j, state, total, sent, skipped, refused)
	}
	return j
}
