package outbox

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// TestStatusOrderedByChain: a replay chain's end (Reprocessed, Failed
// Again) wins over its own Reprocessing whatever the two were stamped and
// in whichever order they are recorded (contract §8: the record shows how
// its latest replay ended); a later chain's Reprocessing still replaces an
// earlier chain's end, and changes without a chain stay ordered by time.
func TestStatusOrderedByChain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		o := e.outbox()
		ctx := ctxT(t)
		root, _ := keyspace.NewCalloutID("chain-api", fixedReader{})
		set := func(status, replay string, at time.Time) bool {
			t.Helper()
			ok, err := o.SetRecordStatus(ctx, root, policy.StatusChange{Status: status, Replay: replay, At: at})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		shows := func(status, replay string) {
			t.Helper()
			st, err := o.RecordState(ctx, root)
			if err != nil || st.Status != status || st.Replay != replay {
				t.Fatalf("record = %+v, %v; want %s of %q", st, err, status, replay)
			}
		}
		// The chain ended before its start was recorded, the start stamped
		// later (a replica ahead, or stamped after the dispatcher ran it).
		if !set(policy.RecordReprocessed, "chain-1", t0) {
			t.Fatal("Reprocessed refused")
		}
		if set(policy.RecordReprocessing, "chain-1", t0.Add(time.Minute)) {
			t.Fatal("Reprocessing recorded over its own chain's end")
		}
		shows(policy.RecordReprocessed, "chain-1")

		// A new chain starts; its end is stamped before its start.
		if !set(policy.RecordReprocessing, "chain-2", t0.Add(2*time.Minute)) {
			t.Fatal("a new chain's Reprocessing refused")
		}
		if !set(policy.RecordFailedAgain, "chain-2", t0.Add(time.Minute+time.Second)) {
			t.Fatal("Failed Again refused: older stamp than its own chain's start")
		}
		shows(policy.RecordFailedAgain, "chain-2")

		// Without a chain, the older change is ignored.
		if set(policy.RecordExpired, "", t0) {
			t.Fatal("an older change without a chain was recorded")
		}
		shows(policy.RecordFailedAgain, "chain-2")
	})
}
