package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Release deletes a callout created by Begin whose dispatch was refused
// before anything was sent, with its idempotency reservation, so the caller
// may fix the cause and send the same key again (contract §5: "rejections before
// dispatch are never stored as the key's result"). One round trip
// (release.lua; a probe of a sharded queue releases its token on the
// endpoint hash in a second). Errors: ErrStaleLease when cl's lease is no
// longer valid (nothing changed), ErrUnavailable.
func (s *Store) Release(ctx context.Context, cl *policy.Claimed) error {
	q, ok, err := s.release(ctx, policy.NewCallout{Endpoint: cl.Endpoint, Issuer: cl.Issuer,
		IdempotencyKey: cl.IdempotencyKey}, cl.ID, cl.LeaseToken)
	if err != nil {
		return s.wrap("release", err)
	}
	if !ok {
		return fmt.Errorf("redisstore: release %s: %w", cl.ID, policy.ErrStaleLease)
	}
	if !q.Home && cl.Kind == policy.KindProbe {
		err = s.giveBackProbe(ctx, cl.Endpoint, q.Part, cl.LeaseToken)
	}
	return err
}

// withdraw deletes an asynchronous callout (Enqueue's, a replay chain, or
// Begin's held one) that could not be confirmed durable, with its
// idempotency reservation (a replay chain's goes back to its dead letter,
// for the dead-letter retention), while it is still scheduled or held and
// was never attempted, so that nothing is forwarded for a write answered 503
// (contract §4, §11; release.lua without a lease token). When it cannot —
// a dispatcher claimed the callout first, or Redis failed — it logs a
// warning: the callout is then delivered, as the answer's detail says it
// may be. One round trip.
func (s *Store) withdraw(ctx context.Context, nc policy.NewCallout, id string) {
	if _, ok, err := s.release(ctx, nc, id, ""); err != nil || !ok {
		s.log.Warn("redisstore: a callout not confirmed durable was not withdrawn; it will be delivered",
			"callout_id", id, "claimed", err == nil, "err", s.wrap("withdraw", err))
	}
}

// release runs release.lua on callout id of nc's endpoint, issuer and
// key: with the lease token (Release), or with none while it was never
// attempted (withdraw: a replay chain's reservation goes back to its dead
// letter, nc.ReplayOf). ok reports whether it was released (false also
// for a malformed id).
func (s *Store) release(ctx context.Context, nc policy.NewCallout, id, token string) (queue, bool, error) {
	q, ok := s.calloutQueue(nc.Endpoint, nc.Issuer, id)
	if !ok {
		return q, false, nil
	}
	c, rest, resp := q.Record(id)
	res := reservationKey(q, c, nc.Issuer, nc.IdempotencyKey)
	a := &releaseArgs{Record: c, Rest: rest, Resp: resp, Lease: q.Lease, Due: q.Due, Counters: q.Counters,
		Reservation: res, ID: id, Token: token, Raw: keyspace.RawOfID(id), Home: q.Home, Part: q.Part}
	if token == "" {
		a.Takeover, a.TakeoverTTL = keyspace.RawOfID(nc.ReplayOf), s.dlTTL
	}
	v, err := s.lua.release.Run(ctx, s.rdb, a)
	return q, err == nil && v.Result == "ok", err
}

// releaseArgs are release.lua's keys and arguments (lua/release.lua names
// each).
type releaseArgs struct {
	Record      string        `lua:"record,key"`
	Rest        string        `lua:"rest,key"`
	Resp        string        `lua:"resp,key"`
	Lease       string        `lua:"lease,key"`
	Due         string        `lua:"due,key"`
	Counters    string        `lua:"counters,key"`
	Reservation string        `lua:"reservation,key"`
	ID          string        `lua:"id"`
	Token       string        `lua:"token"`
	Raw         string        `lua:"raw"`
	Home        bool          `lua:"home"`
	Part        string        `lua:"part"`
	Takeover    string        `lua:"takeover"`
	TakeoverTTL time.Duration `lua:"takeover_ttl"`
}

// resultReply is the reply of a script that answers one word (release.lua,
// discard.lua).
type resultReply struct {
	Result string `lua:"result"`
}

// giveBackProbe releases endpoint's probe token when token holds it, as an
// attempt that was never made (outcome.lua: the breaker unchanged), for a
// queue of a sharded endpoint whose caller took the token (admit.lua) for a
// callout that then made no attempt. Errors: ErrUnavailable.
func (s *Store) giveBackProbe(ctx context.Context, endpoint, part, token string) error {
	now := s.now()
	_, err := s.lua.outcome.Run(ctx, s.rdb, s.giveBack(endpoint, part, token, now))
	s.gates.Forget(endpoint)
	return s.wrap("release: probe", err)
}

// TryLock takes, or renews when the caller already holds it, the named lock
// for ttl, so that one replica at a time does a periodic job (the backlog
// gatherer; the Salesforce reprocess poller). owner identifies the caller
// (a random token per replica). It reports whether the caller holds the
// lock. One round trip. Errors: ErrUnavailable.
func (s *Store) TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	v, err := s.lua.lock.Run(ctx, s.rdb, &lockArgs{Lock: keyspace.Lock(name), Owner: owner, TTL: ttl})
	if err != nil {
		return false, s.wrap("lock", err)
	}
	return v.N == 1, nil
}

// lockArgs are lock.lua's keys and arguments (lua/lock.lua).
type lockArgs struct {
	Lock  string        `lua:"lock,key"`
	Owner string        `lua:"owner"`
	TTL   time.Duration `lua:"ttl"`
}
