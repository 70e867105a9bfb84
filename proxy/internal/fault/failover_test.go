//go:build fault

package fault

import (
	"strconv"
	"sync"
	"testing"
	"time"

	proxyconfig "github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// Each failover run stops its load once failoverTarget callouts were
// answered 202; the fault hits once failoverFaultAt were.
const (
	failoverTarget  = 10_000
	failoverFaultAt = 4_000
)

// TestSentinelFailoverReplicatedLosesNothing: a primary (appendfsync
// always) and two replicas whose replication links run through a forwarder,
// three Sentinels, two proxy replicas on the Sentinels with durability
// replicated, keyed asynchronous writes at load. Then the replication link
// stalls for 1 s, the primary is SIGKILLed half-way through the stall, and
// the Sentinels promote a replica; the proxies follow it. Every one of
// at least 10,000 callouts answered 202 exists afterwards: a write is
// answered only once the replica has it (contract §11).
func TestSentinelFailoverReplicatedLosesNothing(t *testing.T) {
	failoverLoss(t, "Sentinel", proxyconfig.DurabilityReplicated, sentinelFailover)
}

// TestSentinelFailoverLocalReportsLoss is the same failover with
// durability local: what the primary acknowledged while the link stalled
// never reached the replica. The number lost is reported, not asserted
// (contract §11: local promises only what the primary itself keeps).
func TestSentinelFailoverLocalReportsLoss(t *testing.T) {
	failoverLoss(t, "Sentinel", proxyconfig.DurabilityLocal, sentinelFailover)
}

// failoverLoss runs failover with durability: with local the number of
// acknowledged callouts lost is reported, with any other level none may be
// lost (contract §11).
func failoverLoss(t *testing.T, what, durability string, failover func(*testing.T, string) (int, []accepted)) {
	acc, lost := failover(t, durability)
	if durability == proxyconfig.DurabilityLocal {
		t.Logf("%s, durability local: %d of %d acknowledged callouts lost in the failover (%.1f per 1,000)",
			what, len(lost), acc, 1000*float64(len(lost))/float64(max(acc, 1)))
	} else if len(lost) > 0 {
		t.Errorf("%s: %d of %d acknowledged callouts lost in the failover with durability %s, e.g. %v",
			what, len(lost), acc, durability, lost[:min(5, len(lost))])
	}
}

// sentinelFailover runs the failover scenario with durability and returns
// how many callouts were answered 202 and which of them are gone.
func sentinelFailover(t *testing.T, durability string) (int, []accepted) {
	primaryPort := proctest.FreePort(t)
	primaryAddr := "127.0.0.1:" + strconv.Itoa(primaryPort)
	primary := runRedisNode(t, "primary", primaryPort)
	link := newStallLink(t, primaryAddr)
	// Two replicas, both through the link: after the promotion of one, the
	// other replicates from it, so replicated writes have a replica to
	// confirm them again (with a single replica the promoted primary has
	// none and every replicated write is refused, docs/operating.md).
	var replicaAddrs []string
	for i := range 2 {
		port := proctest.FreePort(t)
		replicaAddrs = append(replicaAddrs, "127.0.0.1:"+strconv.Itoa(port))
		runRedisNode(t, "replica"+strconv.Itoa(i), port, "--replicaof", "127.0.0.1", strconv.Itoa(link.Port()))
	}
	sentinels := startSentinels(t, primaryPort, 2)

	up := proctest.NewUpstream(t, nil)
	cfg := sentinelConfig(sentinels, durability, timeouts, endpoint("pay", up.URL))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv)
	c := newClient(t)

	var waits, waitsAtAcc int
	acc := c.failoverLoad(t, reps, "durability "+durability, durability, func(acc int) {
		waits, waitsAtAcc = commandCalls(primaryAddr, "wait"), acc
		link.Stall()
		time.Sleep(500 * time.Millisecond)
		primary.Kill()
		time.Sleep(500 * time.Millisecond)
		// What the link held is lost with the primary: released now, it
		// would reach the replicas before the Sentinels promote one.
		link.Cut()
		t.Logf("after %d callouts accepted: replication link stalled 1 s, primary SIGKILLed 0.5 s into it, "+
			"the held bytes dropped", acc)
	})
	if durability == proxyconfig.DurabilityReplicated && waitsAtAcc > 0 {
		t.Logf("WAITs on the first primary for the first %d acknowledged writes: %d (%.3f per write)",
			waitsAtAcc, waits, float64(waits)/float64(waitsAtAcc))
	}
	sentinels.waitMaster(t, replicaAddrs, 30*time.Second)
	return len(acc), c.missing(t, reps[0].URL, acc)
}

// failoverLoad runs keyed asynchronous writes (keys prefix-N) against the
// replicas reps until failoverTarget were answered 202, calling fault once
// failoverFaultAt were (the load goes on meanwhile), and returns the
// accepted callouts; fewer than failoverTarget within the deadline fail the
// test.
func (c *client) failoverLoad(t *testing.T, reps []*proctest.Proxy, label, prefix string, fault func(acc int)) []accepted {
	t.Helper()
	var (
		once    sync.Once
		faulted sync.WaitGroup
	)
	start := time.Now()
	load := c.runKeyedLoad([]string{reps[0].URL, reps[1].URL}, "pay", prefix, 32, 150*time.Second,
		func(l *keyedLoad) bool {
			n := l.count()
			if n >= failoverFaultAt {
				once.Do(func() { faulted.Go(func() { fault(n) }) })
			}
			return n >= failoverTarget
		})
	faulted.Wait()
	acc := load.accepted()
	t.Logf("%s: %d callouts accepted in %s; answers %v", label, len(acc), time.Since(start).Round(time.Millisecond),
		load.codes)
	if len(acc) < failoverTarget {
		t.Fatalf("only %d callouts accepted within the deadline (the proxies did not follow the promotion?)", len(acc))
	}
	return acc
}
