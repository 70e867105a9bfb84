package proctest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// Cluster is a throwaway Redis Cluster of one test on loopback: its own
// redis-server processes (cluster-enabled, nothing persisted), the slots
// split evenly over the primaries, each primary with its replicas. Unlike
// redistest's shared cluster (start-redis.sh, three primaries without
// replicas) a test may kill its nodes and wait for a replica's WAIT.
type Cluster struct {
	// Primaries in slot order (Primaries[0] owns slot 0); Replicas[i] are
	// the replicas of Primaries[i] as the cluster was formed.
	Primaries []*Redis
	Replicas  [][]*Redis
	// Seeds are the primaries' host:port, a configuration's redis.cluster.
	Seeds []string
	// Client is a cluster client on Seeds.
	Client *redis.ClusterClient
}

// ClusterOptions shapes a Cluster.
type ClusterOptions struct {
	// Primaries and Replicas (of each primary) count the nodes.
	Primaries, Replicas int
	// NodeTimeout is cluster-node-timeout: a primary unreachable that long
	// is replaced by one of its replicas.
	NodeTimeout time.Duration
	// Args, when set, gives more redis-server arguments to primary i
	// (replica false) or to each of its replicas, which will listen on
	// port and have their cluster bus on bus.
	Args func(i int, replica bool, port, bus int) []string
}

// StartCluster starts the nodes of o, forms the cluster (CLUSTER
// ADDSLOTSRANGE, MEET, REPLICATE) and returns once every node reports
// cluster_state:ok and every replica's link is up. Skipped without
// redis-server (failed under CALLOUT_TEST_REQUIRE_REAL=1).
func StartCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	primaries := o.Primaries
	c := &Cluster{Replicas: make([][]*Redis, primaries)}
	node := func(i int, replica bool, bus int) *Redis {
		args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10)}
		port := FreePort(t)
		if o.Args != nil {
			args = append(args, o.Args(i, replica, port, bus)...)
		}
		return startRedisOn(t, "redis-server", false, port, args...)
	}
	bus := FreePort(t) // the first node's cluster bus port, which the others MEET
	var all []*Redis
	for i := range primaries {
		b := bus
		if i > 0 {
			b = FreePort(t)
		}
		p := node(i, false, b)
		c.Primaries, c.Seeds, all = append(c.Primaries, p), append(c.Seeds, p.Addr), append(all, p)
		lo, hi := i*clusterSlots/primaries, (i+1)*clusterSlots/primaries-1
		must(t, p.Client.Do(context.Background(), "cluster", "addslotsrange", lo, hi).Err())
		for range o.Replicas {
			r := node(i, true, FreePort(t))
			c.Replicas[i], all = append(c.Replicas[i], r), append(all, r)
		}
	}
	ctx := context.Background()
	for _, n := range all[1:] {
		must(t, n.Client.Do(ctx, "cluster", "meet", "127.0.0.1", all[0].port, bus).Err())
	}
	for _, n := range all {
		n.waitNodes(len(all))
	}
	for i, p := range c.Primaries {
		id, err := p.Client.Do(ctx, "cluster", "myid").Text()
		must(t, err)
		for _, r := range c.Replicas[i] {
			must(t, r.Client.Do(ctx, "cluster", "replicate", id).Err())
		}
	}
	for i := range c.Primaries {
		for _, r := range c.Replicas[i] {
			r.waitLinkUp()
		}
	}
	for _, n := range all {
		n.waitInfoCmd("cluster_state:ok")
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Client.Close() })
	return c
}

// waitNodes waits until this node knows n nodes, none in handshake
// (CLUSTER NODES).
func (r *Redis) waitNodes(n int) {
	r.t.Helper()
	r.await("CLUSTER NODES", func(ctx context.Context) (string, bool) {
		v, err := r.Client.ClusterNodes(ctx).Result()
		return v, err == nil && strings.Count(strings.TrimSpace(v), "\n")+1 >= n && !strings.Contains(v, "handshake")
	})
}

// waitInfoCmd waits until CLUSTER INFO contains want.
func (r *Redis) waitInfoCmd(want string) {
	r.t.Helper()
	r.await("CLUSTER INFO "+want, func(ctx context.Context) (string, bool) {
		v, err := r.Client.ClusterInfo(ctx).Result()
		return v, err == nil && strings.Contains(v, want)
	})
}

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
