package redisstore

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestEnqueueDryRunWritesNothing: a dry-run Enqueue answers what the real
// one would (free key: scheduled or held by the gate; a key held by a
// pending chain: Existing; a disabled endpoint: ErrDisabled; a full
// backlog: ErrBacklogFull) and leaves every key as it was.
func TestEnqueueDryRunWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		dry := policy.EnqueueOptions{DryRun: true}
		keys := func() int64 { return e.b.Client.DBSize(ctx).Val() }
		nc, dl := deadLetter(t, s, "dry-api", "k-1")
		before := keys()

		replay := nc
		replay.ReplayOf = dl
		r, err := s.Enqueue(ctx, replay, dry)
		if err != nil || r.Existing != nil || r.ID != "" || r.State != policy.Scheduled {
			t.Fatalf("dry replay of a free key = %+v, %v", r, err)
		}
		if n := keys(); n != before {
			t.Fatalf("a dry run wrote: %d keys, was %d", n, before)
		}
		if st, _ := s.EndpointState(ctx, "dry-api"); st.Due != 0 {
			t.Fatalf("a dry run queued %d callouts", st.Due)
		}

		// The real replay takes the key; a dry run of it again names that chain.
		real, err := s.Enqueue(ctx, replay, policy.EnqueueOptions{})
		if err != nil || real.ID == "" {
			t.Fatalf("replay = %+v, %v", real, err)
		}
		r, err = s.Enqueue(ctx, replay, dry)
		if err != nil || r.Existing == nil || r.Existing.ID != real.ID {
			t.Fatalf("dry replay of a held key = %+v, %v", r, err)
		}

		// A full backlog and a disabled endpoint answer as the real run's would.
		_, err = s.Enqueue(ctx, req("dry-api", "k-2", "{}"), policy.EnqueueOptions{DryRun: true,
			Limits: policy.BacklogLimits{MaxItems: 1}})
		wantErr(t, err, policy.ErrBacklogFull)
		if _, err := s.Disable(ctx, "dry-api", "test"); err != nil {
			t.Fatal(err)
		}
		_, err = s.Enqueue(ctx, req("dry-api", "k-3", "{}"), dry)
		wantErr(t, err, policy.ErrDisabled)
	})
}

// TestEnqueueDryRunHeldByTheGate: behind a pause, a dry run says held
// until the pause ends, as the real Enqueue does.
func TestEnqueueDryRunHeldByTheGate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		until := e.clk.Now().Add(time.Minute)
		if _, err := s.RecordResult(ctx, "dry-held", policy.ReadResult{PausedUntil: until}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Enqueue(ctx, req("dry-held", "k", "{}"), policy.EnqueueOptions{DryRun: true})
		if err != nil || r.State != policy.Held || !r.DueAt.Equal(until) {
			t.Fatalf("dry run behind a pause = %+v, %v", r, err)
		}
		real, err := s.Enqueue(ctx, req("dry-held", "k", "{}"), policy.EnqueueOptions{})
		if err != nil || real.State != r.State || !real.DueAt.Equal(r.DueAt) {
			t.Fatalf("real run = %+v, dry run said %+v", real, r)
		}
	})
}
