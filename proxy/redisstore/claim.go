package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/redis/go-redis/v9"
)

// ClaimOptions are the per-endpoint settings of one claim.
type ClaimOptions struct {
	// Batch is the most callouts one claim returns (DESIGN "Fairness": a
	// bounded batch per endpoint per round). Zero or less: 1. At most 1000.
	Batch int
	// Lease is how long each claimed attempt is leased: at least the
	// attempt limit plus a grace period (SPEC §3). Required (> 0).
	Lease time.Duration
	// Breaker supplies ProbeLease, the probe token's lease.
	Breaker policy.BreakerSettings
}

// ClaimResult is what one Claim did.
type ClaimResult struct {
	// Claimed are the leased callouts, at most Batch (exactly one, Kind
	// probe, when the gate was half-open).
	Claimed []*policy.Claimed
	// Gate is the endpoint's gate as the claim saw it. A shut gate claims
	// nothing and touches no callout; Gate.Until says when to look again.
	// GateOpen with nothing claimed can also mean nothing was due (then the
	// gate was not read).
	Gate policy.Gate
	// DeadLettered lists callouts turned into dead letters (reason
	// endpoint_disabled) because the endpoint is disabled and they were due
	// (callouts reaped or returned after Disable). They must be mirrored
	// like any other dead letter.
	DeadLettered []string
}

// Claim leases up to opts.Batch due callouts of endpoint to the caller
// (DESIGN "Redis data model"). Two round trips: ZRANGEBYSCORE for the
// candidates, then claim.lua, which checks the gate in O(1) first and
// re-checks each candidate. It counts the attempt at claim time
// (Claimed.Attempt). Errors: ErrUnavailable.
func (s *Store) Claim(ctx context.Context, endpoint string, opts ClaimOptions) (ClaimResult, error) {
	if opts.Lease <= 0 {
		return ClaimResult{}, fmt.Errorf("redisstore: claim: lease must be > 0")
	}
	batch := min(max(opts.Batch, 1), maxBatch)
	br := opts.Breaker.WithDefaults(opts.Lease)
	now := s.now()
	k := keysOf(endpoint)
	ids, err := s.rdb.ZRangeByScore(ctx, k.due, dueBy(now, batch)).Result()
	if err != nil || len(ids) == 0 {
		return ClaimResult{Gate: policy.Gate{State: policy.GateOpen}}, s.wrap("claim", err)
	}
	// One random base per claim; candidate i's lease token is base.i.
	base, err := s.token()
	if err != nil {
		return ClaimResult{}, err
	}
	keys := []string{k.due, k.lease, k.ep}
	args := []any{msArg(now), msArg(now.Add(opts.Lease)), msArg(now.Add(br.ProbeLease))}
	for i, id := range ids {
		parts := k.parts(id)
		keys = append(keys, parts[0], parts[1])
		args = append(args, id, base+"."+strconv.Itoa(i))
	}
	v, err := s.run(ctx, "claim", s.lua.claim, keys, args...)
	if err != nil {
		return ClaimResult{}, err
	}
	a, err := replyN("claim", v, 2)
	if err != nil {
		return ClaimResult{}, err
	}
	res := ClaimResult{Gate: policy.Gate{State: policy.GateState(replyStr(a[0])), Until: fromMs(replyStr(a[1]))}}
	if res.Gate.State == policy.GateDisabled {
		res.DeadLettered, err = s.drain(ctx, k, ids)
		return res, err
	}
	for _, x := range a[2:] {
		c, err := decodeClaimed(replyArr(x))
		if err != nil {
			return res, err
		}
		res.Claimed = append(res.Claimed, c)
	}
	return res, nil
}

// decodeClaimed decodes one claimed entry of claim.lua:
// {id, kind, body or nil, due ms, field, value, ...}.
func decodeClaimed(r []any) (*policy.Claimed, error) {
	if len(r) < 4 || len(r)%2 != 0 {
		return nil, fmt.Errorf("redisstore: claim: unexpected entry of %d values", len(r))
	}
	m := make(map[string]string, (len(r)-4)/2)
	for i := 4; i+1 < len(r); i += 2 {
		m[replyStr(r[i])] = replyStr(r[i+1])
	}
	var body []byte
	if b, ok := r[2].(string); ok {
		body = []byte(b)
	}
	return &policy.Claimed{
		ID: replyStr(r[0]), Kind: policy.Kind(replyStr(r[1])), Attempt: atoi(m[fAttempts]),
		LeaseToken: m[fToken], FirstAttemptAt: fromMs(m[fFirst]), Endpoint: m[fEndpoint],
		Issuer: m[fIssuer], Method: m[fMethod], Path: m[fPath], Query: m[fQuery],
		Header: headerOf(m), Body: body, IdempotencyKey: m[fKey], SourceRecord: m[fSource],
		ReplayOf: m[fReplayOf], CreatedAt: fromMs(m[fCreated]), StartedAt: fromMs(m[fLeaseStart]),
		LeaseExpiresAt: fromMs(m[fLeaseUntil]), DueAt: time.UnixMilli(scoreMs(r[3])),
		TraceContext: m[fTrace],
	}, nil
}

// dueBy is the ZRANGEBYSCORE range of up to n members scored at or before t.
func dueBy(t time.Time, n int) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "-inf", Max: msArg(t), Count: int64(n)}
}
