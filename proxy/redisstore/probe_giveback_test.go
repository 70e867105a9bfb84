package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// keyOfQueue is the first idempotency key prefix-0, prefix-1, … whose new
// callout of ep goes to a queue that ok accepts.
func keyOfQueue(t *testing.T, s *Store, ep, prefix string, ok func(keyspace.Queue) bool) string {
	t.Helper()
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		q, err := s.queues.ForCreate(ctxT(t), req(ep, k, "{}"))
		if err != nil {
			t.Fatal(err)
		}
		if ok(q) {
			return k
		}
	}
}

// On a sharded endpoint whose gate is half-open, a write to a queue outside
// the endpoint hash's slot takes the probe token before its create script
// runs (admit.lua). When that write is then not created — a duplicate of a
// reserved key, or refused by a cap — the token goes back at once, so the
// next new write is the probe instead of being held for the whole probe
// lease (review finding of 2026-12-01).
func TestProbeTokenGivenBackWhenNotCreated(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const ep = "gb-probe"
		s := shardedStore(e, ep, 3)
		// a key whose queue is not the home queue
		key := keyOfQueue(t, s, ep, "dup", func(q keyspace.Queue) bool { return !q.Home })
		orig := mustBegin(t, s, req(ep, key, "{}"))
		mustComplete(t, s, orig, success())
		br := policy.BreakerSettings{Failures: 2, ProbeInterval: time.Minute}
		pending := map[string]bool{} // queues holding a scheduled retry
		for range 2 {
			cl := mustBegin(t, s, req(ep, "", "{}"))
			f := failure(e.clk.Now().Add(time.Hour))
			f.Breaker = br
			mustComplete(t, s, cl, f)
			q, _ := keyspace.QueueOfID(ep, cl.ID)
			pending[q.Due] = true
		}
		if g := mustState(t, s, ep); g.Breaker != policy.BreakerOpen {
			t.Fatalf("breaker %s, want open", g.Breaker)
		}
		e.clk.Advance(time.Minute + time.Second) // half-open; past the gate view's TTL too
		for i := range 3 {
			r, err := s.Begin(ctxT(t), req(ep, key, "{}"), policy.BeginOptions{Lease: testLease, Breaker: br})
			if err != nil || r.Existing == nil || r.Existing.ID != orig.ID {
				t.Fatalf("duplicate %d at half-open: %+v, %v", i, r, err)
			}
		}
		// a new key of a non-home queue holding a retry, refused by a cap of
		// one item (each of 3 queues gets 1) after taking the token
		refused := keyOfQueue(t, s, ep, "full", func(q keyspace.Queue) bool { return !q.Home && pending[q.Due] })
		_, err := s.Begin(ctxT(t), req(ep, refused, "{}"), policy.BeginOptions{Lease: testLease, Breaker: br,
			Limits: policy.BacklogLimits{MaxItems: 1}})
		wantErr(t, err, policy.ErrBacklogFull)
		e.clk.Advance(gateview.TTL)
		r, err := s.Begin(ctxT(t), req(ep, "fresh", "{}"), policy.BeginOptions{Lease: testLease, Breaker: br})
		if err != nil || r.Claimed == nil || r.Claimed.Kind != policy.KindProbe {
			t.Fatalf("the first new write after duplicates at a half-open gate: %+v (held %+v), %v; want the probe",
				r.Claimed, r.Held, err)
		}
	})
}
