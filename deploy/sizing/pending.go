package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// pendingResult is the cost in Redis of n pending callouts created through
// redisstore.Enqueue: scheduled, not attempted yet.
type pendingResult struct {
	N         int
	BodyBytes int
	// PerCallout is used_memory's growth divided by N, bytes.
	PerCallout int64
	// Record, Reservation and Body are MEMORY USAGE of one callout's hash,
	// its idempotency reservation and its body key, bytes.
	Record, Reservation, Body int64
}

// measurePending enqueues n callouts with a body of bodyBytes on an empty
// server and reads used_memory around them. The callouts look like an Apex
// write: POST, three headers, an Idempotency-Key of 36 characters (a UUID)
// and a source record id.
func measurePending(ctx context.Context, r *redisServer, n, bodyBytes int) (pendingResult, error) {
	if err := r.reset(ctx); err != nil {
		return pendingResult{}, err
	}
	store := redisstore.New(r.Client, redisstore.Options{})
	before, err := r.info(ctx)
	if err != nil {
		return pendingResult{}, err
	}
	body := []byte(strings.Repeat("x", bodyBytes))
	var last policy.EnqueueResult
	for i := range n {
		last, err = store.Enqueue(ctx, sampleCallout(i, body), policy.EnqueueOptions{})
		if err != nil {
			return pendingResult{}, fmt.Errorf("enqueue %d: %w", i, err)
		}
	}
	after, err := r.info(ctx)
	if err != nil {
		return pendingResult{}, err
	}
	res := pendingResult{N: n, BodyBytes: bodyBytes, PerCallout: diff(before, after).Memory / int64(n)}
	res.Record, res.Reservation, res.Body = r.keysOf(ctx, last.ID)
	return res, nil
}

// keysOf returns MEMORY USAGE of a callout's record, of the idempotency
// reservation of its shard (there is one per callout; any one is typical)
// and of its :q key (its headers and body when they do not fit inline),
// bytes.
func (r *redisServer) keysOf(ctx context.Context, id string) (record, reservation, body int64) {
	keys, _ := r.Client.Keys(ctx, "*"+id).Result()
	if len(keys) == 1 {
		record = r.Client.MemoryUsage(ctx, keys[0], 0).Val()
		// the headers and body: inline in the record unless
		// long, then in :q
		body = r.Client.MemoryUsage(ctx, keys[0]+":q", 0).Val()
	}
	// the reservation, cp:{sN}:i:{h}
	if idem, _ := r.Client.Keys(ctx, "*:i:*").Result(); len(idem) > 0 {
		reservation = r.Client.MemoryUsage(ctx, idem[0], 0).Val()
	}
	return record, reservation, body
}

// sampleCallout is the i-th callout of a measurement.
func sampleCallout(i int, body []byte) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: "payment-api", Issuer: "https://example.my.salesforce.com",
		Method: http.MethodPost, Path: "/v1/charges",
		Header: http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json"},
			"User-Agent": {"SFDC-Callout/62.0"},
		},
		IdempotencyKey: fmt.Sprintf("7d3c1f0e-4b8a-4c7e-9f21-%012d", i),
		SourceRecord:   "006000000000001AAA", Body: body,
	}
}
