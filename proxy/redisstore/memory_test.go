package redisstore

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// MaxPendingBytes is the bound on what one pending keyed callout costs
// Redis by used_memory, its idempotency reservation and due entry
// included, with a 31-byte body (the benchmark's drain seed: one header).
// The figure is 442–479 bytes (docs/performance.md "Memory per pending
// callout"), the spread being the main dict's table (8 bytes a slot,
// doubled as the key count passes a power of two); the hot path's target
// (deploy/bench/BENCHMARKS.md) is 400, which needs one key per callout
// fewer (the same section).
const maxPendingBytes = 512

// The seed shape's parts by MEMORY USAGE, bytes (deterministic: jemalloc's
// size classes on Redis 7.0): the record 216 (robj 16, listpack 124 in 128,
// its 35-character key in 48, dict entry 24) and the reservation 104 (dict
// entry 24, 27-character key in 32, the 28-byte value embedded with its
// robj in 48). A record or reservation that grows past these fails.
const (
	maxSeedRecordBytes      = 216
	maxSeedReservationBytes = 104
)

// TestPendingCalloutMemory measures what a pending callout costs on a real
// Redis: its record, its due-set entry and its reservation, by the
// used_memory delta over 1,000 (and MEMORY USAGE of each part), for two
// request shapes — the benchmark's drain seed (Content-Type, a 31-byte
// body, a short key), which the sizing target sets at ≤ 512 B, and an
// Apex-shaped one (three headers, a UUID key, a source record, no body).
func TestPendingCalloutMemory(t *testing.T) {
	const n = 1000
	shapes := []struct {
		name          string
		nc            func(i int) policy.NewCallout
		limit         int64
		record, idemp int64 // MEMORY USAGE bounds, 0: none
	}{
		{"bench seed, 31-byte body", func(i int) policy.NewCallout {
			return policy.NewCallout{
				Endpoint: "payment-api", Issuer: "https://bench.my.salesforce.com", Method: http.MethodPost,
				Path: "/v1/charges", Header: http.Header{"Content-Type": {"application/json"}},
				Body: []byte(`{"amount":1000,"currency":"eur"}`[:31]), IdempotencyKey: fmt.Sprintf(`"seed-%d"`, i),
			}
		}, maxPendingBytes, maxSeedRecordBytes, maxSeedReservationBytes},
		{"Apex-shaped, 0-byte body, 55-byte traceparent", func(i int) policy.NewCallout {
			return policy.NewCallout{
				Endpoint: "payment-api", Issuer: "https://example.my.salesforce.com", Method: http.MethodPost,
				Path: "/v1/charges", Header: http.Header{
					"Content-Type": {"application/json"}, "Accept": {"application/json"},
					"User-Agent": {"SFDC-Callout/62.0"},
				},
				IdempotencyKey: fmt.Sprintf("7d3c1f0e-4b8a-4c7e-9f21-%012d", i), SourceRecord: "006000000000001AAA",
				TraceContext: fmt.Sprintf("00-4bf92f3577b34da6%016x-%016x-00", i+1, i+1),
			}
		}, maxPendingBytes + 128, 0, 0}, // not a target shape: room for allocator differences between Redis builds
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		if e.b.Name != "single" {
			t.Skip("MEMORY USAGE and INFO memory are measured on the real single node")
		}
		for _, sh := range shapes {
			t.Run(sh.name, func(t *testing.T) {
				s := e.store()
				ctx := ctxT(t)
				if err := e.b.Client.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				_ = e.b.Client.Do(ctx, "MEMORY", "PURGE").Err()
				// The endpoint hash, issuer map and sets exist before.
				mustEnqueueReq(t, s, sh.nc(-1))
				before := usedMemory(t, e)
				var last policy.NewCallout
				var lastID string
				for i := range n {
					last = sh.nc(i)
					r, err := s.Enqueue(ctx, last, enqOpts)
					if err != nil {
						t.Fatal(err)
					}
					lastID = r.ID
				}
				perCallout := (usedMemory(t, e) - before) / n
				q := keyspace.QueueAt("payment-api", keyspace.ShardOf("payment-api"))
				c, _, _ := q.Record(lastID)
				res := q.Reservation(last.Issuer, last.IdempotencyKey)
				record := e.b.Client.MemoryUsage(ctx, c, 0).Val()
				idem := e.b.Client.MemoryUsage(ctx, res, 0).Val()
				due := e.b.Client.MemoryUsage(ctx, q.ForOrg(keyspace.IssuerTag(last.Issuer), "").Due, 0).Val() / (n + 1)
				enc := e.b.Client.ObjectEncoding(ctx, c).Val()
				t.Logf("%s: %d bytes per pending keyed callout by used_memory delta (MEMORY USAGE: record %d (%s) + reservation %d + due entry ~%d); body %d bytes",
					sh.name, perCallout, record, enc, idem, due, len(last.Body))
				fields := e.b.Client.HGetAll(ctx, c).Val()
				var names []string
				payload := 0
				for f, v := range fields {
					names = append(names, fmt.Sprintf("%s:%d", f, len(v)))
					payload += len(f) + len(v)
				}
				sort.Strings(names)
				t.Logf("%s: record key %d chars, %d fields (%s: %d bytes of names and values); reservation key %d chars, value %d bytes; due member %d chars",
					sh.name, len(c), len(fields), strings.Join(names, " "), payload, len(res),
					len(e.b.Client.Get(ctx, res).Val()), len(lastID))
				if perCallout > sh.limit {
					t.Fatalf("a pending callout costs %d bytes, target ≤ %d", perCallout, sh.limit)
				}
				if sh.record > 0 && (record > sh.record || idem > sh.idemp) {
					t.Errorf("MEMORY USAGE: record %d bytes (bound %d), reservation %d (bound %d)", record, sh.record, idem, sh.idemp)
				}
				if enc != "listpack" {
					t.Errorf("record encoding %s, want listpack (every value ≤ 64 bytes)", enc)
				}

				// For the record: the same callouts after one failed attempt
				// each (attempt entry, last response of 11 body bytes,
				// scheduled again).
				before = usedMemory(t, e)
				failed := 0
				for range n/100 + 1 {
					for _, cl := range mustClaim(t, s, "payment-api", ClaimOptions{Batch: 100, Lease: testLease}).Claimed {
						comp := failure(e.clk.Now().Add(time.Hour))
						comp.CountsTowardBreaker = false // keep the breaker closed for the measurement
						mustComplete(t, s, cl, comp)
						failed++
					}
				}
				if failed != n+1 {
					t.Fatalf("failed %d callouts, want %d", failed, n+1)
				}
				t.Logf("%s: after one failed attempt: +%d bytes per callout", sh.name, (usedMemory(t, e)-before)/n)
			})
		}
	})
}

func usedMemory(t *testing.T, e *env) int64 {
	t.Helper()
	info, err := e.b.Client.Info(ctxT(t), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}
