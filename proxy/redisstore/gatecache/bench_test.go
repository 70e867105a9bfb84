package gatecache

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// BenchmarkCachedAdmission measures a read's gate answered from memory (a
// cached open gate): ARCHITECTURE.md "Hot-path budget" wants it free of
// allocations and locks beyond a read lock; allocs/op shows the first.
func BenchmarkCachedAdmission(b *testing.B) {
	mr := miniredis.RunT(b)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true})
	b.Cleanup(func() { _ = rdb.Close() })
	s := manual(newReplica(rdb, clocktest.New(t0), storetest.Rand(1)))
	if _, err := s.Admit(b.Context(), "bench-api", cacheBreaker); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := s.CachedAdmission("bench-api"); !ok {
				b.Fatal("the open gate was not answered from memory")
			}
		}
	})
}
