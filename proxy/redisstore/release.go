package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// Release deletes a callout created by Begin whose dispatch was refused
// before anything was sent, with its idempotency reservation, so the caller
// may fix the cause and send the same key again (SPEC §5: "rejections before
// dispatch are never stored as the key's result"). One round trip
// (release.lua). Errors: ErrStaleLease when cl's lease is no longer valid
// (nothing changed), ErrUnavailable.
func (s *Store) Release(ctx context.Context, cl *policy.Claimed) error {
	k := keysOf(cl.Endpoint)
	parts := k.parts(cl.ID)
	idem := k.idem(cl.Issuer, cl.IdempotencyKey)
	if idem == "" {
		idem = parts[0]
	}
	keys := append(parts, k.lease, k.ep, idem)
	v, err := s.run(ctx, "release", s.lua.release, keys, cl.ID, cl.LeaseToken)
	if err != nil {
		return err
	}
	if replyStr(v) == "stale" {
		return fmt.Errorf("redisstore: release %s: %w", cl.ID, policy.ErrStaleLease)
	}
	return nil
}

// lockKey names a replica-wide lock. It is not hash-tagged: no script
// touches it with other keys.
//
//	cp:lock:{name}        STRING the holder's token; TTL: the lock's.
func lockKey(name string) string { return "cp:lock:" + name }

// TryLock takes, or renews when the caller already holds it, the named lock
// for ttl, so that one replica at a time does a periodic job (the backlog
// gatherer; the Salesforce reprocess poller). owner identifies the caller
// (a random token per replica). It reports whether the caller holds the
// lock. One round trip. Errors: ErrUnavailable.
func (s *Store) TryLock(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	v, err := s.run(ctx, "lock", s.lua.lock, []string{lockKey(name)}, owner, durMs(ttl))
	if err != nil {
		return false, err
	}
	return replyInt(v) == 1, nil
}
