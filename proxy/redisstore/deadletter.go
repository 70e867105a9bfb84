package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// DeadLetters lists an endpoint's dead letters in dead-lettered-at order
// with a stable cursor: entries added or pruned between pages neither
// repeat nor skip the others. Index entries whose record has expired are
// left out. Two round trips (dead_letters.lua, then one pipelined HMGET per
// item). Errors: ErrUnavailable, or an error for a malformed cursor.
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
	k := keysOf(q.Endpoint)
	v, err := s.run(ctx, "dead letters", s.lua.deadLetters, []string{k.dl},
		strconv.FormatInt(q.Since.UnixMilli(), 10), strconv.FormatInt(until, 10), curMs, curID,
		strconv.Itoa(limit))
	if err != nil {
		return policy.DeadLetterPage{}, err
	}
	a := replyArr(v)
	var page policy.DeadLetterPage
	if len(a)/2 > limit {
		a = a[:2*limit]
		page.Next = strconv.FormatInt(scoreMs(a[2*limit-1]), 10) + "." + replyStr(a[2*limit-2])
	}
	page.Items, err = s.deadLetterSummaries(ctx, k, a)
	return page, err
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

// deadLetterSummaries reads the summary fields of {id, ms, ...} entries.
func (s *Store) deadLetterSummaries(ctx context.Context, k epKeys, a []any) ([]policy.DeadLetter, error) {
	cmds := make([]*redis.SliceCmd, len(a)/2)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.HMGet(ctx, k.callout(replyStr(a[2*i])), fState, fReason, fRespStatus,
				fMethod, fPath, fAttempts, fKey, fSource, fReplayOf, fLastError, fReplayedBy, fReplayedAt)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("dead letters", err)
	}
	out := make([]policy.DeadLetter, 0, len(cmds))
	for i, cmd := range cmds {
		f := cmd.Val()
		if replyStr(f[0]) != string(policy.DeadLettered) {
			continue // expired, discarded, or being replayed in place (never)
		}
		out = append(out, policy.DeadLetter{
			ID: replyStr(a[2*i]), Endpoint: k.endpoint, DeadLetteredAt: time.UnixMilli(scoreMs(a[2*i+1])),
			Reason: policy.DeadLetterReason(replyStr(f[1])), Status: atoi(replyStr(f[2])),
			Method: replyStr(f[3]), Path: replyStr(f[4]), Attempts: atoi(replyStr(f[5])),
			IdempotencyKey: replyStr(f[6]), SourceRecord: replyStr(f[7]),
			ReplayOf: replyStr(f[8]), LastError: replyStr(f[9]),
			ReplayedBy: replyStr(f[10]), ReplayedAt: fromMs(replyStr(f[11])),
		})
	}
	return out, nil
}

// Discard deletes a dead letter, its index entry and its idempotency
// reservation when that still points at it (SPEC §7 "Discarded ... deletes
// the proxy's copy"). Errors: ErrNotFound, ErrNotDeadLettered (the callout
// is in another state; nothing deleted), ErrUnavailable.
func (s *Store) Discard(ctx context.Context, id string) error {
	key, ok := calloutKeyOfID(id)
	if !ok {
		return fmt.Errorf("redisstore: discard %q: %w", id, policy.ErrNotFound)
	}
	f, err := s.rdb.HMGet(ctx, key, fEndpoint, fIssuer, fKey).Result()
	if err != nil {
		return s.wrap("discard", err)
	}
	endpoint := replyStr(f[0])
	if endpoint == "" {
		return fmt.Errorf("redisstore: discard %s: %w", id, policy.ErrNotFound)
	}
	k := keysOf(endpoint)
	ik := k.idem(replyStr(f[1]), replyStr(f[2]))
	if ik == "" {
		ik = key
	}
	v, err := s.run(ctx, "discard", s.lua.discard, append(k.parts(id), k.dl, ik, k.ep, k.dlb), id)
	if err != nil {
		return err
	}
	switch r := replyStr(v); r {
	case "ok":
		return nil
	case "missing":
		return fmt.Errorf("redisstore: discard %s: %w", id, policy.ErrNotFound)
	default:
		return fmt.Errorf("redisstore: discard %s (%s): %w", id, r, policy.ErrNotDeadLettered)
	}
}

// scoreMs parses a sorted-set score reply (a decimal that may be written
// in floating-point form) as Unix ms.
func scoreMs(v any) int64 {
	f, _ := strconv.ParseFloat(replyStr(v), 64)
	return int64(f)
}
