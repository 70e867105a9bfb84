package redisstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// Sharded endpoints (keyspace "Shards and queues"): an endpoint configured with
// shards: N spreads its callouts over N queues, each under its own hash
// tag, so a Redis Cluster spreads one endpoint's load over several
// primaries. The endpoint hash (breaker, gate, pause, disable, outage)
// stays one, in queue 0's slot. A script runs in one slot, so the scripts
// of queues 1 … N-1 cannot read the gate: they act on the gate this
// replica last read (gateView, at most GateViewTTL old) and the breaker
// update of their attempts runs on the endpoint hash in the same pipeline
// (outcome.lua). Their backlog caps are enforced per queue, at 1/N of the
// endpoint's each (queue counter hash cp:{sN}:a:{ep}).

// GateViewTTL is the longest a replica acts on an endpoint gate it read
// for a queue of a sharded endpoint (creating, claiming and completing
// callouts of queues 1 … N-1) before reading it again. A breaker that
// opens, a pause, or a disable reaches those queues within it; the probe
// token itself is always taken on the endpoint hash (admit.lua), so there
// is still exactly one probe.
const GateViewTTL = 100 * time.Millisecond

// shardsRefresh is how often the recorded shard counts of an endpoint are
// read again.
const shardsRefresh = 30 * time.Second

// shardState is what a Store knows of an endpoint's queues.
type shardState struct {
	mu     sync.Mutex
	counts []int // every shard count recorded for the endpoint ('sq')
	queues []queue
	readAt time.Time
	next   atomic.Uint64 // round-robin queue of unkeyed callouts
	view   gateView
	viewAt time.Time
}

// gateView is an endpoint gate as read from its endpoint hash.
type gateView struct {
	gate     policy.Gate
	failures int
}

// shards returns the configured shard count of endpoint (Options.Shards).
func (s *Store) shards(endpoint string) int {
	if s.shardsOf == nil {
		return 1
	}
	return min(max(s.shardsOf(endpoint), 1), keyspace.Shards)
}

func (s *Store) shardState(endpoint string) *shardState {
	v, _ := s.shardStates.LoadOrStore(endpoint, &shardState{})
	return v.(*shardState)
}

// queuesOf returns every queue of endpoint this store serves: those of
// the configured shard count and of every count recorded for the endpoint
// before ('sq' in the endpoint hash), so lowering shards strands no
// callout. Queue 0, the home queue, is always first. With one shard and
// nothing recorded, no round trip. Errors: ErrUnavailable.
func (s *Store) queuesOf(ctx context.Context, endpoint string) ([]queue, error) {
	st := s.shardState(endpoint)
	n := s.shards(endpoint)
	st.mu.Lock()
	fresh := st.queues != nil && s.now().Sub(st.readAt) < shardsRefresh
	st.mu.Unlock()
	if fresh {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.queues, nil
	}
	var recorded string
	var err error
	if n > 1 {
		// Record this count, so replicas configured with fewer still serve
		// these queues; the script returns every count recorded.
		var v noteShardsReply
		v, err = s.lua.noteShards.Run(ctx, s.rdb, &noteShardsArgs{Endpoint: keyspace.Endpoint(endpoint), N: strconv.Itoa(n)})
		recorded, err = v.Counts, s.wrap("note shards", err)
	} else {
		recorded, err = s.rdb.HGet(ctx, keyspace.Endpoint(endpoint), eShards).Result()
		if isNil(err) {
			err = nil
		}
		err = s.wrap("shards", err)
	}
	if err != nil {
		return nil, err
	}
	counts := []int{n}
	for _, p := range strings.Split(recorded, ",") {
		if c, e := strconv.Atoi(p); e == nil && c > 1 && c != n {
			counts = append(counts, c)
		}
	}
	seen := map[int]bool{}
	var qs []queue
	for _, c := range counts {
		for _, sh := range queueShards(endpoint, c) {
			if !seen[sh] {
				seen[sh] = true
				qs = append(qs, queueAt(endpoint, sh))
			}
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.counts, st.queues, st.readAt = counts, qs, s.now()
	return qs, nil
}

// noteShardsArgs are note_shards.lua's keys and arguments
// (lua/note_shards.lua).
type noteShardsArgs struct {
	Endpoint string `lua:"endpoint,key"`
	N        string `lua:"n"`
}

// noteShardsReply is note_shards.lua's reply.
type noteShardsReply struct {
	Counts string `lua:"counts"`
}

// createQueue returns the queue a new callout of nc goes to: for a keyed
// callout the queue its key maps to (keyQueue: where its reservation
// lives), else the next queue in turn, among the configured shard count's
// queues.
func (s *Store) createQueue(ctx context.Context, nc policy.NewCallout) (queue, error) {
	n := s.shards(nc.Endpoint)
	if n == 1 {
		return queueAt(nc.Endpoint, keyspace.ShardOf(nc.Endpoint)), nil
	}
	if _, err := s.queuesOf(ctx, nc.Endpoint); err != nil {
		return queue{}, err
	}
	shards := queueShards(nc.Endpoint, n)
	i := 0
	if nc.IdempotencyKey != "" {
		i = keyQueue(nc.Endpoint, nc.Issuer, nc.IdempotencyKey, n)
	} else {
		i = int(s.shardState(nc.Endpoint).next.Add(1) % uint64(n))
	}
	return queueAt(nc.Endpoint, shards[i]), nil
}

// queueOfID returns the queue holding callout id of endpoint.
func queueOfID(endpoint, id string) (queue, bool) {
	n, ok := keyspace.ShardOfID(id)
	if !ok {
		return queue{}, false
	}
	return queueAt(endpoint, n), true
}

// gateOf returns the endpoint gate a queue's script acts on: "" for the
// home queue (its scripts read the gate themselves); for another queue the
// gate this replica read from the endpoint hash at most GateViewTTL ago.
func (s *Store) gateOf(ctx context.Context, q queue) (gateView, bool, error) {
	if q.home {
		return gateView{}, false, nil
	}
	st := s.shardState(q.endpoint)
	st.mu.Lock()
	if !st.viewAt.IsZero() && s.now().Sub(st.viewAt) < GateViewTTL {
		v := st.view
		st.mu.Unlock()
		return v, true, nil
	}
	st.mu.Unlock()
	g, _, failures, err := s.gateRead(ctx, q.endpoint, s.now())
	if err != nil {
		return gateView{}, true, err
	}
	v := gateView{gate: g, failures: failures}
	st.mu.Lock()
	st.view, st.viewAt = v, s.now()
	st.mu.Unlock()
	return v, true, nil
}

// forgetGate drops this replica's gate view of endpoint after it changed
// the endpoint hash itself (a breaker transition, pause, probe, reset).
func (s *Store) forgetGate(endpoint string) {
	if v, ok := s.shardStates.Load(endpoint); ok {
		st := v.(*shardState)
		st.mu.Lock()
		st.viewAt = time.Time{}
		st.mu.Unlock()
	}
}

// gateArgs are the gate ARGV of a queue's script: "", "" for the home
// queue, else the viewed state and until ms.
func gateArgs(v gateView, given bool) (string, string) {
	if !given {
		return "", ""
	}
	return string(v.gate.State), record.FormatMs(v.gate.Until)
}

// viewStale reports whether this replica's gate view of endpoint is older
// than GateViewTTL (or missing).
func (s *Store) viewStale(endpoint string) bool {
	st := s.shardState(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.viewAt.IsZero() || s.now().Sub(st.viewAt) >= GateViewTTL
}

// setView records a gate this replica read from endpoint's hash.
func (s *Store) setView(endpoint string, v gateView) {
	st := s.shardState(endpoint)
	st.mu.Lock()
	st.view, st.viewAt = v, s.now()
	st.mu.Unlock()
}

// takeProbe tries to take endpoint's probe token as token for lease
// (admit.lua, on the endpoint hash): the gate it returns is "probe" when
// this caller holds the token now, else the gate it found (probing, open,
// breaker_open, …). It refreshes the gate view either way.
func (s *Store) takeProbe(ctx context.Context, endpoint, token string, lease time.Duration) (gateView, error) {
	now := s.now()
	until := now.Add(lease)
	a, err := s.lua.admit.Run(ctx, s.rdb, &admitArgs{Endpoint: keyspace.Endpoint(endpoint), Now: s.clockArg(now),
		Token: token, ProbeLease: lease.Milliseconds()})
	if err != nil {
		return gateView{}, s.wrap("admit", err)
	}
	g := gateView{gate: policy.Gate{State: policy.GateState(a.Gate), Until: msTimeOf(a.GateUntil)},
		failures: a.Failures}
	if g.gate.State == "probe" {
		s.setView(endpoint, gateView{gate: policy.Gate{State: policy.GateProbing, Until: until}, failures: g.failures})
	} else {
		s.setView(endpoint, g)
	}
	return g, nil
}
