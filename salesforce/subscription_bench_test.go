package salesforce

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// BenchmarkReprocessLatencyPubSub measures, in wall time, how long a
// reprocess request takes from the record's change in Salesforce (the
// emulator commits Reprocess Requested and publishes its change event) to
// the replay's creation (Replayer.ReplayOne returns the new chain), with
// the subscription running as a replica runs it (Run): the event over
// gRPC, its Avro decoding, one Composite call for the record's state, the
// claim and the replay in Redis. It reports p50 and p99 in ms
// (deploy/bench/BENCHMARKS.md "Reprocess latency"; goal p99 under 5 s).
// Run with -benchtime=200x: each request needs its own dead letter.
func BenchmarkReprocessLatencyPubSub(b *testing.B) {
	se := newSubEnv(b, sfemu.PubSubOptions{})
	roots := se.deadLetters("orders", b.N)
	se.drain()
	a := se.subscriber("replica-a", nil)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	defer func() { cancel(); <-ran }() // Run gives the lease back before Redis stops
	go func() { defer close(ran); a.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); se.ps.Streams() != 1 || a.Counts().Polls != 1; {
		if time.Now().After(deadline) {
			b.Fatal("the subscription never started")
		}
		time.Sleep(time.Millisecond)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		se.request(roots[i])
		for se.counter.count(roots[i]) == 0 {
			if time.Since(start) > 30*time.Second {
				b.Fatalf("request %d never replayed", i)
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}
