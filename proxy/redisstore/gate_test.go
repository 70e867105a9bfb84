package redisstore

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// TestShutGateClaimIsO1: with 10,000 held callouts due, a claim while the
// breaker's probe is out returns at once and touches none of them. On the real
// single node INFO commandstats proves it: the claim runs one HMGET (the
// gate) and no per-callout command.
func TestShutGateClaimIsO1(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		held := 10_000
		if !e.b.Real() {
			// miniredis builds a Lua interpreter per script run: 10,000
			// creates take ~20 s under -race. The O(1) proof is on real Redis.
			held = 1_000
		}
		s := e.store()
		openBreaker(t, e, s, "held-api", 20)
		ids := make([]string, 0, held)
		for range held {
			r, err := s.Enqueue(ctxT(t), req("held-api", "", "{}"), enqOpts)
			if err != nil || r.State != policy.Held {
				t.Fatalf("enqueue while open = %+v, %v", r, err)
			}
			ids = append(ids, r.ID)
		}
		// Half-open: one held callout is the probe, out while every other
		// held callout is due (the gate probing).
		e.clk.Advance(5 * time.Minute)
		probe := mustClaim(t, s, "held-api", claimOpts).Claimed
		if len(probe) != 1 || probe[0].Kind != policy.KindProbe {
			t.Fatalf("probe = %+v", probe)
		}
		e.clk.Advance(time.Second)
		before := snapshot(t, e, ids)
		statsBefore := commandCalls(t, e)

		start := time.Now()
		got := mustClaim(t, s, "held-api", ClaimOptions{Batch: 1000, Lease: testLease})
		elapsed := time.Since(start)
		t.Logf("claim with %d held callouts, batch 1000: %v", held, elapsed)

		if len(got.Claimed) != 0 || got.Gate.State != policy.GateProbing || !got.Gate.Until.After(e.clk.Now()) {
			t.Fatalf("claim = %+v", got)
		}
		if after := snapshot(t, e, ids); !reflect.DeepEqual(before, after) {
			t.Fatal("a shut-gate claim changed held callouts")
		}
		if statsBefore != nil {
			statsAfter := commandCalls(t, e)
			for _, cmd := range []string{"zscore", "hset", "zrem", "zadd"} {
				if statsAfter[cmd] != statsBefore[cmd] {
					t.Fatalf("shut-gate claim ran %s %d times", cmd, statsAfter[cmd]-statsBefore[cmd])
				}
			}
			if d := statsAfter["hmget"] - statsBefore["hmget"]; d != 1 {
				t.Fatalf("shut-gate claim ran hmget %d times, want 1 (the gate)", d)
			}
		}
	})
}

// snapshot reads every callout hash and the due set.
func snapshot(t *testing.T, e *env, ids []string) []any {
	t.Helper()
	k := orgQueue(keyspace.HomeQueue("held-api"))
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := e.b.Client.Pipelined(ctxT(t), func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctxT(t), recordKey(id))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]any, 0, len(ids)+1)
	for _, c := range cmds {
		out = append(out, c.Val())
	}
	due, err := e.b.Client.ZRangeWithScores(ctxT(t), k.Due, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return append(out, due)
}

// commandCalls returns INFO commandstats call counts on the real single
// node (nil elsewhere: miniredis has none, a cluster spreads them).
func commandCalls(t *testing.T, e *env) map[string]int64 {
	t.Helper()
	if e.b.Name != "single" {
		return nil
	}
	info, err := e.b.Client.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		out[name], _ = strconv.ParseInt(n, 10, 64)
	}
	return out
}

func TestAdmitAndRecordResultForReads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		br := policy.BreakerSettings{Failures: 3, ProbeInterval: time.Minute, ProbeLease: 10 * time.Second}
		ad, err := s.Admit(ctxT(t), "read-api", br)
		if err != nil || ad.Gate.State != policy.GateOpen || ad.ProbeToken != "" || ad.ConsecutiveFailures != 0 {
			t.Fatalf("admit healthy = %+v, %v", ad, err)
		}
		var ch policy.BreakerChange
		for range 3 {
			ch, err = s.RecordResult(ctxT(t), "read-api", policy.ReadResult{CountsTowardBreaker: true, Breaker: br})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !ch.Opened || ch.ConsecutiveFailures != 3 {
			t.Fatalf("third failure = %+v, want opened", ch)
		}
		ad, _ = s.Admit(ctxT(t), "read-api", br)
		if ad.Gate.State != policy.GateBreakerOpen || !ad.Gate.Until.Equal(t0.Add(time.Minute)) {
			t.Fatalf("admit while open = %+v", ad)
		}
		e.clk.Advance(time.Minute)
		probe, _ := s.Admit(ctxT(t), "read-api", br)
		other, _ := s.Admit(ctxT(t), "read-api", br)
		if probe.Gate.State != policy.GateHalfOpen || probe.ProbeToken == "" || other.Gate.State != policy.GateProbing || other.ProbeToken != "" {
			t.Fatalf("half-open admits = %+v, %+v", probe, other)
		}
		ch, err = s.RecordResult(ctxT(t), "read-api", policy.ReadResult{ProbeToken: probe.ProbeToken, Success: true, Breaker: br})
		if err != nil || !ch.Closed || !ch.Probe || !ch.OutageEnded {
			t.Fatalf("probe success = %+v, %v", ch, err)
		}
		if ad, _ := s.Admit(ctxT(t), "read-api", br); ad.Gate.State != policy.GateOpen {
			t.Fatalf("admit after close = %+v", ad)
		}
	})
}

// TestBeginFollowsTheGate: a synchronous write meets a shut gate (held, no
// attempt consumed, contract §4) or a half-open breaker (it is the probe).
func TestBeginFollowsTheGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		opts := policy.BeginOptions{Lease: testLease, Breaker: policy.BreakerSettings{ProbeLease: 10 * time.Second}}
		openBreaker(t, e, s, "wgate-api", 20)

		r, err := s.Begin(ctxT(t), req("wgate-api", "a", "{}"), opts)
		if err != nil || r.Held == nil || r.Held.Gate.State != policy.GateBreakerOpen || !r.Held.DueAt.Equal(t0.Add(5*time.Minute)) {
			t.Fatalf("begin while open = %+v, %v", r, err)
		}
		if rec := mustGet(t, s, r.Held.ID); rec.State != policy.Held || rec.Attempts != 0 || !rec.FirstAttemptAt.IsZero() {
			t.Fatalf("held record = %+v", rec)
		}

		e.clk.Advance(5 * time.Minute)
		p, err := s.Begin(ctxT(t), req("wgate-api", "b", "{}"), opts)
		if err != nil || p.Claimed == nil || p.Claimed.Kind != policy.KindProbe {
			t.Fatalf("begin at half-open = %+v, %v", p, err)
		}
		q, err := s.Begin(ctxT(t), req("wgate-api", "c", "{}"), opts)
		if err != nil || q.Held == nil || q.Held.Gate.State != policy.GateProbing || !q.Held.DueAt.Equal(e.clk.Now().Add(10*time.Second)) {
			t.Fatalf("begin while probing = %+v, %v", q, err)
		}
		if res := mustComplete(t, s, p.Claimed, success()); !res.Breaker.Closed || !res.Breaker.Probe {
			t.Fatalf("synchronous probe success = %+v", res)
		}
		e.clk.Advance(10 * time.Second)
		got := mustClaim(t, s, "wgate-api", ClaimOptions{Batch: 100, Lease: testLease})
		if len(got.Claimed) != 2 || got.Claimed[0].Kind != policy.KindFirst {
			t.Fatalf("held writes after close = %+v", got.Claimed)
		}
	})
}

func TestEnqueueWhilePausedIsHeldUntilPauseEnds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		until := t0.Add(time.Minute)
		if _, err := s.RecordResult(ctxT(t), "ep-pause", policy.ReadResult{PausedUntil: until}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Enqueue(ctxT(t), req("ep-pause", "", "{}"), enqOpts)
		if err != nil || r.State != policy.Held || r.Gate.State != policy.GatePaused || !r.DueAt.Equal(until) {
			t.Fatalf("enqueue while paused = %+v, %v", r, err)
		}
		// A shorter pause never shortens the longer one.
		if _, err := s.RecordResult(ctxT(t), "ep-pause", policy.ReadResult{PausedUntil: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		if st := mustState(t, s, "ep-pause"); !st.PausedUntil.Equal(until) {
			t.Fatalf("paused until %v, want %v", st.PausedUntil, until)
		}
	})
}
