package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/redis/go-redis/v9"
)

// ownRedis starts a redis-server of this test on a free loopback port,
// replicating from primary when primary is not "", and returns a client
// of it. Without redis-server the test is skipped (failed under
// CALLOUT_TEST_REQUIRE_REAL=1).
func ownRedis(t *testing.T, primary string) (*redis.Client, string) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.EnvRequireReal) == "1" {
			t.Fatalf("redis-server is required: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	port := proctest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(), "--save", "",
		"--appendonly", "no", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"}
	if primary != "" {
		host, p, _ := strings.Cut(primary, ":")
		args = append(args, "--replicaof", host, p)
	}
	proc := proctest.Start(t, "redis "+addr, "redis-server", args, os.Environ(), nil)
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && (primary == "" || strings.Contains(info, "master_link_status:up")) {
			return c, addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %s not ready: %v\n%s", addr, err, proc.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCalls is the number of WAIT commands c's server has run
// (INFO commandstats, cmdstat_wait calls=N).
func waitCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	v := infoField(info, "cmdstat_wait")
	calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
	n, _ := strconv.Atoi(calls)
	return n
}

func durableStore(c redis.UniversalClient, acks *Acknowledger) *Store {
	return New(c, Options{Now: clocktest.New(t0).Now, Acknowledger: acks})
}

// TestAcknowledgerGroupsConcurrentWrites: 400 concurrent keyed creates on
// a primary with one replica are all confirmed (every record is on the
// replica when Enqueue returns) by far fewer WAITs than writes, and a
// lone write costs exactly one.
func TestAcknowledgerGroupsConcurrentWrites(t *testing.T) {
	primary, addr := ownRedis(t, "")
	replica, _ := ownRedis(t, addr)
	acks, err := NewAcknowledger(primary, AckOptions{Replicas: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := durableStore(primary, acks)
	ctx := ctxT(t)

	before := waitCalls(t, primary)
	if _, err := s.Enqueue(ctx, req("pay", "lone", "{}"), enqOpts); err != nil {
		t.Fatal(err)
	}
	if got := waitCalls(t, primary) - before; got != 1 {
		t.Errorf("a lone write ran %d WAITs, want 1", got)
	}

	const n = 400
	before = waitCalls(t, primary)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r, err := s.Enqueue(ctx, req("pay", fmt.Sprint("k-", i), "{}"), enqOpts)
			if err != nil {
				errs <- err
				return
			}
			// Confirmed: the replica has the record now.
			if ex, err := replica.Exists(ctx, recordKey(r.ID)).Result(); err != nil || ex != 1 {
				errs <- fmt.Errorf("callout %s acknowledged but not on the replica (exists %d, %v)", r.ID, ex, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waits := waitCalls(t, primary) - before
	t.Logf("%d concurrent writes, %d WAITs (%.3f per write)", n, waits, float64(waits)/n)
	if waits < 1 || waits > n/4 {
		t.Errorf("%d concurrent writes ran %d WAITs, want 1 … %d", n, waits, n/4)
	}
}

// TestAcknowledgerRefusesWithoutReplica: with no replica to confirm, a
// create fails with ErrNotDurable (which is ErrUnavailable too) after the
// timeout; an asynchronous callout it wrote exists (the same key then
// answers from it), a synchronous one is withdrawn.
func TestAcknowledgerRefusesWithoutReplica(t *testing.T) {
	primary, _ := ownRedis(t, "")
	acks, err := NewAcknowledger(primary, AckOptions{Replicas: 1, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	_, err = durableStore(primary, acks).Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	if !errors.Is(err, policy.ErrNotDurable) || !errors.Is(err, policy.ErrUnavailable) {
		t.Fatalf("Enqueue without a replica: %v, want ErrNotDurable and ErrUnavailable", err)
	}
	again, err := durableStore(primary, nil).Enqueue(ctx, req("pay", "k", "{}"), enqOpts)
	if err != nil || again.Existing == nil || !again.Existing.SameRequest {
		t.Fatalf("the same key again: %+v, %v; want the existing callout", again, err)
	}
	cl, err := durableStore(primary, acks).Begin(ctx, req("pay", "sync", "{}"), policy.BeginOptions{Lease: testLease})
	if !errors.Is(err, policy.ErrNotDurable) || cl.Claimed != nil {
		t.Fatalf("Begin without a replica: %+v, %v; want ErrNotDurable and nothing to send", cl, err)
	}
	// The synchronous callout was withdrawn (nothing was sent): the same key
	// begins afresh, as after any refusal before dispatch (contract §5), and
	// no lease is left to lapse into an attempt that never went out.
	if n := primary.ZCard(ctx, homeQueue("pay").lease).Val(); n != 0 {
		t.Fatalf("%d leases left after the withdrawn Begin, want 0", n)
	}
	fresh, err := durableStore(primary, nil).Begin(ctx, req("pay", "sync", "{}"), policy.BeginOptions{Lease: testLease})
	if err != nil || fresh.Existing != nil || fresh.Claimed == nil {
		t.Fatalf("the same key after the withdrawal: %+v, %v; want a new callout to send", fresh, err)
	}
}

// TestAcknowledgerCheckVersion: fsync (WAITAOF) is refused on a Redis
// older than 7.2 with the version found, and an Acknowledger is refused on
// a Cluster.
func TestAcknowledgerCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"7.0.15", false}, {"6.2.0", false}, {"7.2.0", true}, {"7.4.1", true}, {"8.0.0", true}, {"", false}, {"x.y", false}} {
		if got := atLeast(tt.v, 7, 2); got != tt.want {
			t.Errorf("atLeast(%q, 7, 2) = %v, want %v", tt.v, got, tt.want)
		}
	}
	primary, _ := ownRedis(t, "")
	info, err := primary.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	version := infoField(info, "redis_version")
	acks, _ := NewAcknowledger(primary, AckOptions{AOF: true})
	err = acks.CheckVersion(context.Background())
	var ve *VersionError
	switch {
	case atLeast(version, 7, 2) && err != nil:
		t.Errorf("CheckVersion on %s: %v", version, err)
	case !atLeast(version, 7, 2) && (!errors.As(err, &ve) || ve.Found != version || !strings.Contains(err.Error(), version)):
		t.Errorf("CheckVersion on %s: %v, want a *VersionError naming it", version, err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	if _, err := NewAcknowledger(cc, AckOptions{Replicas: 1}); err == nil {
		t.Error("NewAcknowledger accepted a Cluster client")
	}
}
