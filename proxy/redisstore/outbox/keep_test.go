package outbox

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestKeepPending (docs/salesforce.md "No write lost to its own
// retention"): while a dead letter's mirror and its completion event are
// queued, a record with less than the margin left gets the margin, for at
// most the cap after its first extension; once the writes are done, the
// record is left to its TTL.
func TestKeepPending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s, o := e.outboxStore()
		ids, _ := scheduledDeadLetters(t, s, "payments", 2)
		rec, _ := keyspace.Callout(ids[0])
		const margin = 40 * day // more than the dead letters' 30 days left
		kept, capped, err := o.KeepPending(ctxT(t), margin, 2*day)
		if err != nil || kept != 2 || capped != 0 {
			t.Fatalf("keep = %d kept, %d capped, %v; want both dead letters kept", kept, capped, err)
		}
		if d := e.PTTL(t, rec); d <= margin-time.Minute || d > margin {
			t.Fatalf("record TTL after keep = %v, want %v", d, margin)
		}

		// Past the cap the records are left to their TTL, and counted.
		e.Clk.Advance(2 * day)
		if e.B.Mini != nil {
			e.B.Mini.FastForward(time.Hour) // miniredis's TTLs run on its own clock
		}
		kept, capped, err = o.KeepPending(ctxT(t), margin+time.Hour, 2*day)
		if err != nil || kept != 0 || capped != 2 {
			t.Fatalf("keep past the cap = %d kept, %d capped, %v; want both capped", kept, capped, err)
		}

		// Written, the entries go and their records are no longer kept.
		got, err := o.Claim(ctxT(t), keyspace.ShardOf("payments"), 100, testLease)
		if err != nil {
			t.Fatal(err)
		}
		var acks []policy.OutboxAck
		for _, en := range got {
			acks = append(acks, policy.OutboxAck{Name: en.Name, Verdict: policy.VerdictDone})
		}
		if _, err := o.Ack(ctxT(t), keyspace.ShardOf("payments"), got[0].Lease, acks); err != nil {
			t.Fatal(err)
		}
		if kept, capped, err = o.KeepPending(ctxT(t), margin*2, 2*day); err != nil || kept+capped != 0 {
			t.Fatalf("keep after the writes = %d kept, %d capped, %v; want nothing", kept, capped, err)
		}
	})
}
