package redisstore

import (
	"context"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/gateview"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	pend "github.com/calloutproxy/callout-proxy/proxy/redisstore/pending"
)

// Sharded endpoints (keyspace "Shards and queues"): an endpoint configured with
// shards: N spreads its callouts over N queues, each under its own hash
// tag; the endpoint hash (breaker, gate, pause, disable, outage) stays one,
// in queue 0's slot, and the scripts of queues 1 … N-1 act on the gate
// this replica last read (proxy/redisstore/gateview). Which queues an
// endpoint has, and which organisations have callouts in each, this
// replica knows by proxy/redisstore/queues. Their backlog caps are
// enforced per queue, at 1/N of the endpoint's each (queue counter hash
// cp:{sN}:a:{ep}).

// Shards returns the configured shard count of endpoint (Options.Shards),
// 1 … keyspace.Shards: how many queues its callouts spread over
// (keyspace "Shards and queues"); proxy/redisstore/inspect finds a key's
// queue by it.
func (s *Store) Shards(endpoint string) int { return s.queues.Shards(endpoint) }

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

// reservationKey is the reservation key of issuer's idempotency key in q
// (keyspace Queue.Reservation), or the callout's record key c when it has
// none: a script names a key of the queue's slot either way.
func reservationKey(q queue, c, issuer, key string) string {
	if res := q.Reservation(issuer, key); res != "" {
		return res
	}
	return c
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
	qs, err := s.queues.Of(ctx, endpoint)
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
	qs, err := s.queues.Orgs(ctx, endpoint, false)
	out := make([]pend.Queue, len(qs))
	for i, q := range qs {
		out[i] = pend.Queue{Due: q.Due, Lease: q.Lease, Tag: q.Tag, Part: q.Part}
	}
	return out, err
}

// Decode decodes record m of callout id without its long request and
// response (:q, :r): what proxy/redisstore/pending lists. Errors:
// ErrNotFound when m is no record.
func (s *Store) Decode(ctx context.Context, id string, m map[string]string) (*policy.Callout, error) {
	return s.decode(ctx, id, m, "", "")
}
