package proxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
)

// watchGates runs the rig's gate cache until the test ends.
func (rig *clockRig) watchGates(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rig.gates.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		// Wait until Run has turned the cache on: a read's gate is
		// then kept.
		if _, ok := rig.gates.CachedAdmission("api"); ok {
			return
		}
		if rec := rig.do(t, http.MethodGet, "/callout/api/warm", nil, ""); rec.Code != http.StatusOK {
			t.Fatalf("warm-up read: %d %s", rec.Code, rec.Body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the gate cache did not start within 10 s")
		}
	}
}

// TestReadFromGateCache: reads to a healthy endpoint are admitted from the
// replica's gate cache (every one a hit: no Redis round trip, a success
// records nothing); when Redis then stops answering, the cached gate is
// used at most redis.gate_staleness more, after which a read without a key
// passes through without the breaker (contract §4) — and a read with a key,
// which always asks Redis, is refused at once.
func TestReadFromGateCache(t *testing.T) {
	rig := newClockRig(t, http.StatusOK)
	rig.watchGates(t)
	before := rig.gates.Stats()
	for i := range 5 {
		if rec := rig.do(t, http.MethodGet, "/callout/api/v1/things", nil, ""); rec.Code != http.StatusOK {
			t.Fatalf("read %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	if st := rig.gates.Stats(); st.Hits-before.Hits != 5 || st.Misses != before.Misses {
		t.Fatalf("gate cache %+v after %+v: want 5 more hits, no miss", st, before)
	}

	rig.mini.Close()
	keyed := http.Header{"Idempotency-Key": {`"k-1"`}}
	if rec := rig.do(t, http.MethodGet, "/callout/api/v1/things", keyed, ""); rec.Code != http.StatusServiceUnavailable ||
		rec.Header().Get("Callout-Outcome") != "rejected" {
		t.Fatalf("keyed read with Redis down = %d %s, want 503 store-unavailable", rec.Code, rec.Body)
	}
	rig.clock.Advance(gatecache.DefaultMaxStale + time.Millisecond)
	misses := rig.gates.Stats().Misses
	hits := rig.hits.Load()
	if rec := rig.do(t, http.MethodGet, "/callout/api/v1/things", nil, ""); rec.Code != http.StatusOK ||
		rec.Header().Get("Callout-Outcome") != "success" {
		t.Fatalf("read with Redis down = %d %s, want the upstream's 200 passed through", rec.Code, rec.Body)
	}
	if rig.gates.Stats().Misses != misses+1 || rig.hits.Load() != hits+1 {
		t.Fatal("the read past gate_staleness did not ask Redis, or did not reach the upstream")
	}
}
