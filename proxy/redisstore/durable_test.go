package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/durable"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// ackFn is an Acknowledger of Fn.
type ackFn func(ctx context.Context, key string) error

func (f ackFn) Ack(ctx context.Context, key string) error { return f(ctx, key) }

var _ Acknowledger = ackFn(nil)

// durableStore is a Store on c with acks, on the host's clock: the one
// its real Redis's TIME reads too, so that a claim finds what is due.
func durableStore(c redis.UniversalClient, acks Acknowledger) *Store {
	return New(c, Options{Acknowledger: acks})
}

// TestNotDurableWithdraws: on a real Redis whose replica is missing
// (WAIT answers 0), a write is refused with ErrNotDurable (which is
// ErrUnavailable too, 503 store-unavailable) and nothing of it is left to
// forward (contract §4, §11): the asynchronous callout (Enqueue) and the
// synchronous one (Begin) are withdrawn with their reservations — no due
// or leased entry, no backlog bytes — so the same key begins afresh.
func TestNotDurableWithdraws(t *testing.T) {
	primary := proctest.StartRedis(t, false)
	acks := durable.New(primary.Client, durable.Options{Replicas: 1, Timeout: 50 * time.Millisecond})
	ctx := ctxT(t)
	s := durableStore(primary.Client, acks)
	_, err := s.Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	if !errors.Is(err, policy.ErrNotDurable) || !errors.Is(err, policy.ErrUnavailable) {
		t.Fatalf("Enqueue without a replica: %v, want ErrNotDurable and ErrUnavailable", err)
	}
	cl, err := s.Begin(ctx, req("pay", "sync", "{}"), policy.BeginOptions{Lease: testLease})
	if !errors.Is(err, policy.ErrNotDurable) || cl.Claimed != nil {
		t.Fatalf("Begin without a replica: %+v, %v; want ErrNotDurable and nothing to send", cl, err)
	}
	if st := mustState(t, s, "pay"); st.Due != 0 || st.Leased != 0 || st.BacklogBytes != 0 {
		t.Fatalf("after two withdrawn writes: %d due, %d leased, %d backlog bytes; want none", st.Due, st.Leased,
			st.BacklogBytes)
	}
	local := durableStore(primary.Client, nil)
	again, err := local.Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	if err != nil || again.Existing != nil || again.ID == "" {
		t.Fatalf("the same key after the withdrawal: %+v, %v; want a new callout", again, err)
	}
	fresh, err := local.Begin(ctx, req("pay", "sync", "{}"), policy.BeginOptions{Lease: testLease})
	if err != nil || fresh.Existing != nil || fresh.Claimed == nil {
		t.Fatalf("the same key after the withdrawal: %+v, %v; want a new callout to send", fresh, err)
	}
}

// TestNotDurableKeepsClaimed: while its acknowledgement is out an
// asynchronous callout is held back (ackHold): a dispatcher's claim finds
// nothing, even one woken at once. One that a dispatcher claimed all the
// same (the hold ran out first) is not withdrawn (an attempt may be out):
// it stays, in flight, and its key answers from it. A held one (breaker
// open), Enqueue's or Begin's, is withdrawn like a scheduled one. And a
// confirmed one is due at once after its acknowledgement.
func TestNotDurableKeepsClaimed(t *testing.T) {
	r := proctest.StartRedis(t, false)
	ctx := ctxT(t)
	s := durableStore(r.Client, nil)
	claim := func() int { return len(mustClaim(t, s, "pay", ClaimOptions{Batch: 1, Lease: testLease}).Claimed) }
	claimedFirst := ackFn(func(_ context.Context, key string) error {
		if n := claim(); n != 0 {
			t.Errorf("claimed %d callouts while the acknowledgement was out, want 0 (held back)", n)
		}
		// The hold ran out: the callout is due now, and a dispatcher takes it.
		id := key[strings.LastIndex(key, ":")+1:]
		q, _ := s.calloutQueue("pay", req("pay", "", "").Issuer, id)
		r.Client.ZAdd(ctx, q.Due, redis.Z{Score: 0, Member: id})
		if n := claim(); n != 1 {
			t.Errorf("claimed %d callouts once the hold ran out, want 1", n)
		}
		return policy.ErrNotDurable
	})
	_, err := durableStore(r.Client, claimedFirst).Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	wantErr(t, err, policy.ErrNotDurable)
	again, err := s.Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	if err != nil || again.Existing == nil || again.Existing.Callout == nil || again.Existing.Callout.State != policy.InFlight {
		t.Fatalf("the same key after a refused write that was claimed: %+v, %v; want the in-flight callout", again, err)
	}

	confirmed := ackFn(func(context.Context, string) error {
		if n := claim(); n != 0 {
			t.Errorf("claimed %d callouts while the acknowledgement was out, want 0 (held back)", n)
		}
		return nil
	})
	if _, err := durableStore(r.Client, confirmed).Enqueue(ctx, req("pay", "ok", "{}"), enqOpts); err != nil {
		t.Fatal(err)
	}
	if n := claim(); n != 1 {
		t.Errorf("claimed %d callouts after a confirmed write, want 1: due at once", n)
	}

	openBreaker(t, &env{clk: clocktest.New(time.Now())}, s, "held", 20)
	before := mustState(t, s, "held")
	refusing := durableStore(r.Client, ackFn(func(context.Context, string) error { return policy.ErrNotDurable }))
	_, err = refusing.Enqueue(ctx, req("held", "h", "{}"), enqOpts)
	wantErr(t, err, policy.ErrNotDurable)
	// A synchronous write held by the open breaker is a 202 too (contract §4).
	br, err := refusing.Begin(ctx, req("held", "hb", "{}"), policy.BeginOptions{Lease: testLease})
	wantErr(t, err, policy.ErrNotDurable)
	if after := mustState(t, s, "held"); br.Held != nil || after.Breaker != policy.BreakerOpen || after.Due != before.Due ||
		after.BacklogBytes != before.BacklogBytes {
		t.Errorf("refused writes held by the open breaker: %+v; breaker %s, %d → %d due, %d → %d backlog bytes; "+
			"want them withdrawn", br, after.Breaker, before.Due, after.Due, before.BacklogBytes, after.BacklogBytes)
	}
}

// TestNotDurableReplayGivesKeyBack: a replay chain not confirmed durable
// is withdrawn like any asynchronous write, and the key goes back to the
// dead letter it replaced, so the same key still answers 409
// dead-lettered from it (contract §5) and a later replay takes it again.
func TestNotDurableReplayGivesKeyBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		nc, dl := deadLetter(t, s, "rep-api", "k-1")
		refusing := New(e.b.Client, Options{PinScriptTime: true, Now: e.clk.Now,
			Acknowledger: ackFn(func(context.Context, string) error { return policy.ErrNotDurable })})
		replay := nc
		replay.ReplayOf = dl
		_, err := refusing.Enqueue(ctx, replay, enqOpts)
		wantErr(t, err, policy.ErrNotDurable)
		if st := mustState(t, s, "rep-api"); st.Due != 0 {
			t.Fatalf("a refused replay left %d due, want 0", st.Due)
		}
		again, err := s.Enqueue(ctx, nc, enqOpts)
		if err != nil || again.Existing == nil || again.Existing.ID != dl {
			t.Fatalf("the key after a withdrawn replay: %+v, %v; want the dead letter %s", again, err, dl)
		}
		if ttl := pttl(t, e, keyspace.HomeQueue(nc.Endpoint).Reservation(nc.Issuer, nc.IdempotencyKey)); ttl <= 0 {
			t.Errorf("the key given back has TTL %s, want the dead-letter retention", ttl)
		}
		if r, err := s.Enqueue(ctx, replay, enqOpts); err != nil || r.ID == "" || r.Existing != nil {
			t.Fatalf("replay after the withdrawn one: %+v, %v; want a new chain", r, err)
		}
	})
}

// TestNotDurableResetDuringAck: an admin's breaker reset while a held
// callout's acknowledgement is out leaves it parked (hold/lua/park.lua
// reads its record's ack mark), so no dispatcher claims a callout whose
// caller is then answered 503 not durable and which is withdrawn.
func TestNotDurableResetDuringAck(t *testing.T) {
	r := proctest.StartRedis(t, false)
	ctx := ctxT(t)
	s := durableStore(r.Client, nil)
	openBreaker(t, &env{clk: clocktest.New(time.Now())}, s, "held", 20)
	claimed := 0
	acks := ackFn(func(context.Context, string) error {
		if err := s.ResetBreaker(ctx, "held"); err != nil {
			t.Fatal(err)
		}
		for _, c := range mustClaim(t, s, "held", ClaimOptions{Batch: 50, Lease: testLease}).Claimed {
			if c.IdempotencyKey == "h" {
				claimed++
			}
		}
		return policy.ErrNotDurable
	})
	_, err := durableStore(r.Client, acks).Enqueue(ctx, req("held", "h", "{}"), enqOpts)
	wantErr(t, err, policy.ErrNotDurable)
	if claimed != 0 {
		t.Errorf("a held callout answered 503 (not durable) was claimed %d time(s) after a breaker reset during its acknowledgement", claimed)
	}
	fresh, err := s.Enqueue(ctx, req("held", "h", "{}"), enqOpts)
	if err != nil || fresh.Existing != nil {
		t.Fatalf("the same key after the withdrawal: %+v, %v; want a new callout", fresh, err)
	}
}
