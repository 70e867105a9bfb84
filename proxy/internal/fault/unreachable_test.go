//go:build fault

package fault

import (
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// maxGapRSS bounds each replica's resident memory while Redis is
// unreachable under load: requests wait at most the store timeout and are
// refused, so nothing piles up (contract §10).
const maxGapRSS = 256 << 20

// TestRedisUnreachableFiveSeconds: two replicas reach Redis (appendfsync
// always) through a forwarder; under keyed asynchronous load the
// forwarder holds every byte for 5 s, then lets them through. During the
// gap writes are answered 503 store-unavailable (or 503 overloaded), never
// anything else (contract §4 "Redis unreachable", §10); after it they are
// accepted again; no callout answered 202 is lost; each replica's memory
// stays bounded.
func TestRedisUnreachableFiveSeconds(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	link := newStallLink(t, rs.Addr)
	up := proctest.NewUpstream(t, nil)
	cfg := config("redis://"+link.Addr()+"/0", timeouts, endpoint("pay", up.URL))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv)
	c := newClient(t)

	var (
		stop                 atomic.Bool
		seq                  sync.WaitGroup
		mu                   sync.Mutex
		gap                  = map[string]int{} // answers that arrived while the link was held
		accAtResume, peakRSS int64
	)
	var load *keyedLoad
	var loadReady = make(chan struct{})
	seq.Go(func() {
		<-loadReady
		time.Sleep(2 * time.Second)
		before := snapshot(load)
		link.Stall()
		held := time.Now()
		for time.Since(held) < 5*time.Second {
			for _, r := range reps {
				if rss, err := r.RSS(); err == nil {
					peakRSS = max(peakRSS, rss)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		during := snapshot(load)
		link.Resume()
		mu.Lock()
		for k, v := range during {
			gap[k] = v - before[k]
		}
		accAtResume = int64(load.count())
		mu.Unlock()
		t.Logf("Redis unreachable for 5 s: answers during the gap %v", gap)
		time.Sleep(3 * time.Second)
		stop.Store(true)
	})
	load = c.startKeyedLoad([]string{reps[0].URL, reps[1].URL}, "pay", "gap", 64, 60*time.Second,
		func(*keyedLoad) bool { return stop.Load() })
	close(loadReady)
	load.wait()
	seq.Wait()

	acc := load.accepted()
	t.Logf("%d callouts accepted; all answers %v; peak RSS of a replica during the gap %d MiB",
		len(acc), load.codes, peakRSS>>20)
	for label, n := range load.codes {
		if label != "202" && label != "503 store-unavailable" && label != "503 overloaded" {
			t.Errorf("%d answers %q; the contract allows 202, 503 store-unavailable and 503 overloaded", n, label)
		}
	}
	if gap["503 store-unavailable"] == 0 {
		t.Errorf("no 503 store-unavailable while Redis was unreachable: %v", gap)
	}
	if int64(len(acc)) <= accAtResume {
		t.Errorf("no callout accepted after Redis came back (%d at the resume, %d at the end)", accAtResume, len(acc))
	}
	if peakRSS == 0 || peakRSS > maxGapRSS {
		t.Errorf("peak RSS of a replica during the gap %d MiB, want (0, %d MiB]", peakRSS>>20, maxGapRSS>>20)
	}
	if lost := c.missing(t, reps[0].URL, acc); len(lost) > 0 {
		t.Errorf("%d of %d accepted callouts lost, e.g. %v", len(lost), len(acc), lost[:min(5, len(lost))])
	}
}

// snapshot copies the answer counts of l so far.
func snapshot(l *keyedLoad) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.codes)
}
