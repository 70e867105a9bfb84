package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// shardedStore is e.store() with endpoint sharded n ways.
func shardedStore(e *env, endpoint string, n int) *Store {
	return e.storeWith(func(o *Options) {
		o.Shards = func(ep string) int {
			if ep == endpoint {
				return n
			}
			return 1
		}
	})
}

// dueIn is how many callouts each of endpoint's n queues holds due.
func dueIn(t *testing.T, e *env, endpoint string, n int) []int64 {
	t.Helper()
	var out []int64
	for _, sh := range keyspace.QueueShards(endpoint, n) {
		out = append(out, e.b.Client.ZCard(ctxT(t), orgQueue(keyspace.QueueAt(endpoint, sh)).Due).Val())
	}
	return out
}

// claimAll claims every due callout of endpoint through s.
func claimEvery(t *testing.T, s *Store, endpoint string) []*policy.Claimed {
	t.Helper()
	var out []*policy.Claimed
	for {
		r := mustClaim(t, s, endpoint, ClaimOptions{Batch: 100, Lease: testLease})
		if len(r.Claimed) == 0 {
			return out
		}
		out = append(out, r.Claimed...)
	}
}

// An endpoint with shards: 3 spreads its callouts over three queues in
// three hash tags (on the test cluster, three primaries); a key always
// maps to one queue, so its reservation answers a retry; one batched claim
// serves them all, and completing them leaves nothing charged.
func TestShardedEndpointSpreadsAndServes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := shardedStore(e, "hot-api", 3)
		var ids []string
		for i := range 30 {
			ids = append(ids, mustEnqueueReq(t, s, req("hot-api", "", fmt.Sprintf(`{"i":%d}`, i))))
			r, err := s.Begin(ctxT(t), req("hot-api", fmt.Sprintf("k-%d", i), "{}"), policy.BeginOptions{Lease: testLease})
			if err != nil || r.Claimed == nil {
				t.Fatalf("begin %d: %+v, %v", i, r, err)
			}
			f := failure(e.clk.Now())
			f.CountsTowardBreaker = false
			mustComplete(t, s, r.Claimed, f) // scheduled again, in its key's queue
			ids = append(ids, r.Claimed.ID)
		}
		for i, n := range dueIn(t, e, "hot-api", 3) {
			if n < 10 {
				t.Fatalf("queue %d holds %d of 60 due callouts, want them spread: %v", i, n, dueIn(t, e, "hot-api", 3))
			}
		}
		dup, err := s.Begin(ctxT(t), req("hot-api", "k-7", "{}"), policy.BeginOptions{Lease: testLease})
		if err != nil || dup.Existing == nil || dup.Existing.ID != ids[15] {
			t.Fatalf("retry of key k-7 = %+v, %v; want the callout %s", dup, err, ids[15])
		}
		if st := mustState(t, s, "hot-api"); st.Due != 60 || st.BacklogBytes == 0 {
			t.Fatalf("endpoint state %+v, want 60 due and their bytes", st)
		}
		for _, id := range ids {
			if c := mustGet(t, s, id); c.Endpoint != "hot-api" || c.State != policy.Scheduled {
				t.Fatalf("get %s = %+v", id, c)
			}
		}
		cls := claimEvery(t, s, "hot-api")
		if len(cls) != 60 {
			t.Fatalf("claimed %d, want 60", len(cls))
		}
		for _, c := range cls {
			mustComplete(t, s, c, success())
		}
		if items, n, _ := s.Backlog(ctxT(t), "hot-api"); items != 0 || n != 0 {
			t.Fatalf("after all succeeded: %d items %d bytes, want 0 0", items, n)
		}
		if e.b.Cluster() {
			owners := map[string]bool{}
			slots, err := e.b.Client.ClusterSlots(ctxT(t)).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range keyspace.QueueShards("hot-api", 3) {
				slot := keyspace.Slot(keyspace.Tag(sh))
				for _, r := range slots {
					if slot >= r.Start && slot <= r.End {
						owners[r.Nodes[0].Addr] = true
					}
				}
			}
			if len(owners) != 3 {
				t.Fatalf("hot-api's 3 queues are on %d primaries, want 3", len(owners))
			}
		}
	})
}

// The breaker stays one per endpoint: failures in every queue count
// toward it (on the endpoint hash), it holds every queue once open (each
// replica sees it within gateview.TTL), and when it turns half-open
// exactly one callout of all the queues is the probe, however many
// replicas claim at once; the probe's success closes it for all.
func TestShardedBreakerOneProbe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := shardedStore(e, "hot-api", 3)
		var last policy.CompleteResult
		for i := range 20 {
			mustEnqueueReq(t, s, req("hot-api", "", fmt.Sprintf(`{"i":%d}`, i)))
			cl := claimEvery(t, s, "hot-api")
			if len(cl) != 1 {
				t.Fatalf("failure %d: claimed %d", i, len(cl))
			}
			last = mustComplete(t, s, cl[0], failure(e.clk.Now().Add(time.Hour)))
		}
		if !last.Breaker.Opened {
			t.Fatalf("the 20th failure did not open the breaker: %+v", last.Breaker)
		}
		other := shardedStore(e, "hot-api", 3) // another replica, no view yet
		for i := range 6 {
			st := []*Store{s, other}[i%2]
			r, err := st.Enqueue(ctxT(t), req("hot-api", "", "{}"), enqOpts)
			if err != nil || r.State != policy.Held {
				t.Fatalf("enqueue %d while open = %+v, %v; want held", i, r, err)
			}
		}
		for _, st := range []*Store{s, other} {
			if r := mustClaim(t, st, "hot-api", ClaimOptions{Batch: 100, Lease: testLease}); len(r.Claimed) != 0 {
				t.Fatalf("claim while open: %d claimed", len(r.Claimed))
			}
		}
		e.clk.Advance(5*time.Minute + time.Second) // the probe time; past gateview.TTL too
		var wg sync.WaitGroup
		var mu sync.Mutex
		var probes []*policy.Claimed
		for _, st := range []*Store{s, other, s, other} {
			wg.Go(func() {
				r, err := st.Claim(ctxT(t), "hot-api", ClaimOptions{Batch: 100, Lease: testLease})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				probes = append(probes, r.Claimed...)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(probes) != 1 || probes[0].Kind != policy.KindProbe {
			t.Fatalf("half-open: %d claimed (%+v), want exactly one probe", len(probes), probes)
		}
		r := mustComplete(t, s, probes[0], success())
		if !r.Breaker.Closed || !r.Breaker.Probe {
			t.Fatalf("probe success = %+v, want the breaker closed by the probe", r.Breaker)
		}
		e.clk.Advance(gateview.TTL)
		// the other 5 held ones are due (the 20 failed ones only in an hour)
		if got := len(claimEvery(t, other, "hot-api")); got != 5 {
			t.Fatalf("after the probe closed the breaker: %d claimed, want the other 5 held ones", got)
		}
	})
}

// Disable drains every queue of a sharded endpoint; a store configured
// with fewer shards (a rolling config change) still serves the queues the
// endpoint was given before.
func TestShardedDisableAndFewerShards(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := shardedStore(e, "hot-api", 3)
		for i := range 12 {
			mustEnqueueReq(t, s, req("hot-api", "", fmt.Sprintf(`{"i":%d}`, i)))
		}
		one := e.store() // hot-api with shards: 1
		if got := len(claimEvery(t, one, "hot-api")); got != 12 {
			t.Fatalf("a store with shards 1 claimed %d, want all 12 of the 3 queues", got)
		}
		for i := range 9 {
			mustEnqueueReq(t, s, req("hot-api", "", fmt.Sprintf(`{"j":%d}`, i)))
		}
		res, err := s.Disable(ctxT(t), "hot-api", "test")
		if err != nil || len(res.DeadLettered) != 9 {
			t.Fatalf("disable = %d dead-lettered, %v; want 9", len(res.DeadLettered), err)
		}
		page, err := deadLettersOf(s).DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "hot-api", Limit: 4})
		if err != nil || len(page.Items) != 4 || page.Next == "" {
			t.Fatalf("dead letters page 1 = %d items, next %q, %v", len(page.Items), page.Next, err)
		}
		seen := map[string]bool{}
		for q := (policy.DeadLetterQuery{Endpoint: "hot-api", Limit: 4}); ; {
			p, err := deadLettersOf(s).DeadLetters(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range p.Items {
				if seen[d.ID] {
					t.Fatalf("dead letter %s listed twice", d.ID)
				}
				seen[d.ID] = true
			}
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
		}
		if len(seen) != 9 {
			t.Fatalf("listed %d dead letters across the queues, want 9", len(seen))
		}
		if _, err := s.Enqueue(ctxT(t), req("hot-api", "", "{}"), enqOpts); err == nil {
			t.Fatal("a disabled sharded endpoint accepted a callout")
		}
	})
}

// Each queue of a sharded endpoint enforces its share of the backlog cap:
// past it the endpoint refuses, while another endpoint is still served.
func TestShardedBacklogCapPerQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := shardedStore(e, "hot-api", 2)
		lim := policy.EnqueueOptions{Limits: policy.BacklogLimits{MaxItems: 4}}
		for i := range 4 {
			if _, err := s.Enqueue(ctxT(t), req("hot-api", "", "{}"), lim); err != nil {
				t.Fatalf("callout %d of 4: %v", i, err)
			}
		}
		_, err := s.Enqueue(ctxT(t), req("hot-api", "", "{}"), lim)
		wantErr(t, err, policy.ErrBacklogFull)
		if _, err := s.Enqueue(ctxT(t), req("cool-api", "", "{}"), lim); err != nil {
			t.Fatalf("another endpoint refused: %v", err)
		}
	})
}

// masterCalls sums INFO commandstats calls on each primary of a cluster.
func masterCalls(t *testing.T, c *redis.ClusterClient) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	out := map[string]int64{}
	err := c.ForEachMaster(ctxT(t), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var n int64
		for name, v := range parseCommandStats(info) {
			if name != "info" && name != "cluster|slots" && name != "cluster|nodes" && name != "ping" {
				n += v
			}
		}
		mu.Lock()
		out[m.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShardsSpreadCommandsOverMasters (deliverable 5): a load of
// one endpoint with shards: 3 — 900 callouts enqueued, claimed in batches
// and completed, a third of them through a failed attempt first — runs
// within ±20 % of the mean on each of the test cluster's three primaries,
// by INFO commandstats (script commands included).
func TestShardsSpreadCommandsOverMasters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		if !e.b.Cluster() {
			t.Skip("commands per primary are counted on the 3-master test cluster")
		}
		cc := e.b.Client.(*redis.ClusterClient)
		s := shardedStore(e, "hot-api", 3)
		mustEnqueueReq(t, s, req("hot-api", "", "{}")) // warm: issuer map, shard counts
		claimEvery(t, s, "hot-api")
		before := masterCalls(t, cc)
		for i := range 900 {
			key := ""
			if i%2 == 0 {
				key = fmt.Sprintf("k-%d", i)
			}
			mustEnqueueReq(t, s, req("hot-api", key, fmt.Sprintf(`{"i":%d}`, i)))
		}
		for round := 0; ; round++ {
			cls := mustClaim(t, s, "hot-api", ClaimOptions{Batch: 64, Lease: testLease}).Claimed
			if len(cls) == 0 {
				break
			}
			for i, c := range cls {
				comp := success()
				if (round+i)%3 == 0 && c.Attempt == 1 {
					comp = failure(e.clk.Now())
					comp.CountsTowardBreaker = false
				}
				mustComplete(t, s, c, comp)
			}
		}
		after := masterCalls(t, cc)
		var total int64
		for addr := range after {
			total += after[addr] - before[addr]
		}
		mean := float64(total) / float64(len(after))
		for addr := range after {
			d := float64(after[addr] - before[addr])
			t.Logf("primary %s: %.0f commands (%.1f %% of the mean %.0f)", addr, d, 100*d/mean, mean)
			if d < 0.8*mean || d > 1.2*mean {
				t.Errorf("primary %s ran %.0f commands, outside ±20 %% of the mean %.0f", addr, d, mean)
			}
		}
	})
}
