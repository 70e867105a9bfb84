package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gatecache"
)

// gateCacheStats is what the metrics need of the gate cache;
// *gatecache.Cache implements it.
type gateCacheStats interface {
	Stats() gatecache.Stats
}

// registerGateCache registers the gate cache's counters on
// reg, read from the cache at each scrape:
//   - callout_gate_cache_reads_total{result="hit"|"miss"}: reads whose gate
//     was answered from memory, or asked of Redis;
//   - callout_gate_cache_messages_total: gate-change messages received;
//   - callout_gate_cache_polls_total: backstop polls of the cached gates.
func registerGateCache(cache gateCacheStats, reg prometheus.Registerer) error {
	counter := func(name, help string, labels prometheus.Labels, f func(gatecache.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(f(cache.Stats())) })
	}
	const reads = "Reads whose endpoint gate was answered from this replica's gate cache (hit) or asked of Redis (miss)."
	for _, c := range []prometheus.Collector{
		counter("callout_gate_cache_reads_total", reads, prometheus.Labels{"result": "hit"},
			func(s gatecache.Stats) uint64 { return s.Hits }),
		counter("callout_gate_cache_reads_total", reads, prometheus.Labels{"result": "miss"},
			func(s gatecache.Stats) uint64 { return s.Misses }),
		counter("callout_gate_cache_messages_total", "Gate-change messages received on the cp:gate channel.", nil,
			func(s gatecache.Stats) uint64 { return s.Messages }),
		counter("callout_gate_cache_polls_total", "Backstop polls that read every cached endpoint gate.", nil,
			func(s gatecache.Stats) uint64 { return s.Polls }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
