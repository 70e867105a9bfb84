package outbox

import (
	"context"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Reprocess requests from Salesforce (contract §8 "Admins reprocess from
// Salesforce"): an admin sets a Failed_Callout__c record's Status__c to
// Reprocess Requested, and the salesforce package's poller replays it. A
// request is named by its record's root (Callout_Id__c) and the record's
// SystemModstamp when it was seen: an admin's next request moves the
// stamp, so it is a new request. The claim makes each request replay once
// even when two replicas poll at once (a poll lock that lapsed, a slow
// poll): SET NX, then "done" for the dead-letter retention once handled.
// The key, cp:sf:rq:{root}:{ms}, is documented in package keyspace.

// reprocessDone is a handled request's claim value.
const reprocessDone = "done"

// reprocessKey names the claim of root's request seen at stamp (Unix ms).
func reprocessKey(root string, stamp time.Time) string {
	return keyspace.SFReprocess(root, stamp.UnixMilli())
}

// ClaimReprocess takes the reprocess request of the record of root whose
// SystemModstamp is stamp, for owner (a replica's random token), for lease
// (ms precision; at least 1 ms): it reports true when this call took it,
// false when a replica holds it or it was handled (FinishReprocess). A
// claim whose holder died lapses after lease, and the request may then be
// claimed again. One round trip (SET NX PX). Errors: policy.ErrUnavailable.
func (o *Outbox) ClaimReprocess(ctx context.Context, root string, stamp time.Time, owner string,
	lease time.Duration) (bool, error) {
	ok, err := o.rdb.SetNX(ctx, reprocessKey(root, stamp), owner, max(lease, time.Millisecond)).Result()
	if err != nil {
		return false, wrap("claim reprocess", err)
	}
	return ok, nil
}

// FinishReprocess notes the request of root at stamp handled, for the
// dead-letter retention (Options.DeadLetterRetention, 720 h by default):
// after that no copy it could replay is left. One round trip. Errors:
// policy.ErrUnavailable.
func (o *Outbox) FinishReprocess(ctx context.Context, root string, stamp time.Time) error {
	return wrap("finish reprocess", o.rdb.Set(ctx, reprocessKey(root, stamp), reprocessDone, o.dlTTL).Err())
}
