package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultTokenCacheEntries is how many verified caller tokens a Verifier
// remembers when config.Auth.TokenCacheEntries is 0.
const DefaultTokenCacheEntries = 10_000

// evictScan is how many entries one insertion into a full cache looks at
// for expired ones before it evicts an arbitrary entry.
const evictScan = 8

// verified remembers the tokens that passed every check of Verify that
// depends on the token alone and the Verifier's configuration (signature,
// algorithm, crit, iss, aud, lifetime, nbf and iat), so the same token is
// verified once. The key is the SHA-256 of the compact token,
// so the cache holds no token, only its digest and the Caller it names.
//
// An entry lives until the token's exp (never longer: Verify accepts a
// token up to exp + leeway, and after exp a token is verified in full
// again, so the cache never widens what the leeway allows). The cache holds
// at most max entries: an insertion into a full cache drops the expired
// entries among the first evictScan it sees in Go's map order (which is
// randomised), or the first of them when none has expired — a simple
// bounded map with random eviction, so a flood of distinct tokens costs
// each its full verification and evicts others' entries, but never grows
// memory. The cache belongs to one Verifier and its keys: a certificate
// rotation or a configuration change builds a new Verifier, whose cache
// starts empty. It is safe for concurrent use.
type verified struct {
	mu      sync.RWMutex
	max     int
	entries map[[sha256.Size]byte]Caller
}

func newVerified(max int) *verified {
	if max <= 0 {
		max = DefaultTokenCacheEntries
	}
	return &verified{max: max, entries: make(map[[sha256.Size]byte]Caller)}
}

// get returns the Caller of the token with digest k when it is cached and
// its exp is after now. An expired entry found is dropped.
func (c *verified) get(k [sha256.Size]byte, now time.Time) (Caller, bool) {
	c.mu.RLock()
	caller, ok := c.entries[k]
	c.mu.RUnlock()
	if !ok {
		return Caller{}, false
	}
	if !now.Before(caller.ExpiresAt) {
		c.mu.Lock()
		delete(c.entries, k)
		c.mu.Unlock()
		return Caller{}, false
	}
	return caller, true
}

// put remembers caller under k unless its token has expired at now,
// making room first when the cache is full.
func (c *verified) put(k [sha256.Size]byte, caller Caller, now time.Time) {
	if !now.Before(caller.ExpiresAt) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[k] = caller
}

// evict drops the expired entries among the first evictScan in map order,
// or the first entry when none of them has expired. c.mu is held.
func (c *verified) evict(now time.Time) {
	var first [sha256.Size]byte
	seen, dropped := 0, false
	for k, e := range c.entries {
		if seen == 0 {
			first = k
		}
		if !now.Before(e.ExpiresAt) {
			delete(c.entries, k)
			dropped = true
		}
		if seen++; seen == evictScan {
			break
		}
	}
	if !dropped && seen > 0 {
		delete(c.entries, first)
	}
}

// len is the number of entries, expired ones included.
func (c *verified) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
