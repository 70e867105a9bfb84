package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// The legacy layout (keys.go "Layout 1"): records written before layout 2,
// in cp:{sN}:due:{ep} and cp:{sN}:lease:{ep}, with their reservations in
// cp:{sN}:idem:{ep}:{h}. The store keeps serving them until they are gone —
// claimed, completed, reaped, drained, discarded, read and accounted by the
// scripts they were written for (lua/legacy_*.lua) — so a rolling upgrade
// loses none. New records are never written in it.

// legacyClaimCall is the legacy_claim.lua run for candidate ids of the
// legacy due set (tokens numbered from *n on).
func (s *Store) legacyClaimCall(k epKeys, ids []string, base string, n *int, now time.Time, lease time.Duration, br policy.BreakerSettings) *scriptCall {
	keys := []string{k.due, k.lease, k.ep}
	args := []any{msArg(now), msArg(now.Add(lease)), msArg(now.Add(br.ProbeLease))}
	for _, id := range ids {
		parts := k.parts(id)
		keys = append(keys, parts[0], parts[1])
		args = append(args, id, base+"."+strconv.Itoa(*n))
		*n++
	}
	return &scriptCall{sc: s.lua.legacyClaim, keys: keys, args: args}
}

// decodeLegacyClaim decodes a legacy_claim.lua reply into res; a disabled
// gate drains the candidates (legacy_drain.lua).
func (s *Store) decodeLegacyClaim(ctx context.Context, k epKeys, ids []string, v any, res *ClaimResult) error {
	a, err := replyN("claim", v, 2)
	if err != nil {
		return err
	}
	g := policy.Gate{State: policy.GateState(replyStr(a[0])), Until: fromMs(replyStr(a[1]))}
	if g.Shut() || g.State == policy.GateDisabled || res.Gate.State == policy.GateOpen {
		res.Gate = g
	}
	if g.State == policy.GateDisabled {
		moved, err := s.legacyDrain(ctx, k, ids)
		res.DeadLettered = append(res.DeadLettered, moved...)
		return err
	}
	for _, x := range a[2:] {
		c, err := decodeClaimed(replyArr(x))
		if err != nil {
			return err
		}
		res.Claimed = append(res.Claimed, c)
	}
	return nil
}

// decodeClaimed decodes one claimed entry of legacy_claim.lua:
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
