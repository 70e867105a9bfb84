//go:build fault

package fault

import (
	"context"
	"strings"
	"testing"
	"time"

	proxyconfig "github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestClusterFailoverReplicatedLosesNothing: a Redis Cluster of three
// primaries with a replica each, two proxy replicas on it with durability
// replicated (acknowledged per primary, contract §11), keyed asynchronous
// writes at load. The primary that owns the endpoint's slot is SIGKILLed;
// the cluster promotes its replica (cluster-node-timeout 1 s), the
// killed node comes back and replicates from the promoted one, and the
// proxies follow. Every one of at least 10,000 callouts answered 202
// exists afterwards; the writes of the gap get 503 store-unavailable.
// (Without a stalled replication link, durability local lost none here
// either: this case shows that per-primary acknowledgements survive a
// failover, the Sentinel cases show what local loses.)
func TestClusterFailoverReplicatedLosesNothing(t *testing.T) {
	cl := proctest.StartCluster(t, 3, 1, time.Second)
	owner, replica := clusterOwner(t, cl, "pay")
	up := proctest.NewUpstream(t, nil)
	cfg := clusterConfig(cl.Seeds, proxyconfig.DurabilityReplicated, timeouts, endpoint("pay", up.URL))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv)
	c := newClient(t)

	acc := c.failoverLoad(t, reps, "cluster, durability replicated", "cluster", func(acc int) {
		owner.Crash()
		promoted := time.Now()
		waitRole(t, replica, "role:master", 30*time.Second)
		t.Logf("after %d callouts accepted: primary %s SIGKILLed; replica %s promoted after %s", acc, owner.Addr,
			replica.Addr, time.Since(promoted).Round(time.Millisecond))
		owner.Restart() // rejoins as the promoted primary's replica: WAIT confirms again
		waitRole(t, owner, "master_link_status:up", 30*time.Second)
	})
	if lost := c.missing(t, reps[0].URL, acc); len(lost) > 0 {
		t.Errorf("%d of %d acknowledged callouts lost in the cluster failover with durability replicated, e.g. %v",
			len(lost), len(acc), lost[:min(5, len(lost))])
	}
}

// clusterOwner returns the primary of cl that owns endpoint's slot (its
// home queue's hash tag) and that primary's replica.
func clusterOwner(t *testing.T, cl *proctest.Cluster, endpoint string) (*proctest.Redis, *proctest.Redis) {
	t.Helper()
	node, err := cl.Client.MasterForKey(context.Background(), keyspace.ShardPrefix(keyspace.ShardOf(endpoint)))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range cl.Primaries {
		if p.Addr == node.Options().Addr {
			return p, cl.Replicas[i][0]
		}
	}
	t.Fatalf("no primary of %v owns %s's slot (%s)", cl.Seeds, endpoint, node.Options().Addr)
	return nil, nil
}

// waitRole waits until r's INFO replication contains want.
func waitRole(t *testing.T, r *proctest.Redis, want string, within time.Duration) {
	t.Helper()
	end := time.Now().Add(within)
	for {
		info, err := r.Client.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, want) {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: INFO replication lacks %q after %s (%v)", r.Addr, want, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterConfig is config() with its redis block replaced by one on the
// cluster seeds, with durability level and its timeout.
func clusterConfig(seeds []string, durability string, policy []string, endpoints ...string) string {
	const placeholder = "redis://cluster.invalid:1/0"
	block := "redis:\n  cluster: [" + strings.Join(seeds, ", ") + "]\n  durability: " + durability + "\n"
	if durability != proxyconfig.DurabilityLocal {
		block += "  durability_timeout: 1s\n"
	}
	return strings.Replace(config(placeholder, policy, endpoints...), "redis:\n  url: "+placeholder+"\n", block, 1)
}
