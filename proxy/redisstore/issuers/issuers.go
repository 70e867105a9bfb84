// Package issuers keeps the issuer registry (keyspace cp:iss, HASH issuer
// tag -> issuer): a record, a reservation scope and a breaker partition
// carry an issuer's short tag (keyspace.IssuerTag) instead of its URL, and
// every replica resolves a tag here. Tags are only ever added; each
// Registry remembers what it wrote or read, so a tag costs one round trip
// per replica.
package issuers

import (
	"context"
	"sync"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Registry is one replica's view of the issuer registry on one Redis. It
// is safe for concurrent use.
type Registry struct {
	rdb redis.UniversalClient
	m   sync.Map // tag -> issuer
}

// New returns a Registry of the issuers on rdb.
func New(rdb redis.UniversalClient) *Registry { return &Registry{rdb: rdb} }

// Note returns the tag of issuer ("" for no issuer), recording tag ->
// issuer in cp:iss once per Registry before the first record that uses
// it, so every replica can resolve the tag (Of). Errors:
// policy.ErrUnavailable.
func (r *Registry) Note(ctx context.Context, issuer string) (string, error) {
	tag := keyspace.IssuerTag(issuer)
	if tag == "" {
		return "", nil
	}
	if _, ok := r.m.Load(tag); ok {
		return tag, nil
	}
	if err := r.rdb.HSetNX(ctx, keyspace.Issuers, tag, issuer).Err(); err != nil {
		return "", script.Wrap("redisstore: note issuer", err)
	}
	r.m.Store(tag, issuer)
	return tag, nil
}

// Of resolves an issuer tag of a record: from this Registry's memory,
// else cp:iss. "" when unknown (the caller then matches no issuer: GET
// /v1/callouts answers 404, never another organisation's record).
func (r *Registry) Of(ctx context.Context, tag string) string {
	if v, ok := r.m.Load(tag); ok {
		return v.(string)
	}
	v, err := r.rdb.HGet(ctx, keyspace.Issuers, tag).Result()
	if err != nil {
		return ""
	}
	r.m.Store(tag, v)
	return v
}
