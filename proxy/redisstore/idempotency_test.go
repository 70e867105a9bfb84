package redisstore

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

func TestIdempotencyReservation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		opts := policy.BeginOptions{Lease: testLease}
		first, err := s.Begin(ctxT(t), req("idem-api", "order-1", `{"a":1}`), opts)
		if err != nil || first.Claimed == nil {
			t.Fatalf("first = %+v, %v", first, err)
		}
		id := first.Claimed.ID

		tests := []struct {
			name     string
			nc       policy.NewCallout
			wantID   string // "" = a new callout is created
			wantSame bool
		}{
			{"same issuer, endpoint, key, request", req("idem-api", "order-1", `{"a":1}`), id, true},
			{"same key, other body", req("idem-api", "order-1", `{"a":2}`), id, false},
			{"other issuer", func() policy.NewCallout {
				nc := req("idem-api", "order-1", `{"a":1}`)
				nc.Issuer = "https://other.my.salesforce.com"
				return nc
			}(), "", false},
			{"other endpoint", req("idem2-api", "order-1", `{"a":1}`), "", false},
			{"other key", req("idem-api", "order-2", `{"a":1}`), "", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r, err := s.Begin(ctxT(t), tt.nc, opts)
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantID == "" {
					if r.Claimed == nil || r.Claimed.ID == id {
						t.Fatalf("result = %+v, want a new callout", r)
					}
					return
				}
				ex := r.Existing
				if ex == nil || ex.ID != tt.wantID || ex.SameRequest != tt.wantSame || ex.Callout == nil ||
					ex.Callout.State != policy.InFlight || ex.LeaseExpired {
					t.Fatalf("existing = %+v", ex)
				}
			})
		}

		// The first attempt's worker vanished: the reservation reports it.
		e.clk.Advance(testLease)
		r, _ := s.Begin(ctxT(t), req("idem-api", "order-1", `{"a":1}`), opts)
		if r.Existing == nil || !r.Existing.LeaseExpired {
			t.Fatalf("after the lease = %+v, want LeaseExpired", r.Existing)
		}
	})
}

func TestIdempotencyFinishedAndVanished(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		opts := policy.BeginOptions{Lease: testLease}
		first, _ := s.Begin(ctxT(t), req("fin-api", "k", "{}"), opts)
		mustComplete(t, s, first.Claimed, success())
		r, err := s.Begin(ctxT(t), req("fin-api", "k", "{}"), opts)
		if err != nil || r.Existing == nil || r.Existing.Callout.State != policy.Succeeded || r.Existing.Callout.Response.Status != 201 {
			t.Fatalf("replay lookup = %+v, %v", r.Existing, err)
		}
		// The record expires a moment before its reservation: the key is free.
		if err := e.b.Client.Del(ctxT(t), recordKey(first.Claimed.ID)).Err(); err != nil {
			t.Fatal(err)
		}
		r, err = s.Begin(ctxT(t), req("fin-api", "k", "{}"), opts)
		if err != nil || r.Claimed == nil || r.Claimed.ID == first.Claimed.ID {
			t.Fatalf("after the record vanished = %+v, %v", r, err)
		}
	})
}

func TestReplayTakesOverReservation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		nc, origID := deadLetter(t, s, "replay-api", "k")

		replay := nc
		replay.ReplayOf = origID
		r, err := s.Enqueue(ctxT(t), replay, enqOpts)
		if err != nil || r.Existing != nil || r.State != policy.Scheduled {
			t.Fatalf("replay = %+v, %v", r, err)
		}
		k := keyspace.HomeQueue("replay-api")
		if d := pttl(t, e, k.Reservation(nc.Issuer, nc.IdempotencyKey)); d != -1 {
			t.Fatalf("reservation TTL = %v, want none while the replay is pending", d)
		}
		got, _ := s.Begin(ctxT(t), nc, policy.BeginOptions{Lease: testLease})
		if got.Existing == nil || got.Existing.ID != r.ID {
			t.Fatalf("key now points at %+v, want the replay %s", got.Existing, r.ID)
		}
		rc := mustClaim(t, s, "replay-api", claimOpts).Claimed
		if len(rc) != 1 || rc[0].Kind != policy.KindReplay || rc[0].Attempt != 1 || rc[0].ReplayOf != origID || rc[0].IdempotencyKey != "k" {
			t.Fatalf("replay claim = %+v", rc)
		}
		// A second replay of the original, while the first is pending, conflicts.
		r2, err := s.Enqueue(ctxT(t), replay, enqOpts)
		if err != nil || r2.Existing == nil || r2.Existing.ID != r.ID {
			t.Fatalf("second replay = %+v, %v", r2, err)
		}
	})
}

func TestBacklogCap(t *testing.T) {
	tests := []struct {
		name   string
		limits policy.BacklogLimits
		bodies []string
		full   int // index of the first refused create
	}{
		{"items", policy.BacklogLimits{MaxItems: 3}, []string{"a", "b", "c", "d"}, 3},
		// MaxBytes counts everything a record stores: two records' fields
		// and overhead (base each, measured below) plus 10 body bytes.
		{"bytes", policy.BacklogLimits{MaxBytes: 10}, []string{"123456", "1234", "1"}, 2},
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		base := recordBytes(t, e.store(), "cap-probe")
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.limits.MaxBytes > 0 {
					tt.limits.MaxBytes += 2 * base
				}
				s := e.store()
				ep := "cap-" + tt.name
				for i, body := range tt.bodies {
					_, err := s.Enqueue(ctxT(t), req(ep, "", body), policy.EnqueueOptions{Limits: tt.limits})
					if i == tt.full {
						wantErr(t, err, policy.ErrBacklogFull)
						continue
					}
					if err != nil {
						t.Fatalf("create %d: %v", i, err)
					}
				}
				_, err := s.Begin(ctxT(t), req(ep, "", "z"), policy.BeginOptions{Lease: testLease, Limits: tt.limits})
				wantErr(t, err, policy.ErrBacklogFull)
				// Finishing one frees room.
				c := mustClaim(t, s, ep, ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
				mustComplete(t, s, c, success())
				if _, err := s.Enqueue(ctxT(t), req(ep, "", "z"), policy.EnqueueOptions{Limits: tt.limits}); err != nil {
					t.Fatalf("after a finish: %v", err)
				}
			})
		}
	})
}

// recordBytes is what one bodiless req() callout is charged in its
// endpoint's backlog bytes: its fields and the per-record overhead.
func recordBytes(t *testing.T, s *Store, endpoint string) int64 {
	t.Helper()
	mustEnqueueReq(t, s, req(endpoint, "", ""))
	_, n, err := s.Backlog(ctxT(t), endpoint)
	if err != nil || n < 256 {
		t.Fatalf("a bodiless callout is charged %d bytes (%v), want at least the 256-byte overhead", n, err)
	}
	return n
}

func mustEnqueueReq(t *testing.T, s *Store, nc policy.NewCallout) string {
	t.Helper()
	res, err := s.Enqueue(ctxT(t), nc, policy.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}
