package redisstore

import "context"

// Reap returns up to limit (at most 1000) of endpoint's expired leases to the
// due set (DESIGN "A reaper returns expired leases"): each gets an attempt
// entry with error "lease_expired" and outcome retryable, loses its lease
// token (the lost worker's Complete then gets ErrStaleLease, so nothing is
// completed twice), and is due now, or held when the gate is shut. A reaped
// probe releases the probe token. The attempt count is not decremented: the
// lost attempt may have reached the upstream, so it stays a real dispatch; a
// worker that crashed between claim and dispatch therefore over-counts by
// one. Two round trips (ZRANGEBYSCORE, reap.lua). It returns the reaped ids.
// Errors: ErrUnavailable.
func (s *Store) Reap(ctx context.Context, endpoint string, limit int) ([]string, error) {
	limit = min(max(limit, 1), maxBatch)
	now := s.now()
	k := keysOf(endpoint)
	ids, err := s.rdb.ZRangeByScore(ctx, k.lease, dueBy(now, limit)).Result()
	if err != nil || len(ids) == 0 {
		return nil, s.wrap("reap", err)
	}
	keys := []string{k.due, k.lease, k.ep}
	args := []any{msArg(now)}
	for _, id := range ids {
		parts := k.parts(id)
		keys = append(keys, parts[0], parts[2])
		args = append(args, id)
	}
	v, err := s.run(ctx, "reap", s.lua.reap, keys, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range replyArr(v) {
		out = append(out, replyStr(x))
	}
	return out, nil
}
