package durable

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/redis/go-redis/v9"
)

// waitCalls is the number of WAIT (or WAITAOF) commands c's server has run
// (INFO commandstats, cmdstat_wait calls=N).
func waitCalls(t *testing.T, c *redis.Client, cmd string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls, _, _ := strings.Cut(strings.TrimPrefix(infoField(info, "cmdstat_"+cmd), "calls="), ",")
	n, _ := strconv.Atoi(calls)
	return n
}

// ctxT is a test's context (storetest.Ctx).
func ctxT(t *testing.T) context.Context { return storetest.Ctx(t) }

// writeAndAck writes n keys concurrently through rdb, each followed by
// Ack, and reports an error for every key that its replica (replicaOf)
// lacks when Ack returns: a confirmed write is on a replica.
func writeAndAck(t *testing.T, rdb redis.UniversalClient, acks *Acknowledger, n int, replicaOf func(key string) *redis.Client) {
	t.Helper()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprint("cp:{k", i, "}:c")
			if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
				errs <- err
				return
			}
			if err := acks.Ack(ctx, key); err != nil {
				errs <- fmt.Errorf("Ack %s: %w", key, err)
				return
			}
			if ex, err := replicaOf(key).Exists(ctx, key).Result(); err != nil || ex != 1 {
				errs <- fmt.Errorf("%s acknowledged but not on its replica (exists %d, %v)", key, ex, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestGroupsConcurrentWrites: 400 concurrent writes on a primary with one
// replica are all confirmed (every key is on the replica when Ack returns)
// by far fewer WAITs than writes, and a lone write costs exactly one.
func TestGroupsConcurrentWrites(t *testing.T) {
	primary := proctest.StartRedis(t, false)
	replica := proctest.StartReplica(t, primary)
	acks := New(primary.Client, Options{Replicas: 1, Timeout: 5 * time.Second})
	onReplica := func(string) *redis.Client { return replica.Client }

	before := waitCalls(t, primary.Client, "wait")
	writeAndAck(t, primary.Client, acks, 1, onReplica)
	if got := waitCalls(t, primary.Client, "wait") - before; got != 1 {
		t.Errorf("a lone write ran %d WAITs, want 1", got)
	}
	const n = 400
	before = waitCalls(t, primary.Client, "wait")
	writeAndAck(t, primary.Client, acks, n, onReplica)
	waits := waitCalls(t, primary.Client, "wait") - before
	t.Logf("%d concurrent writes, %d WAITs (%.3f per write)", n, waits, float64(waits)/n)
	if waits < 1 || waits > n/4 {
		t.Errorf("%d concurrent writes ran %d WAITs, want 1 … %d", n, waits, n/4)
	}
}

// TestRefusesWithoutReplica: with no replica to confirm, Ack fails with
// ErrNotDurable (which is ErrUnavailable too) after the timeout.
func TestRefusesWithoutReplica(t *testing.T) {
	primary := proctest.StartRedis(t, false)
	acks := New(primary.Client, Options{Replicas: 1, Timeout: 50 * time.Millisecond})
	err := acks.Ack(ctxT(t), "cp:{k}:c")
	if !errors.Is(err, policy.ErrNotDurable) || !errors.Is(err, policy.ErrUnavailable) {
		t.Fatalf("Ack without a replica: %v, want ErrNotDurable and ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "0 of 1 replicas") {
		t.Errorf("Ack without a replica: %q, want it to say 0 of 1 replicas", err)
	}
}

// TestClusterGroupsPerPrimary: on a 3-primary Cluster with a replica each,
// writes spread over every slot are each confirmed by the replica of the
// primary that owns them (the key is there when Ack returns), and every
// primary ran WAITs of its own, far fewer than the writes. On a Cluster
// without replicas every Ack is refused: WAIT answers 0; and fsync's
// version check asks every primary (a Redis before 7.2 is named).
func TestClusterGroupsPerPrimary(t *testing.T) {
	proctest.SkipOnEmbeddedStore(t) // nine redis-servers: the real-Redis run's
	c := proctest.StartCluster(t, proctest.ClusterOptions{Primaries: 3, Replicas: 1, NodeTimeout: 5 * time.Second})
	acks := New(c.Client, Options{Replicas: 1, Timeout: 5 * time.Second})
	replicaOf := map[string]*redis.Client{}
	for i, p := range c.Primaries {
		// READONLY: a cluster replica answers reads of its primary's slots.
		r := redis.NewClient(&redis.Options{Addr: c.Replicas[i][0].Addr, DisableIdentity: true,
			OnConnect: func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }})
		t.Cleanup(func() { _ = r.Close() })
		replicaOf[p.Addr] = r
	}
	onReplica := func(key string) *redis.Client {
		node, err := c.Client.MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return replicaOf[node.Options().Addr]
	}
	before := make([]int, len(c.Primaries))
	for i, p := range c.Primaries {
		before[i] = waitCalls(t, p.Client, "wait")
	}
	const n = 600
	writeAndAck(t, c.Client, acks, n, onReplica)
	total := 0
	for i, p := range c.Primaries {
		w := waitCalls(t, p.Client, "wait") - before[i]
		total += w
		if w < 1 {
			t.Errorf("primary %s ran no WAIT: its writes were not confirmed on it", p.Addr)
		}
	}
	t.Logf("%d concurrent writes over 3 primaries, %d WAITs (%.3f per write)", n, total, float64(total)/n)
	if total > n/4 {
		t.Errorf("%d concurrent writes ran %d WAITs, want at most %d", n, total, n/4)
	}

	bare := proctest.StartCluster(t, proctest.ClusterOptions{Primaries: 3, NodeTimeout: 5 * time.Second})
	refusing := New(bare.Client, Options{Replicas: 1, Timeout: 50 * time.Millisecond})
	for i := range 3 {
		key := fmt.Sprint("cp:{k", i, "}:c")
		if err := bare.Client.Set(ctxT(t), key, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := refusing.Ack(ctxT(t), key); !errors.Is(err, policy.ErrNotDurable) {
			t.Errorf("Ack of %s on a Cluster without replicas: %v, want ErrNotDurable", key, err)
		}
	}
	// fsync asks every primary for its version.
	info, err := bare.Primaries[2].Client.Info(ctxT(t), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	version := infoField(info, "redis_version")
	err = New(bare.Client, Options{AOF: true}).CheckVersion(ctxT(t))
	var ve *VersionError
	if atLeast(version, 7, 2) != (err == nil) || (err != nil && (!errors.As(err, &ve) || ve.Found != version)) {
		t.Errorf("CheckVersion on a Cluster of Redis %s: %v", version, err)
	}
}

// TestCheckVersion: fsync (WAITAOF) is refused on a Redis older than 7.2
// with the version found; on 7.2 or later (CALLOUT_TEST_REDIS72_SERVER,
// e.g. Valkey) it is accepted.
func TestCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"7.0.15", false}, {"6.2.0", false}, {"7.2.0", true}, {"7.4.1", true}, {"8.0.0", true}, {"", false}, {"x.y", false}} {
		if got := atLeast(tt.v, 7, 2); got != tt.want {
			t.Errorf("atLeast(%q, 7, 2) = %v, want %v", tt.v, got, tt.want)
		}
	}
	primary := proctest.StartRedis(t, false)
	info, err := primary.Client.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	version := infoField(info, "redis_version")
	err = New(primary.Client, Options{AOF: true}).CheckVersion(context.Background())
	var ve *VersionError
	switch {
	case atLeast(version, 7, 2) && err != nil:
		t.Errorf("CheckVersion on %s: %v", version, err)
	case !atLeast(version, 7, 2) && (!errors.As(err, &ve) || ve.Found != version || !strings.Contains(err.Error(), version)):
		t.Errorf("CheckVersion on %s: %v, want a *VersionError naming it", version, err)
	}
}

// TestFsyncOnRedis72: on a Redis 7.2+ (or Valkey) with the append-only
// file fsynced, fsync acknowledgements succeed, grouped (fewer WAITAOFs
// than writes); without the append-only file WAITAOF is refused and Ack
// fails with ErrNotDurable. Skipped unless CALLOUT_TEST_REDIS72_SERVER
// names such a server.
func TestFsyncOnRedis72(t *testing.T) {
	aof := proctest.StartRedis72(t, true)
	acks := New(aof.Client, Options{AOF: true, Timeout: 5 * time.Second})
	if err := acks.CheckVersion(ctxT(t)); err != nil {
		t.Fatalf("CheckVersion on a Redis 7.2+: %v", err)
	}
	const n = 200
	before := waitCalls(t, aof.Client, "waitaof")
	writeAndAck(t, aof.Client, acks, n, func(string) *redis.Client { return aof.Client })
	waits := waitCalls(t, aof.Client, "waitaof") - before
	t.Logf("fsync: %d concurrent writes, %d WAITAOFs", n, waits)
	if waits < 1 || waits > n/4 {
		t.Errorf("%d concurrent writes ran %d WAITAOFs, want 1 … %d", n, waits, n/4)
	}

	noAOF := proctest.StartRedis72(t, false)
	err := New(noAOF.Client, Options{AOF: true, Timeout: 50 * time.Millisecond}).Ack(ctxT(t), "cp:{k}:c")
	if !errors.Is(err, policy.ErrNotDurable) {
		t.Errorf("fsync without an append-only file: %v, want ErrNotDurable", err)
	}
}
