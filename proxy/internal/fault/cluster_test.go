//go:build fault

package fault

import (
	"context"
	"strconv"
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
// writes at load. The replication link of the primary that owns the
// endpoint's slot stalls, the primary is SIGKILLed 0.5 s into the stall
// (what the link held is lost with it), the cluster promotes its replica
// (cluster-node-timeout 1 s), the killed node comes back and replicates
// from the promoted one, and the proxies follow. Every one of at least
// 10,000 callouts answered 202 exists afterwards; the writes of the gap
// get 503 store-unavailable.
func TestClusterFailoverReplicatedLosesNothing(t *testing.T) {
	failoverLoss(t, "cluster", proxyconfig.DurabilityReplicated, clusterFailover)
}

// TestClusterFailoverLocalReportsLoss is the same failover with
// durability local: what the primary acknowledged while its replication
// link stalled never reached the replica. Reported, not asserted
// (contract §11: local promises what the primary itself keeps).
func TestClusterFailoverLocalReportsLoss(t *testing.T) {
	failoverLoss(t, "cluster", proxyconfig.DurabilityLocal, clusterFailover)
}

// clusterFailover runs the cluster failover with durability and returns
// how many callouts were answered 202 and which of them are gone.
func clusterFailover(t *testing.T, durability string) (int, []accepted) {
	// The slots are split evenly in primary order (proctest.StartCluster).
	owner := keyspace.Slot(keyspace.ShardPrefix(keyspace.ShardOf("pay"))) * 3 / keyspace.ClusterSlots
	var link *stallLink
	cl := proctest.StartCluster(t, proctest.ClusterOptions{Primaries: 3, Replicas: 1, NodeTimeout: time.Second,
		Args: func(i int, replica bool, port, bus int) []string {
			// Every node names itself 127.0.0.1 to clients (CLUSTER SLOTS,
			// MOVED); the owner's replica reaches the owner at its
			// announced address 127.0.0.2, through a link the test stalls.
			args := []string{"--cluster-announce-hostname", "127.0.0.1", "--cluster-preferred-endpoint-type", "hostname"}
			if i == owner && !replica {
				at := func(host string, p int) string { return host + ":" + strconv.Itoa(p) }
				link = newStallLinkOn(t, at("127.0.0.2", port), at("127.0.0.1", port))
				newStallLinkOn(t, at("127.0.0.2", bus), at("127.0.0.1", bus)) // the cluster bus: never stalled
				args = append(args, "--cluster-announce-ip", "127.0.0.2")
			}
			return args
		}})
	primary, replica := cl.Primaries[owner], cl.Replicas[owner][0]
	if node, err := cl.Client.MasterForKey(context.Background(), keyspace.ShardPrefix(keyspace.ShardOf("pay"))); err != nil ||
		node.Options().Addr != primary.Addr {
		t.Fatalf("the endpoint's slot is not on primary %d (%s): %v", owner, primary.Addr, err)
	}
	up := proctest.NewUpstream(t, nil)
	cfg := clusterConfig(cl.Seeds, durability, timeouts, endpoint("pay", up.URL))
	reps := proctest.StartReplicas(t, proxyBinary, 2, cfg, replicaEnv)
	c := newClient(t)

	acc := c.failoverLoad(t, reps, "cluster, durability "+durability, "cluster-"+durability, func(acc int) {
		link.Stall()
		time.Sleep(500 * time.Millisecond)
		primary.Crash()
		link.Cut() // what the link held dies with the primary
		killed := time.Now()
		replica.WaitInfo("replication", "role:master")
		t.Logf("after %d callouts accepted: replication link stalled, primary %s SIGKILLed 0.5 s into it; replica "+
			"%s promoted after %s", acc, primary.Addr, replica.Addr, time.Since(killed).Round(time.Millisecond))
		primary.Restart() // rejoins as the promoted primary's replica: WAIT confirms again
		primary.WaitInfo("replication", "master_link_status:up")
	})
	return len(acc), c.missing(t, reps[0].URL, acc)
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
