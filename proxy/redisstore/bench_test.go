package redisstore

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/batch"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// BenchmarkKeyedWrite measures the store's part of a synchronous keyed
// write: Begin (create.lua) and the completion of its
// successful first attempt (complete.lua), from parallel callers, each
// completion either sent alone (Store.Complete) or through the completion
// writer (Completer), which pipelines those handed in while its previous
// pipeline was being written. One op is one keyed
// write. It reports round-trips/op (the client's pipelines and single
// commands) besides ns/op. It runs on miniredis, and on the real single
// node and cluster when CALLOUT_TEST_REDIS_URL and
// CALLOUT_TEST_REDIS_CLUSTER are set.
func BenchmarkKeyedWrite(b *testing.B) {
	for _, be := range redistest.Backends(b) {
		for _, via := range []string{"direct", "completer"} {
			var n atomic.Int64 // fresh keys across the runs of the sub-benchmark
			b.Run(be.Name+"/"+via, func(b *testing.B) {
				e := &env{b: be, clk: clocktest.New(t0)}
				h := &pipeHook{}
				s := hookedStoreB(b, e, h)
				var complete func(*policy.Claimed) error
				if via != "direct" {
					c := NewCompleter(s, batch.Options{})
					defer c.Close()
					complete = func(cl *policy.Claimed) error { _, err := c.Complete(ctxB(b), cl, success()); return err }
				} else {
					complete = func(cl *policy.Claimed) error { _, err := s.Complete(ctxB(b), cl, success()); return err }
				}
				h.pipelines.Store(0)
				h.singles.Store(0)
				b.SetParallelism(4) // 4 × GOMAXPROCS callers
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						r, err := s.Begin(ctxB(b), req("bench-api", fmt.Sprintf("%s-%d", via, n.Add(1)), "{}"),
							policy.BeginOptions{Lease: testLease})
						if err != nil || r.Claimed == nil {
							b.Errorf("begin: %+v, %v", r, err)
							return
						}
						if err := complete(r.Claimed); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(h.pipelines.Load()+h.singles.Load())/float64(b.N), "round-trips/op")
			})
		}
	}
}

// BenchmarkHoldAndRelease measures what a gate change costs the store
// besides its own script: a 429's pause shuts the gate of an endpoint with
// 1,000 waiting callouts, which package hold holds (hold/lua/park.lua, in
// batches of 1,000), and then the pause is lifted and it releases them.
// One op is both walks over the 1,000; it reports µs per callout of the
// two together. It runs on miniredis, and
// on the real single node and cluster when CALLOUT_TEST_REDIS_URL and
// CALLOUT_TEST_REDIS_CLUSTER are set.
func BenchmarkHoldAndRelease(b *testing.B) {
	const waiting = 1000
	for _, be := range redistest.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			e := &env{b: be, clk: clocktest.New(t0)}
			s := e.store()
			ep := fmt.Sprintf("park-bench-%d", e.seeds.Add(1000))
			storetest.MustEnqueue(b, s, ep, waiting)
			home := keyspace.Endpoint(ep)
			until := e.clk.Now().Add(time.Hour)
			b.ResetTimer()
			for range b.N {
				e.b.Client.HSet(ctxB(b), home, ePaused, until.UnixMilli())
				if n, err := s.held.Hold(ctxB(b), ep, "", until.UnixMilli()); err != nil || n != waiting {
					b.Fatalf("hold: %d, %v; want %d", n, err, waiting)
				}
				e.b.Client.HDel(ctxB(b), home, ePaused)
				if n, err := s.held.Release(ctxB(b), ep); err != nil || n != waiting {
					b.Fatalf("release: %d, %v; want %d", n, err, waiting)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/waiting, "µs/callout")
		})
	}
}
