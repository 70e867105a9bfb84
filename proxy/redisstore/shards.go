package redisstore

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	pend "github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"
	"github.com/redis/go-redis/v9"
)

// Sharded endpoints (keyspace "Shards and queues"): an endpoint configured with
// shards: N spreads its callouts over N queues, each under its own hash
// tag; the endpoint hash (breaker, gate, pause, disable, outage) stays one,
// in queue 0's slot, and the scripts of queues 1 … N-1 act on the gate
// this replica last read (proxy/redisstore/gateview). Their backlog caps
// are enforced per queue, at 1/N of the endpoint's each (queue counter
// hash cp:{sN}:a:{ep}).

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
	rr     atomic.Uint64 // rotation of claims' ties between organisations (spread)
	// orgs are the issuer tags of the organisation queues of each of the
	// endpoint's shards (orgsOfCounters of each queue's counters), as last read or
	// added to here; orgsAt when they were read.
	orgs   map[int][]string
	orgsAt time.Time
}

// Shards returns the configured shard count of endpoint (Options.Shards),
// 1 … keyspace.Shards: how many queues its callouts spread over
// (keyspace "Shards and queues"); proxy/redisstore/inspect finds a key's
// queue by it.
func (s *Store) Shards(endpoint string) int {
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
	n := s.Shards(endpoint)
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
		for _, sh := range keyspace.QueueShards(endpoint, c) {
			if !seen[sh] {
				seen[sh] = true
				qs = append(qs, keyspace.QueueAt(endpoint, sh))
			}
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.counts, st.queues, st.readAt = counts, qs, s.now()
	return qs, nil
}

// partition returns the breaker partition of organisation (issuer tag)
// org's callouts and requests to endpoint (contract §6): org when the
// endpoint's breaker.partition is organisation (Options.Partitioned), else
// "" (the endpoint's own breaker).
func (s *Store) partition(endpoint, org string) string {
	if s.partitioned == nil || !s.partitioned(endpoint) {
		return ""
	}
	return org
}

// quorum is how many organisations' open breaker partitions open
// endpoint's own breaker (Options.OpenPartitions; 0: lib.lua's default, 2).
func (s *Store) quorum(endpoint string) int {
	if s.openPartitions == nil {
		return 0
	}
	return s.openPartitions(endpoint)
}

// orgQueuesOf returns every organisation queue of endpoint (keyspace
// "Organisation queues"): for each queue of queuesOf, one per organisation
// with pending callouts there — the issuer tags of its counters' 'ii:'
// fields, and "" when it holds callouts without an issuer (orgsOfCounters).
// The counters are read again (one pipelined round trip) when fresh is
// true or this replica read them more than shardsRefresh ago; a claim
// reads them in its candidates pipeline every round (setOrgs reports a new
// one), so a new organisation's first callout waits at most one round.
// Errors: ErrUnavailable.
func (s *Store) orgQueuesOf(ctx context.Context, endpoint string, fresh bool) ([]queue, error) {
	qs, err := s.queuesOf(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	st := s.shardState(endpoint)
	st.mu.Lock()
	known, at := st.orgs, st.orgsAt
	st.mu.Unlock()
	if fresh || known == nil || s.now().Sub(at) >= shardsRefresh {
		cmds := make([]*redis.MapStringStringCmd, len(qs))
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range qs {
				cmds[i] = p.HGetAll(ctx, q.Counters)
			}
			return nil
		})
		got := map[int][]string{}
		for i, q := range qs {
			if err := cmds[i].Err(); err != nil && !isNil(err) {
				return nil, s.wrap("organisation queues", err)
			}
			got[q.Shard] = orgsOfCounters(cmds[i].Val())
		}
		s.setOrgs(endpoint, got)
	}
	return s.expandOrgs(endpoint, qs), nil
}

// orgsOfCounters returns the organisations (issuer tags) with pending
// callouts in a queue from its counters hash m (the endpoint hash for the
// home queue): every 'ii:' tag, and "" when the queue's pending items
// ('bi') are more than theirs (callouts without an issuer).
func orgsOfCounters(m map[string]string) []string {
	var tags []string
	var sum int64
	for f, v := range m {
		if t, ok := strings.CutPrefix(f, "ii:"); ok {
			tags = append(tags, t)
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
	}
	if n, _ := strconv.ParseInt(m[ePending], 10, 64); n > sum {
		tags = append(tags, "")
	}
	return tags
}

// setOrgs records the organisations read (shard -> issuer tags) and
// reports whether they name a queue this replica did not know of.
func (s *Store) setOrgs(endpoint string, got map[int][]string) bool {
	st := s.shardState(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	grew := false
	for sh, tags := range got {
		grew = grew || !subset(tags, st.orgs[sh])
	}
	st.orgs, st.orgsAt = got, s.now()
	return grew
}

// noteOrg adds issuer tag org to this replica's view of the organisations of
// endpoint's shard (a callout it just created there).
func (s *Store) noteOrg(endpoint string, shard int, org string) {
	st := s.shardState(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.orgs == nil {
		return // read in full by the next orgQueuesOf
	}
	if !slices.Contains(st.orgs[shard], org) {
		m := maps.Clone(st.orgs)
		m[shard] = append(slices.Clone(m[shard]), org)
		st.orgs = m
	}
}

// expandOrgs returns the organisation queues of qs by this replica's view
// of the organisations of each queue, each shard's in a stable order.
func (s *Store) expandOrgs(endpoint string, qs []queue) []queue {
	st := s.shardState(endpoint)
	st.mu.Lock()
	orgs := st.orgs
	st.mu.Unlock()
	var out []queue
	for _, q := range qs {
		tags := slices.Sorted(slices.Values(orgs[q.Shard]))
		for _, t := range tags {
			out = append(out, q.ForOrg(t, s.partition(endpoint, t)))
		}
	}
	return out
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
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
// callout the queue its key maps to (keyspace.KeyedQueue: where its reservation
// lives), else the next queue in turn, among the configured shard count's
// queues.
func (s *Store) createQueue(ctx context.Context, nc policy.NewCallout) (queue, error) {
	n := s.Shards(nc.Endpoint)
	if n == 1 {
		return keyspace.QueueAt(nc.Endpoint, keyspace.ShardOf(nc.Endpoint)), nil
	}
	if _, err := s.queuesOf(ctx, nc.Endpoint); err != nil {
		return queue{}, err
	}
	if nc.IdempotencyKey != "" {
		return keyspace.KeyedQueue(nc.Endpoint, nc.Issuer, nc.IdempotencyKey, n), nil
	}
	i := int(s.shardState(nc.Endpoint).next.Add(1) % uint64(n))
	return keyspace.QueueAt(nc.Endpoint, keyspace.QueueShards(nc.Endpoint, n)[i]), nil
}

// calloutQueue returns the organisation queue holding callout id of
// endpoint, made for issuer (its due and lease sets, keyspace
// "Organisation queues"), and its breaker partition.
func (s *Store) calloutQueue(endpoint, issuer, id string) (queue, bool) {
	q, ok := keyspace.QueueOfID(endpoint, id)
	if !ok {
		return queue{}, false
	}
	tag := keyspace.IssuerTag(issuer)
	return q.ForOrg(tag, s.partition(endpoint, tag)), true
}

// gateOf returns the endpoint gate a queue's script acts on, and whether
// it is given: not for the home queue (its scripts read the gate
// themselves); for another queue the gate this replica read from the
// endpoint hash at most gateview.TTL ago (gateview.Views.Of).
func (s *Store) gateOf(ctx context.Context, q queue) (gateview.View, bool, error) {
	if q.Home {
		return gateview.View{}, false, nil
	}
	v, err := s.gates.Of(ctx, q.Endpoint, q.Part)
	return v, true, err
}

// DeadLetterIndexes returns the keys of endpoint's dead-letter indexes,
// cp:{sN}:dl:{ep}, one a queue (keyspace "Shards and queues"): what
// proxy/redisstore/deadletters reads. Errors: ErrUnavailable.
func (s *Store) DeadLetterIndexes(ctx context.Context, endpoint string) ([]string, error) {
	qs, err := s.queuesOf(ctx, endpoint)
	dls := make([]string, len(qs))
	for i, q := range qs {
		dls[i] = q.DL
	}
	return dls, err
}

// PendingQueues returns endpoint's organisation queues' sets (every shard;
// keyspace "Organisation queues"): what proxy/redisstore/pending lists.
// Errors: ErrUnavailable.
func (s *Store) PendingQueues(ctx context.Context, endpoint string) ([]pend.Queue, error) {
	qs, err := s.orgQueuesOf(ctx, endpoint, false)
	out := make([]pend.Queue, len(qs))
	for i, q := range qs {
		out[i] = pend.Queue{Due: q.Due, Lease: q.Lease, Tag: q.Tag, Part: q.Part}
	}
	return out, err
}

// GateShut reports whether the gate of endpoint's breaker partition part
// (contract §6; "" the endpoint's own) holds its callouts back, read now
// (gate_read.lua). Errors: ErrUnavailable.
func (s *Store) GateShut(ctx context.Context, endpoint, part string) (bool, error) {
	v, err := s.gates.Read(ctx, endpoint, part)
	return err == nil && v.Gate.Shut(), err
}

// Decode decodes record m of callout id without its long request and
// response (:q, :r): what proxy/redisstore/pending lists. Errors:
// ErrNotFound when m is no record.
func (s *Store) Decode(ctx context.Context, id string, m map[string]string) (*policy.Callout, error) {
	return s.decode(ctx, id, m, "", "")
}
