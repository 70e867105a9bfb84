package redisstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// DeadLetters lists an endpoint's dead letters (every queue) in
// dead-lettered-at order with a stable cursor: entries added or pruned between pages neither repeat nor skip the others. Index entries
// whose record has expired are left out. Two round trips (dead_letters.lua
// on every queue's index, pipelined and merged by (time, id), then one
// pipelined HGETALL per item). Errors: ErrUnavailable, or an error for a
// malformed cursor.
func (s *Store) DeadLetters(ctx context.Context, q policy.DeadLetterQuery) (policy.DeadLetterPage, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxBatch)
	until := int64(1 << 62)
	if !q.Until.IsZero() {
		until = q.Until.UnixMilli()
	}
	curMs, curID, err := parseCursor(q.Cursor)
	if err != nil {
		return policy.DeadLetterPage{}, err
	}
	qs, err := s.queuesOf(ctx, q.Endpoint)
	if err != nil {
		return policy.DeadLetterPage{}, err
	}
	calls := make([]*script.Call[deadLettersArgs, deadLettersReply], len(qs))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, qu := range qs {
			calls[i] = s.lua.deadLetters.Queue(ctx, p, &deadLettersArgs{DL: qu.dl, SinceMs: strconv.FormatInt(q.Since.UnixMilli(), 10),
				UntilMs: until, CursorMs: curMs, CursorID: curID, Limit: limit})
		}
		return nil
	})
	type entry struct {
		id string
		ms int64
		q  queue
	}
	var all []entry
	for i, c := range calls {
		v, err := c.Result(ctx, s.rdb)
		if err != nil {
			return policy.DeadLetterPage{}, s.wrap("dead letters", err)
		}
		a := v.Entries
		for j := 0; j+1 < len(a); j += 2 {
			all = append(all, entry{a[j], scoreMs(a[j+1]), qs[i]})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].ms != all[j].ms {
			return all[i].ms < all[j].ms
		}
		return all[i].id < all[j].id
	})
	var page policy.DeadLetterPage
	if len(all) > limit {
		all = all[:limit]
		last := all[limit-1]
		page.Next = strconv.FormatInt(last.ms, 10) + "." + last.id
	}
	ids := make([]string, len(all))
	at := make([]time.Time, len(all))
	for i, e := range all {
		ids[i], at[i] = e.id, time.UnixMilli(e.ms)
	}
	sums, err := s.summaries(ctx, ids)
	if err != nil {
		return page, err
	}
	for i, d := range sums {
		if d != nil {
			d.Endpoint, d.DeadLetteredAt = q.Endpoint, at[i]
			page.Items = append(page.Items, *d)
		}
	}
	return page, nil
}

// deadLettersArgs are dead_letters.lua's keys and arguments
// (lua/dead_letters.lua).
type deadLettersArgs struct {
	DL       string `lua:"dl,key"`
	SinceMs  string `lua:"since_ms"`
	UntilMs  int64  `lua:"until_ms"`
	CursorMs string `lua:"cursor_ms"`
	CursorID string `lua:"cursor_id"`
	Limit    int    `lua:"limit"`
}

// deadLettersReply is dead_letters.lua's reply: id, ms, id, ms, …
type deadLettersReply struct {
	Entries []string `lua:"entries"`
}

// parseCursor splits "ms.id"; "" is the first page.
func parseCursor(c string) (ms, id string, err error) {
	if c == "" {
		return "", "", nil
	}
	ms, id, ok := strings.Cut(c, ".")
	if _, err := strconv.ParseInt(ms, 10, 64); !ok || err != nil || id == "" {
		return "", "", fmt.Errorf("redisstore: dead letters: malformed cursor %q", c)
	}
	return ms, id, nil
}

// summaries reads the dead-letter summaries of ids, in order: one
// pipelined HGETALL each. An entry is nil
// when that id is not a dead letter (any more). DeadLetteredAt is the
// record's finish time. Errors: ErrUnavailable.
func (s *Store) summaries(ctx context.Context, ids []string) ([]*policy.DeadLetter, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			if key, ok := keyspace.Callout(id); ok {
				cmds[i] = p.HGetAll(ctx, key)
			}
		}
		return nil
	})
	if err != nil && !isNil(err) {
		return nil, s.wrap("dead-letter summaries", err)
	}
	out := make([]*policy.DeadLetter, len(ids))
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		out[i] = s.summary(ids[i], cmd.Val())
	}
	return out, nil
}

// summary is the dead-letter summary of record m, nil when it is not a
// dead letter.
func (s *Store) summary(id string, m map[string]string) *policy.DeadLetter {
	if m[record.FieldState] != record.StateCode(policy.DeadLettered) {
		return nil
	}
	meta, err := record.MetaOf(m)
	if err != nil {
		return nil
	}
	return &policy.DeadLetter{
		ID: id, Endpoint: meta.Endpoint, DeadLetteredAt: record.ParseMs(m[record.FieldFinished]),
		Reason: policy.DeadLetterReason(m[record.FieldReason]), Status: atoi(m[record.FieldStatus]),
		Method: meta.Method, Path: meta.Path, Attempts: atoi(m[record.FieldAttempts]),
		IdempotencyKey: meta.Key, SourceRecord: meta.Source, ReplayOf: m[record.FieldReplayOf],
		LastError: m[record.FieldLastErr], ReplayedBy: m[fReplayedBy], ReplayedAt: record.ParseMs(m[fReplayedAt]),
		ReplayOutcome: policy.State(m[fReplayOutcome]),
	}
}

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
	q, _ := queueOfID(meta.Endpoint, id)
	c, rest, resp := q.record(id)
	res := q.reservation(s.issuerOf(ctx, m[record.FieldIssuer]), meta.Key)
	if res == "" {
		res = c
	}
	v, err := s.lua.discard.Run(ctx, s.rdb, &discardArgs{Record: c, Rest: rest, Resp: resp, DL: q.dl,
		Reservation: res, Counters: q.acc, DLB: q.dlb, SFO: q.sfo, SFD: keyspace.OutboxOf(q.shard).Data, SFX: q.sfx,
		ID: id, Raw: rawOfID(id), Outbox: s.outbox, Keep: discardKeep})
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

// scoreMs parses a sorted-set score reply (a decimal that may be written
// in floating-point form) as Unix ms.
func scoreMs(v string) int64 {
	f, _ := strconv.ParseFloat(v, 64)
	return int64(f)
}
