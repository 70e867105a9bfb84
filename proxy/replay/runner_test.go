package replay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

// TestJobWindowOnceEach: a job of overlapping filters and ids replays
// exactly the matching dead letters, once each, each with its original
// request and Idempotency-Key (contract §8).
func TestJobWindowOnceEach(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		pay := e.seedN(t, "pay-api", "pay", 10, time.Second) // at t0 … t0+9s
		crm := e.seedN(t, "crm-api", "crm", 3, time.Second)  // at t0+10s …
		sp := Spec{Rate: 100, IDs: []string{pay[8].ID, pay[3].ID}, Filters: []Filter{
			{Endpoints: []string{"pay-api"}, Since: t0.Add(2 * time.Second), Until: t0.Add(5 * time.Second)},
			{Endpoints: []string{"pay-api"}, Since: t0.Add(4 * time.Second), Until: t0.Add(6 * time.Second)},
		}}
		j, err := s.CreateJob(ctxT(t), sp, "ops")
		if err != nil {
			t.Fatal(err)
		}
		s.RunJob(ctxT(t), j.ID)
		want := []string{pay[2].ID, pay[3].ID, pay[4].ID, pay[5].ID, pay[6].ID, pay[8].ID}
		wantJob(t, s, j.ID, policy.JobCompleted, 6, 6, 0, 0)
		chains := e.replayChains(t, "pay-api")
		got := make([]string, 0, len(chains))
		for dl, c := range chains {
			got = append(got, dl)
			d := pay[slices.IndexFunc(pay, func(x seeded) bool { return x.ID == dl })]
			if c.IdempotencyKey != d.Key || c.Header.Get("Idempotency-Key") != `"`+d.Key+`"` ||
				string(c.Body) != `{"key":"`+d.Key+`"}` {
				t.Fatalf("chain of %s = %+v", dl, c)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("replayed %v\nwant     %v", got, want)
		}
		if other := e.replayChains(t, "crm-api"); len(other) != 0 || len(crm) != 3 {
			t.Fatalf("another endpoint was replayed: %v", other)
		}
		for _, a := range e.logs.Audits() {
			if a["token"] != "ops" || a["job_id"] != j.ID || a["result"] != "replayed" {
				t.Fatalf("audit line = %v", a)
			}
		}
		if n := len(e.logs.Audits()); n != 6 {
			t.Fatalf("%d audit lines, want one per replay (6)", n)
		}
	})
}

// TestJobPacedByRate: sends are spaced by 1/rate on the injected clock.
func TestJobPacedByRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ds := e.seedN(t, "pay-api", "r", 100, time.Millisecond)
		j, err := s.CreateJob(ctxT(t), Spec{Rate: 50, Filters: []Filter{{Endpoints: []string{"pay-api"}}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		start := e.clk.Now()
		s.RunJob(ctxT(t), j.ID)
		wantJob(t, s, j.ID, policy.JobCompleted, 100, 100, 0, 0)
		if want := 99 * 20 * time.Millisecond; e.clk.Slept() != want {
			t.Fatalf("slept %v on the clock, want %v (99 gaps of 1/50 s)", e.clk.Slept(), want)
		}
		chains := e.replayChains(t, "pay-api")
		for i, d := range ds {
			c := chains[d.ID]
			if c == nil {
				t.Fatalf("dead letter %d not replayed", i)
			}
			if want := start.Add(time.Duration(i) * 20 * time.Millisecond); !c.CreatedAt.Equal(want) {
				t.Fatalf("replay %d created at %v, want %v", i, c.CreatedAt.Sub(start), want.Sub(start))
			}
		}
	})
}

// TestJobCancelPartWay: cancel stops a running job before its next send;
// the job says how many were sent, and the rest are reported not sent.
func TestJobCancelPartWay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		e.seedN(t, "pay-api", "c", 50, 0)
		j, err := s.CreateJob(ctxT(t), Spec{Rate: 10, Filters: []Filter{{Endpoints: []string{"pay-api"}}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		blocked, release := e.clk.GateAt(e.clk.Now().Add(2 * time.Second)) // before the 21st send
		done := make(chan struct{})
		go func() { s.RunJob(ctxT(t), j.ID); close(done) }()
		<-blocked
		mid := wantJob(t, s, j.ID, policy.JobRunning, 50, 20, 0, 0)
		if mid.Phase != policy.PhaseSend {
			t.Fatalf("phase = %s", mid.Phase)
		}
		got, err := s.CancelJob(ctxT(t), j.ID, "ops")
		if err != nil || got.State != policy.JobCancelling {
			t.Fatalf("cancel = %+v, %v", got, err)
		}
		release()
		<-done
		end := wantJob(t, s, j.ID, policy.JobCancelled, 50, 20, 0, 0)
		if end.CancelledBy != "ops" {
			t.Fatalf("cancelled by %q", end.CancelledBy)
		}
		if n := len(e.replayChains(t, "pay-api")); n != 20 {
			t.Fatalf("%d replays sent, want 20", n)
		}
		page, err := s.JobItems(ctxT(t), j.ID, 18, 4)
		if err != nil {
			t.Fatal(err)
		}
		var st []policy.ItemStatus
		for _, it := range page.Items {
			st = append(st, it.Status)
		}
		want := []policy.ItemStatus{policy.ItemSent, policy.ItemSent, policy.ItemSkipped, policy.ItemSkipped}
		if !slices.Equal(st, want) || page.Next != 22 || page.Items[2].Detail != "not_sent" || page.Items[0].DeadLetter == nil {
			t.Fatalf("items = %+v (next %d)", page.Items, page.Next)
		}
	})
}

// TestJobResumesInAnotherReplica: a replica that stops part-way releases
// the job; another goes on where it stopped, sending nothing twice.
func TestJobResumesInAnotherReplica(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		a, b := e.service("A"), e.service("B")
		e.seedN(t, "pay-api", "m", 30, 0)
		j, err := a.CreateJob(ctxT(t), Spec{Rate: 10, Filters: []Filter{{Endpoints: []string{"pay-api"}}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		blocked, release := e.clk.GateAt(e.clk.Now().Add(time.Second))
		defer release()
		ctx, stop := context.WithCancel(ctxT(t))
		done := make(chan struct{})
		go func() { a.RunJob(ctx, j.ID); close(done) }()
		<-blocked
		stop() // replica A shuts down while pacing
		<-done
		wantJob(t, a, j.ID, policy.JobRunning, 30, 10, 0, 0)
		b.RunJob(ctxT(t), j.ID)
		wantJob(t, b, j.ID, policy.JobCompleted, 30, 30, 0, 0)
		if n := len(e.replayChains(t, "pay-api")); n != 30 {
			t.Fatalf("%d replays, want 30 (each once)", n)
		}
	})
}

// TestJobDryRunSendsNothing: a dry run collects what would be replayed,
// sends nothing and is not paced; an id that is no dead letter is skipped
// (not_found) as the real run would skip it.
func TestJobDryRunSendsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ds := e.seedN(t, "pay-api", "d", 5, time.Second)
		// The dead letters themselves are charged to the backlog bytes
		// (contract §10); a dry run must add nothing to them.
		_, seeded, _ := e.store.Backlog(ctxT(t), "pay-api")
		j, err := s.CreateJob(ctxT(t), Spec{DryRun: true, IDs: []string{"00AAAAAAAAAAAAAAAAAAAAAA"},
			Filters: []Filter{{Endpoints: []string{"pay-api"}, Until: t0.Add(2 * time.Second)}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		s.RunJob(ctxT(t), j.ID)
		if got := wantJob(t, s, j.ID, policy.JobCompleted, 4, 0, 1, 0); got.WouldSend != 3 {
			t.Fatalf("would send %d, want 3", got.WouldSend)
		}
		if items, bytes, _ := e.store.Backlog(ctxT(t), "pay-api"); items != 0 || bytes != seeded || e.clk.Slept() != 0 {
			t.Fatalf("a dry run sent something: backlog %d items %d bytes (%d before), slept %v", items, bytes, seeded, e.clk.Slept())
		}
		page, _ := s.JobItems(ctxT(t), j.ID, 0, 10)
		var got []string
		for _, it := range page.Items {
			if it.Status == policy.ItemWouldSend {
				got = append(got, it.DeadLetterID)
			}
		}
		last := page.Items[3]
		if !slices.Equal(got, []string{ds[0].ID, ds[1].ID, ds[2].ID}) || last.Status != policy.ItemSkipped ||
			last.Detail != "not_found" {
			t.Fatalf("would send %v; last %+v", got, last)
		}
		if len(e.logs.Audits()) != 0 {
			t.Fatal("a dry run audit-logged a replay")
		}
	})
}

// TestJobRefusesDisabledEndpoint: dead letters of a disabled endpoint are
// refused; the others are sent.
func TestJobRefusesDisabledEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		e.seedN(t, "pay-api", "p", 2, time.Millisecond)
		e.seedN(t, "crm-api", "c", 3, time.Millisecond)
		if _, err := e.store.Disable(ctxT(t), "crm-api", "test"); err != nil {
			t.Fatal(err)
		}
		j, err := s.CreateJob(ctxT(t), Spec{Rate: 100, Filters: []Filter{{}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		s.RunJob(ctxT(t), j.ID)
		wantJob(t, s, j.ID, policy.JobCompleted, 5, 2, 0, 3)
		page, _ := s.JobItems(ctxT(t), j.ID, 0, 10)
		if it := page.Items[0]; it.Status != policy.ItemRefused || it.Detail != "endpoint_disabled" {
			t.Fatalf("first item (crm-api sorts first) = %+v", it)
		}
	})
}

// TestRunPicksUpJobsAndSweeps: Run starts a created job at once (Wake),
// and its sweep prunes expired index entries.
func TestRunPicksUpJobsAndSweeps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		e.seedN(t, "pay-api", "w", 3, 0)
		ctx, stop := context.WithCancel(ctxT(t))
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		j, err := s.CreateJob(ctxT(t), Spec{Rate: 1000, Filters: []Filter{{}}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, _ := s.Job(ctxT(t), j.ID)
			if got.State == policy.JobCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job not completed by Run: %+v\nlogs:\n%s", got, e.logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		<-done
		wantJob(t, s, j.ID, policy.JobCompleted, 3, 3, 0, 0)
		// Past the retention, the sweep drops the index entries.
		e.clk.Advance(31 * 24 * time.Hour)
		s.sweep(ctxT(t))
		st, err := e.store.EndpointState(ctxT(t), "pay-api")
		if err != nil || st.DeadLetters != 0 {
			t.Fatalf("index after the sweep: %d entries, %v", st.DeadLetters, err)
		}
	})
}

// TestJobUnreadableSpec: a job whose stored spec this package did not
// write (SpecOf fails) never sends anything: RunJob ends it failed with
// UnreadableSpec in its error.
func TestJobUnreadableSpec(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		e.seedN(t, "pay-api", "u", 2, 0)
		rec, err := e.jobs.CreateJob(ctxT(t), `{"filters": "not a list"}`, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := SpecOf(rec); err == nil {
			t.Fatal("SpecOf read a malformed spec")
		}
		s.RunJob(ctxT(t), rec.ID)
		j := wantJob(t, s, rec.ID, policy.JobFailed, 0, 0, 0, 0)
		if !strings.Contains(j.Error, UnreadableSpec) {
			t.Fatalf("job error %q, want it to say %q", j.Error, UnreadableSpec)
		}
		if n := len(e.replayChains(t, "pay-api")); n != 0 {
			t.Fatalf("%d replays sent from an unreadable spec", n)
		}
	})
}

// TestDryRunSaysWhatTheRealRunDoes: over dead letters that are fresh,
// already replayed (pending, and succeeded), superseded by their own failed
// replay, of a disabled endpoint and of a paused one, each item of a dry
// run has the status and detail the real run then gives it (the dry run
// previews through the same code and script), and the counts agree.
func TestDryRunSaysWhatTheRealRunDoes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ctx := ctxT(t)
		pay := e.seedN(t, "pay-api", "p", 4, time.Millisecond)
		crm := e.seedN(t, "crm-api", "c", 1, time.Millisecond)
		// p-0: replayed, still pending. p-1: replayed, and that replay
		// dead-lettered too (so p-1 is superseded and its replay is a new
		// dead letter). p-2, p-3: fresh.
		if _, err := s.ReplayOne(ctx, pay[0].ID, "ops"); err != nil {
			t.Fatal(err)
		}
		r1, err := s.ReplayOne(ctx, pay[1].ID, "ops")
		if err != nil {
			t.Fatal(err)
		}
		e.deadLetterPending(t, "pay-api", r1)
		if _, err := e.store.Disable(ctx, "crm-api", "test"); err != nil {
			t.Fatal(err)
		}
		_ = crm
		spec := Spec{Rate: 1000, Filters: []Filter{{}}}
		run := func(dry bool) (policy.ReplayJob, map[string]policy.ReplayItem) {
			sp := spec
			sp.DryRun = dry
			j, err := s.CreateJob(ctx, sp, "ops")
			if err != nil {
				t.Fatal(err)
			}
			s.RunJob(ctx, j.ID)
			j, _ = s.Job(ctx, j.ID)
			page, err := s.JobItems(ctx, j.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]policy.ReplayItem{}
			for _, it := range page.Items {
				out[it.DeadLetterID] = it.ReplayItem
			}
			return j, out
		}
		dj, dry := run(true)
		rj, real := run(false)
		if len(dry) != len(real) || len(real) != 6 {
			t.Fatalf("dry run %d items, real run %d, want 6 each", len(dry), len(real))
		}
		for id, r := range real {
			d := dry[id]
			want := r.Status
			if want == policy.ItemSent {
				want = policy.ItemWouldSend
			}
			if d.Status != want || d.Detail != r.Detail {
				t.Errorf("%s: dry run said %s (%s), the real run did %s (%s)", id, d.Status, d.Detail, r.Status, r.Detail)
			}
		}
		if dj.WouldSend != rj.Sent || dj.Skipped != rj.Skipped || dj.Refused != rj.Refused || rj.Sent != 3 {
			t.Fatalf("dry run %+v\nreal run %+v", dj, rj)
		}
		for id, want := range map[string]string{pay[0].ID: "already_replayed", pay[1].ID: "superseded",
			crm[0].ID: "endpoint_disabled"} {
			if real[id].Detail != want {
				t.Errorf("%s: %+v, want %s", id, real[id], want)
			}
		}
	})
}

// deadLetterPending claims endpoint's due callout id and dead-letters it.
func (e *testEnv) deadLetterPending(t *testing.T, endpoint, id string) {
	t.Helper()
	cr, err := e.store.Claim(ctxT(t), endpoint, redisstore.ClaimOptions{Batch: 10, Lease: testLease})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cr.Claimed {
		comp := policy.Completion{Action: policy.ActionDeadLetter, Reason: policy.DeadLetterPermanent, Error: "again",
			Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 400, Outcome: policy.Permanent}}
		if cl.ID != id {
			comp = policy.Completion{Action: policy.ActionRetry, NextAttemptAt: e.clk.Now(),
				Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 503, Outcome: policy.Retryable}}
		}
		if _, err := e.store.Complete(ctxT(t), cl, comp); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJobWithAFutureSinceIsRefused: a filter whose since is after the job's
// creation (which becomes its until) is refused at creation, and a stored
// spec the listing refuses fails the job at once instead of being retried
// at every poll.
func TestJobWithAFutureSinceIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		_, err := s.CreateJob(ctxT(t), Spec{Filters: []Filter{{Since: t0.Add(time.Hour)}}}, "ops")
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("create = %v, want ErrInvalid", err)
		}
		rec, err := e.jobs.CreateJob(ctxT(t), `{"filters":[{"since":"2030-01-01T00:00:00Z","until":"2020-01-01T00:00:00Z"}]}`, "ops")
		if err != nil {
			t.Fatal(err)
		}
		s.RunJob(ctxT(t), rec.ID)
		if j := wantJob(t, s, rec.ID, policy.JobFailed, 0, 0, 0, 0); !strings.Contains(j.Error, "before since") {
			t.Fatalf("job error %q", j.Error)
		}
	})
}
