//go:build fault

package fault

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestReplicaSIGKILLUnderLoad: three replicas share a durable Redis; 600
// asynchronous writes are spread over them and replica r0 is SIGKILLed a
// third of the way in, while it holds leases. Every accepted callout ends
// succeeded (the upstream always answers 200) — none lost — and no key is
// ever attempted twice at once (contract §1, §3 leases: the dead replica's
// claims are re-dispatched only once their lease of attempt_timeout +
// policy.LeaseGrace has run out).
func TestReplicaSIGKILLUnderLoad(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	up, reps, c := payReplicas(t, rs, 3, []string{"connect_timeout: 500ms", "attempt_timeout: 1s", "header_timeout: 1s"}, "")

	const n = 600
	var killed atomic.Bool
	var once sync.Once
	target := func(i int) string {
		r := reps[i%3]
		if r == reps[0] && killed.Load() {
			r = reps[1]
		}
		return r.URL
	}
	kill := func(i int) {
		if i == n/3 {
			once.Do(func() { reps[0].Kill(); killed.Store(true); t.Logf("SIGKILLed r0 after request %d", i) })
		}
	}
	acc, refused := c.postAsync(n, 16, "pay", "kill", target, kill)
	t.Logf("accepted %d, not accepted %d (in flight to r0 when it died)", len(acc), refused)
	if len(acc) < n-32 {
		t.Fatalf("accepted only %d of %d", len(acc), n)
	}
	final := c.waitFinal(t, reps[1].URL, acc, 1*time.Second+policy.LeaseGrace+60*time.Second)
	wantAll(t, final, policy.Succeeded)
	up.CheckNoOverlap(t)
	for _, a := range acc {
		if up.Attempts(a.Key) == 0 {
			t.Errorf("callout %s (key %s) succeeded but the upstream never saw it", a.ID, a.Key)
		}
	}
}

// TestRedisSIGKILLUnderLoad: two replicas on a Redis with appendfsync
// always; 600 asynchronous writes, Redis SIGKILLed after a third of them
// and restarted on its data directory 1 s later. Requests during the
// outage are refused (503 store-unavailable) or fail; every callout that
// got a 202 is in Redis after the restart and ends succeeded, and no key
// is attempted twice at once (contract §1, §10).
func TestRedisSIGKILLUnderLoad(t *testing.T) {
	rs := proctest.StartRedis(t, true)
	up, reps, c := payReplicas(t, rs, 2, []string{"connect_timeout: 500ms", "attempt_timeout: 1s", "header_timeout: 1s"}, "")

	const n = 600
	var once sync.Once
	crash := func(i int) {
		if i == n/3 {
			once.Do(func() {
				rs.Crash()
				t.Logf("SIGKILLed redis-server after request %d", i)
				time.Sleep(time.Second)
				rs.Restart()
				t.Log("redis-server restarted from its append-only file")
			})
		}
	}
	acc, refused := c.postAsync(n, 16, "pay", "redis", func(i int) string { return reps[i%2].URL }, crash)
	t.Logf("accepted %d, not accepted %d (during the outage)", len(acc), refused)
	if len(acc) < n/2 {
		t.Fatalf("accepted only %d of %d", len(acc), n)
	}
	final := c.waitFinal(t, reps[0].URL, acc, 1*time.Second+policy.LeaseGrace+60*time.Second)
	wantAll(t, final, policy.Succeeded)
	up.CheckNoOverlap(t)
}
