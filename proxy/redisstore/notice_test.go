package redisstore

import (
	"slices"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// noticeStore is a store with the outbox on whose Options.Notify says
// that only the endpoints in loud can tell their owner; endpoint sharded
// has 2 shards.
func noticeStore(e *env, sharded string, loud ...string) *Store {
	return e.storeWith(func(o *Options) {
		o.Outbox = true
		o.Notify = func(ep string) bool { return slices.Contains(loud, ep) }
		o.Shards = func(ep string) int {
			if ep == sharded {
				return 2
			}
			return 1
		}
	})
}

// outboxNotices lists the owner-notification entries of endpoint's home
// outbox (o: outage, d: disable).
func outboxNotices(t *testing.T, e *env, endpoint string) []string {
	var out []string
	for _, m := range e.b.Client.ZRange(ctxT(t), keyspace.HomeQueue(endpoint).SFO, 0, -1).Val() {
		if strings.HasPrefix(m, "o:"+endpoint+":") || strings.HasPrefix(m, "d:"+endpoint+":") {
			out = append(out, m)
		}
	}
	return out
}

// The owner notification is decided once, by the scripts (lib.lua
// owner_notice), with Options.Notify: where no one can be told, no dead
// letter reports NotifyOwner and no notice is queued, the outage is still
// announced once (a later dead letter of it tells no one either); where
// someone can, exactly the outage's first dead letter reports it, with its
// entry; a disable queues its notice only where someone can be told. Home
// queues (complete.lua) and a sharded endpoint's other queue (notify.lua)
// alike. A caller that decided again (or not at all) would disagree with
// NotifyOwner or with the outbox.
func TestOwnerNotificationDecidedOnceInTheStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			name, ep string
			loud     bool
		}{
			{"home queue, no one to tell", "quiet-api", false},
			{"home queue, someone to tell", "loud-api", true},
			{"sharded, no one to tell", "quiet-sh", false},
			{"sharded, someone to tell", "loud-sh", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sharded := ""
				if strings.HasSuffix(tc.ep, "-sh") {
					sharded = tc.ep
				}
				loud := []string{}
				if tc.loud {
					loud = append(loud, tc.ep)
				}
				s := noticeStore(e, sharded, loud...)
				mustEnqueue(t, s, tc.ep, 4)
				var told []string
				for _, cl := range claimEvery(t, s, tc.ep) {
					c := failure(t0)
					c.Action, c.Reason = policy.ActionDeadLetter, policy.DeadLetterExhausted
					if mustComplete(t, s, cl, c).NotifyOwner {
						told = append(told, cl.ID)
					}
				}
				notices := outboxNotices(t, e, tc.ep)
				switch {
				case tc.loud && (len(told) != 1 || len(notices) != 1 || notices[0] != "o:"+tc.ep+":"+told[0]):
					t.Fatalf("told %v, notices %v; want the outage's first dead letter, once", told, notices)
				case !tc.loud && (len(told) != 0 || len(notices) != 0):
					t.Fatalf("told %v, notices %v; want none (no one to tell)", told, notices)
				}
				if st, err := s.EndpointState(ctxT(t), tc.ep); err != nil || !st.OutageNotified {
					t.Fatalf("outage announced = %v (%v), want true either way", st.OutageNotified, err)
				}
				if _, err := s.Disable(ctxT(t), tc.ep, "admin"); err != nil {
					t.Fatal(err)
				}
				disables := 0
				for _, n := range outboxNotices(t, e, tc.ep) {
					if strings.HasPrefix(n, "d:") {
						disables++
					}
				}
				if want := map[bool]int{true: 1, false: 0}[tc.loud]; disables != want {
					t.Fatalf("%d disable notices, want %d", disables, want)
				}
			})
		}
	})
}
