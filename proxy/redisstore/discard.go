package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
)

// Discard deletes a dead letter, its index entry and its
// idempotency reservation when that still points at it (contract §7
// "Discarded ... deletes the proxy's copy"), releasing its backlog bytes,
// and with Options.Outbox its Salesforce mirror still queued (and then its
// expiry check); a completion event still queued is sent, from the record
// kept for at most an hour more (docs/salesforce.md "Discarding a dead
// letter").
// Errors: ErrNotFound, ErrNotDeadLettered (the callout is in another
// state; nothing deleted), ErrUnavailable.
func (s *Store) Discard(ctx context.Context, id string) error {
	key, ok := keyspace.Callout(id)
	if !ok {
		return fmt.Errorf("redisstore: discard %q: %w", id, policy.ErrNotFound)
	}
	m, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return s.wrap("discard", err)
	}
	if m[record.FieldState] == "" {
		return fmt.Errorf("redisstore: discard %s: %w", id, policy.ErrNotFound)
	}
	meta, err := record.MetaOf(m)
	if err != nil {
		return fmt.Errorf("redisstore: discard %s: %w", id, err)
	}
	q, _ := keyspace.QueueOfID(meta.Endpoint, id)
	c, rest, resp := q.Record(id)
	res := reservationKey(q, c, s.issuers.Of(ctx, m[record.FieldIssuer]), meta.Key)
	v, err := s.lua.discard.Run(ctx, s.rdb, &discardArgs{Record: c, Rest: rest, Resp: resp, DL: q.DL,
		Reservation: res, Counters: q.Counters, DLB: q.DLB, SFO: q.SFO, SFD: keyspace.OutboxOf(q.Shard).Data, SFX: q.SFX,
		ID: id, Raw: keyspace.RawOfID(id), Outbox: s.outbox, Keep: discardKeep})
	if err != nil {
		return s.wrap("discard", err)
	}
	switch r := v.Result; r {
	case "ok":
		return nil
	case "missing":
		return fmt.Errorf("redisstore: discard %s: %w", id, policy.ErrNotFound)
	default:
		return fmt.Errorf("redisstore: discard %s (%s): %w", id, r, policy.ErrNotDeadLettered)
	}
}

// discardArgs are discard.lua's keys and arguments (lua/discard.lua names
// each).
type discardArgs struct {
	Record      string `lua:"record,key"`
	Rest        string `lua:"rest,key"`
	Resp        string `lua:"resp,key"`
	DL          string `lua:"dl,key"`
	Reservation string `lua:"reservation,key"`
	Counters    string `lua:"counters,key"`
	DLB         string `lua:"dlb,key"`
	SFO         string `lua:"sfo,key"`
	SFD         string `lua:"sfd,key"`
	SFX         string `lua:"sfx,key"`
	ID          string `lua:"id"`
	Raw         string `lua:"raw"`
	Outbox      bool   `lua:"outbox"`
	Keep        int64  `lua:"keep"`
}

// discardKeep (ms) bounds how long a discarded dead letter's record is kept
// for its completion event still queued (lua/discard.lua): one hour, the
// margin keep.lua extends it by while the event waits (docs/salesforce.md
// "Discarding a dead letter").
const discardKeep = int64(time.Hour / time.Millisecond)
