// Package queues is a replica's knowledge of its endpoints' queues
// (keyspace "Shards and queues", "Organisation queues"): which queues an
// endpoint's callouts may be in — those of its configured shard count and
// of every count it was served with before, recorded in its endpoint hash
// ('sq', note_shards.lua), so lowering shards strands no callout — which
// organisations have pending callouts in each (its counters' 'ii:' fields),
// and which queue a new callout goes to. The keys themselves are built by
// keyspace; the store's core (proxy/redisstore) owns one Tracker and asks it
// before every script that names a queue. It imports only policy, keyspace
// and script.
package queues

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Refresh is how often the recorded shard counts of an endpoint, and the
// organisations of its queues, are read again.
const Refresh = 30 * time.Second

// Fields of the endpoint hash (and of a queue's counters hash) read here;
// the core's endpoint.go lists the others.
const (
	fieldShards  = "sq" // shard counts the endpoint was served with, "1,3"
	fieldPending = "bi" // pending items (scheduled, held, in flight)
)

//go:embed lua/*.lua
var luaFS embed.FS

// Options configures a Tracker. The zero value works.
type Options struct {
	// Now is the replica's clock (the store's). Default time.Now.
	Now func() time.Time
	// Shards returns an endpoint's configured shard count (the store's
	// Options.Shards); nil or a result below 1: 1.
	Shards func(endpoint string) int
	// Partition returns the breaker partition of an organisation's (issuer
	// tag's) callouts to an endpoint (contract §6: the tag, or "" for the
	// endpoint's own breaker), which its organisation queue carries. nil:
	// "" always.
	Partition func(endpoint, tag string) string
	// Scripts is the script layer of the client (the store's
	// redisstore.Store.Scripts, made by script.Attach): the package's
	// scripts join its one function library. nil: a script.Functions of
	// the package's own on the client (a library of its own).
	Scripts *script.Functions
}

// Tracker is a replica's knowledge of its endpoints' queues. It is safe
// for concurrent use.
type Tracker struct {
	rdb    redis.UniversalClient
	o      Options
	note   *script.Script[noteArgs, noteReply]
	states sync.Map // endpoint -> *state
}

// state is what a Tracker knows of one endpoint's queues.
type state struct {
	mu     sync.Mutex
	queues []keyspace.Queue
	readAt time.Time
	next   atomic.Uint64 // round-robin queue of unkeyed callouts
	rr     atomic.Uint64 // rotation of claims' ties between organisations
	// orgs are the issuer tags of the organisation queues of each of the
	// endpoint's shards (OrgsOfCounters of each queue's counters), as last
	// read or added to here; orgsAt when they were read.
	orgs   map[int][]string
	orgsAt time.Time
}

// New returns a Tracker on client. Errors: a script that does not load (a
// build defect: it is embedded).
func New(client redis.UniversalClient, o Options) (*Tracker, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Partition == nil {
		o.Partition = func(string, string) string { return "" }
	}
	if o.Scripts == nil {
		o.Scripts = script.Attach(client, nil)
	}
	t := &Tracker{rdb: client, o: o}
	if err := script.LoadInto(&t.note, script.Package{FS: luaFS, Functions: o.Scripts}, "note_shards"); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	return t, nil
}

// Shards returns the configured shard count of endpoint (Options.Shards),
// 1 … keyspace.Shards: how many queues its new callouts spread over.
func (t *Tracker) Shards(endpoint string) int {
	if t.o.Shards == nil {
		return 1
	}
	return min(max(t.o.Shards(endpoint), 1), keyspace.Shards)
}

func (t *Tracker) state(endpoint string) *state {
	v, _ := t.states.LoadOrStore(endpoint, &state{})
	return v.(*state)
}

// Of returns every queue of endpoint: those of the configured shard count
// and of every count recorded for the endpoint before ('sq' in the
// endpoint hash). Queue 0, the home queue, is always first. Read again
// every Refresh; with one shard and nothing recorded, no round trip
// beyond that. Errors: ErrUnavailable.
func (t *Tracker) Of(ctx context.Context, endpoint string) ([]keyspace.Queue, error) {
	st := t.state(endpoint)
	n := t.Shards(endpoint)
	st.mu.Lock()
	if st.queues != nil && t.o.Now().Sub(st.readAt) < Refresh {
		defer st.mu.Unlock()
		return st.queues, nil
	}
	st.mu.Unlock()
	var recorded string
	var err error
	if n > 1 {
		// Record this count, so replicas configured with fewer still serve
		// these queues; the script returns every count recorded.
		var v noteReply
		v, err = t.note.Run(ctx, t.rdb, &noteArgs{Endpoint: keyspace.Endpoint(endpoint), N: strconv.Itoa(n)})
		recorded, err = v.Counts, script.Wrap("redisstore: note shards", err)
	} else {
		recorded, err = t.rdb.HGet(ctx, keyspace.Endpoint(endpoint), fieldShards).Result()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		err = script.Wrap("redisstore: shards", err)
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
	var qs []keyspace.Queue
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
	st.queues, st.readAt = qs, t.o.Now()
	return qs, nil
}

// Orgs returns every organisation queue of endpoint (keyspace
// "Organisation queues"): for each queue of Of, one per organisation with
// pending callouts there (OrgsOfCounters). The counters are read again
// (one pipelined round trip) when fresh is true or this replica read them
// Refresh ago or more; a claim reads them in its own pipeline every round
// (SetOrgs reports a new one), so a new organisation's first callout
// waits at most one round. Errors: ErrUnavailable.
func (t *Tracker) Orgs(ctx context.Context, endpoint string, fresh bool) ([]keyspace.Queue, error) {
	qs, err := t.Of(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	st := t.state(endpoint)
	st.mu.Lock()
	known, at := st.orgs, st.orgsAt
	st.mu.Unlock()
	if fresh || known == nil || t.o.Now().Sub(at) >= Refresh {
		cmds := make([]*redis.MapStringStringCmd, len(qs))
		_, _ = t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range qs {
				cmds[i] = p.HGetAll(ctx, q.Counters)
			}
			return nil
		})
		got := map[int][]string{}
		for i, q := range qs {
			if err := cmds[i].Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, script.Wrap("redisstore: organisation queues", err)
			}
			got[q.Shard] = OrgsOfCounters(cmds[i].Val())
		}
		t.SetOrgs(endpoint, got)
	}
	st.mu.Lock()
	orgs := st.orgs
	st.mu.Unlock()
	var out []keyspace.Queue
	for _, q := range qs {
		for _, tag := range slices.Sorted(slices.Values(orgs[q.Shard])) {
			out = append(out, q.ForOrg(tag, t.o.Partition(endpoint, tag)))
		}
	}
	return out, nil
}

// OrgsOfCounters returns the organisations (issuer tags) with pending
// callouts in a queue from its counters hash m (the endpoint hash for the
// home queue): every 'ii:' tag, and "" when the queue's pending items
// ('bi') are more than theirs (callouts without an issuer).
func OrgsOfCounters(m map[string]string) []string {
	var tags []string
	var sum int64
	for f, v := range m {
		if tag, ok := strings.CutPrefix(f, "ii:"); ok {
			tags = append(tags, tag)
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
	}
	if n, _ := strconv.ParseInt(m[fieldPending], 10, 64); n > sum {
		tags = append(tags, "")
	}
	return tags
}

// SetOrgs records the organisations read of endpoint's queues (shard ->
// issuer tags, OrgsOfCounters) and reports whether they name a queue this
// replica did not know of.
func (t *Tracker) SetOrgs(endpoint string, got map[int][]string) bool {
	st := t.state(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	grew := false
	for sh, tags := range got {
		for _, tag := range tags {
			grew = grew || !slices.Contains(st.orgs[sh], tag)
		}
	}
	st.orgs, st.orgsAt = got, t.o.Now()
	return grew
}

// NoteOrg adds issuer tag org to the organisations of endpoint's shard (a
// callout this replica just created there).
func (t *Tracker) NoteOrg(endpoint string, shard int, org string) {
	st := t.state(endpoint)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.orgs == nil {
		return // read in full by the next Orgs
	}
	if !slices.Contains(st.orgs[shard], org) {
		m := maps.Clone(st.orgs)
		m[shard] = append(slices.Clone(m[shard]), org)
		st.orgs = m
	}
}

// Rotation returns the next number of endpoint's rotation of claims' ties
// between organisations (fair.Spread's start).
func (t *Tracker) Rotation(endpoint string) int { return int(t.state(endpoint).rr.Add(1)) }

// ForCreate returns the queue a new callout nc goes to: for a keyed
// callout the queue its key maps to (keyspace.KeyedQueue: where its
// reservation lives), else the next queue in turn, among the configured
// shard count's queues. Errors: Of's.
func (t *Tracker) ForCreate(ctx context.Context, nc policy.NewCallout) (keyspace.Queue, error) {
	n := t.Shards(nc.Endpoint)
	if n == 1 {
		return keyspace.QueueAt(nc.Endpoint, keyspace.ShardOf(nc.Endpoint)), nil
	}
	if _, err := t.Of(ctx, nc.Endpoint); err != nil {
		return keyspace.Queue{}, err
	}
	if nc.IdempotencyKey != "" {
		return keyspace.KeyedQueue(nc.Endpoint, nc.Issuer, nc.IdempotencyKey, n), nil
	}
	i := int(t.state(nc.Endpoint).next.Add(1) % uint64(n))
	return keyspace.QueueAt(nc.Endpoint, keyspace.QueueShards(nc.Endpoint, n)[i]), nil
}

// noteArgs are note_shards.lua's keys and arguments (lua/note_shards.lua).
type noteArgs struct {
	Endpoint string `lua:"endpoint,key"`
	N        string `lua:"n"`
}

// noteReply is note_shards.lua's reply.
type noteReply struct {
	Counts string `lua:"counts"`
}
