package jobs

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
)

// A job's lease is measured on Redis's clock (ARCHITECTURE.md "One
// clock"): two replicas whose own clocks are 90 s apart, neither pinned,
// agree on it, because the scripts read TIME and the replicas pass the
// lease as a duration only.
func TestJobLeaseFollowsRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		skewed := func(skew time.Duration) *Store {
			return New(e.B.Client, Options{Now: func() time.Time { return time.Now().Add(skew) }})
		}
		ahead, behind := skewed(90*time.Second), skewed(-90*time.Second)
		const tol = 5 * time.Second // the test's own round trips, never the skew

		j, err := behind.CreateJob(ctxT(t), "{}", "ops")
		if err != nil {
			t.Fatal(err)
		}
		got, err := behind.Acquire(ctxT(t), j.ID, "B", jobLease)
		if err != nil {
			t.Fatal(err)
		}
		now := e.B.Now(t)
		redistest.Within(t, "lease expiry", got.LeaseExpiresAt, now.Add(jobLease), tol)
		redistest.Within(t, "started", got.StartedAt, now, tol)
		// The replica ahead by 90 s sees the lease as long expired on its
		// own clock, yet cannot take the job over: Redis's clock says 10 s.
		_, err = ahead.Acquire(ctxT(t), j.ID, "A", jobLease)
		storetest.WantErr(t, err, policy.ErrJobBusy)
		// Nor does a cancel by the replica ahead end the running job at
		// once: it asks the replica behind to stop.
		if st, err := ahead.CancelJob(ctxT(t), j.ID, "ops"); st != policy.JobCancelling || err != nil {
			t.Fatalf("cancel by the replica ahead = %q, %v; want cancelling (the lease is live)", st, err)
		}
	})
}
