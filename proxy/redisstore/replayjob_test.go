package redisstore

import (
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

const jobLease = 10 * time.Second

// replays returns a ReplayStore over a new Store of e.
func (e *env) replays(o ReplayStoreOptions) *ReplayStore { return NewReplayStore(e.store(), o) }

// mustJob creates a job and fails the test on error.
func mustJob(t *testing.T, r *ReplayStore, spec string) policy.ReplayJob {
	t.Helper()
	j, err := r.CreateJob(ctxT(t), spec, "ops")
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return j
}

// mustAcquire acquires a job for owner and fails the test on error.
func mustAcquire(t *testing.T, r *ReplayStore, id, owner string) policy.ReplayJob {
	t.Helper()
	j, err := r.Acquire(ctxT(t), id, owner, jobLease)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", id, owner, err)
	}
	return j
}

// mustClaimItem claims queue item index of a job and fails on error.
func mustClaimItem(t *testing.T, r *ReplayStore, id, owner string, index int, dl string) (bool, policy.ItemStatus) {
	t.Helper()
	ok, prev, err := r.ClaimItem(ctxT(t), id, owner, jobLease, index, dl)
	if err != nil {
		t.Fatalf("claim item %d (%s): %v", index, dl, err)
	}
	return ok, prev
}

func TestReplayJobLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(ReplayStoreOptions{})
		j := mustJob(t, r, `{"ids":["x"]}`)
		if j.State != policy.JobQueued || j.CreatedBy != "ops" || !j.CreatedAt.Equal(t0) || !validJobID(j.ID) {
			t.Fatalf("created = %+v", j)
		}
		if active, _ := r.ActiveJobs(ctxT(t)); !slices.Equal(active, []string{j.ID}) {
			t.Fatalf("active = %v", active)
		}
		e.clk.Advance(time.Second)
		got := mustAcquire(t, r, j.ID, "A")
		if got.State != policy.JobRunning || got.Phase != policy.PhaseCollect || !got.StartedAt.Equal(t0.Add(time.Second)) ||
			got.Owner != "A" || got.Spec != `{"ids":["x"]}` {
			t.Fatalf("acquired = %+v", got)
		}
		_, err := r.Acquire(ctxT(t), j.ID, "B", jobLease)
		wantErr(t, err, policy.ErrJobBusy)

		// Overlapping batches: every dead letter is taken once.
		for _, batch := range [][]string{{"d1", "d2", "d3"}, {"d2", "d3", "d4"}, {"d1"}} {
			if _, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "pos-"+batch[0], false, batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.StartSending(ctxT(t), j.ID, "A", jobLease); err != nil {
			t.Fatal(err)
		}
		q, _ := r.Queue(ctxT(t), j.ID, 0, 10)
		if !slices.Equal(q, []string{"d1", "d2", "d3", "d4"}) {
			t.Fatalf("queue = %v", q)
		}
		results := []policy.ReplayItem{
			{DeadLetterID: "d1", Status: policy.ItemSent, ReplayID: "r1"},
			{DeadLetterID: "d2", Status: policy.ItemSkipped, ReplayID: "r0", Detail: "already_replayed"},
			{DeadLetterID: "d3", Status: policy.ItemRefused, Detail: "endpoint_disabled"},
			{DeadLetterID: "d4", Status: policy.ItemFailed, Detail: "store|unavailable"},
		}
		for i, it := range results {
			if ok, _ := mustClaimItem(t, r, j.ID, "A", i, it.DeadLetterID); !ok {
				t.Fatalf("item %d not claimed", i)
			}
			if ok, err := r.FinishItem(ctxT(t), j.ID, it); !ok || err != nil {
				t.Fatalf("finish item %d = %v, %v", i, ok, err)
			}
		}
		// A second claim or result of a handled item changes nothing.
		if ok, prev := mustClaimItem(t, r, j.ID, "A", 0, "d1"); ok || prev != policy.ItemSent {
			t.Fatalf("second claim = %v, %q", ok, prev)
		}
		if ok, _ := r.FinishItem(ctxT(t), j.ID, policy.ReplayItem{DeadLetterID: "d1", Status: policy.ItemFailed}); ok {
			t.Fatal("a handled item was recorded twice")
		}
		items, _ := r.Items(ctxT(t), j.ID, 0, 10)
		results[3].Detail = "store/unavailable"
		if !slices.Equal(items, results) {
			t.Fatalf("items = %+v\nwant %+v", items, results)
		}
		wantFinished(t, e, r, j.ID)
	})
}

// wantFinished ends job id as owner A and checks what ending does: the
// counters stay, the lease goes, the keys get the retention, the job
// leaves the active set and cannot be taken again, and is still listed.
func wantFinished(t *testing.T, e *env, r *ReplayStore, id string) {
	t.Helper()
	if err := r.Finish(ctxT(t), id, "A", policy.JobCompleted, ""); err != nil {
		t.Fatal(err)
	}
	done, _ := r.Job(ctxT(t), id)
	if done.State != policy.JobCompleted || done.Total != 4 || done.Sent != 1 || done.Skipped != 1 ||
		done.Refused != 1 || done.Failed != 1 || done.Index != 1 || done.Owner != "" || done.FinishedAt.IsZero() {
		t.Fatalf("finished = %+v", done)
	}
	for _, key := range keyspace.JobOf(id).All() {
		if d := pttl(t, e, key); d <= DefaultJobRetention-time.Minute || d > DefaultJobRetention {
			t.Fatalf("%s TTL = %v, want the job retention", key, d)
		}
	}
	if active, _ := r.ActiveJobs(ctxT(t)); len(active) != 0 {
		t.Fatalf("active after finish = %v", active)
	}
	_, err := r.Acquire(ctxT(t), id, "A", jobLease)
	wantErr(t, err, policy.ErrJobFinal)
	if list, _ := r.Jobs(ctxT(t), 10); len(list) != 1 || list[0].ID != id {
		t.Fatalf("jobs = %+v", list)
	}
}

func TestReplayJobCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(ReplayStoreOptions{})
		queued := mustJob(t, r, "{}")
		if st, err := r.CancelJob(ctxT(t), queued.ID, "ops"); err != nil || st != policy.JobCancelled {
			t.Fatalf("cancel queued = %q, %v", st, err)
		}
		j := mustJob(t, r, "{}")
		mustAcquire(t, r, j.ID, "A")
		if _, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "", false, []string{"d1", "d2"}); err != nil {
			t.Fatal(err)
		}
		if err := r.StartSending(ctxT(t), j.ID, "A", jobLease); err != nil {
			t.Fatal(err)
		}
		mustClaimItem(t, r, j.ID, "A", 0, "d1")
		if st, err := r.CancelJob(ctxT(t), j.ID, "viewer-ops"); err != nil || st != policy.JobCancelling {
			t.Fatalf("cancel running = %q, %v", st, err)
		}
		// The item in flight still records its result; the next is refused.
		if ok, _ := r.FinishItem(ctxT(t), j.ID, policy.ReplayItem{DeadLetterID: "d1", Status: policy.ItemSent, ReplayID: "r"}); !ok {
			t.Fatal("in-flight result lost")
		}
		_, _, err := r.ClaimItem(ctxT(t), j.ID, "A", jobLease, 1, "d2")
		wantErr(t, err, policy.ErrJobCancelled)
		if err := r.Finish(ctxT(t), j.ID, "A", policy.JobCancelled, ""); err != nil {
			t.Fatal(err)
		}
		got, _ := r.Job(ctxT(t), j.ID)
		if got.State != policy.JobCancelled || got.Sent != 1 || got.CancelledBy != "viewer-ops" || got.Index != 1 {
			t.Fatalf("cancelled = %+v", got)
		}
		if st, _ := r.CancelJob(ctxT(t), j.ID, "ops"); st != policy.JobCancelled {
			t.Fatalf("cancel again = %q", st)
		}
		_, err = r.CancelJob(ctxT(t), "AAAAAAAAAAAAAAAAAAAAAA", "ops")
		wantErr(t, err, policy.ErrJobNotFound)
		_, err = r.Job(ctxT(t), "not a job id")
		wantErr(t, err, policy.ErrJobNotFound)
	})
}

func TestReplayJobLeaseTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(ReplayStoreOptions{})
		j := mustJob(t, r, "{}")
		mustAcquire(t, r, j.ID, "A")
		if _, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "", false, []string{"d1", "d2"}); err != nil {
			t.Fatal(err)
		}
		if err := r.StartSending(ctxT(t), j.ID, "A", jobLease); err != nil {
			t.Fatal(err)
		}
		mustClaimItem(t, r, j.ID, "A", 0, "d1") // A dies while sending d1
		e.clk.Advance(jobLease + time.Millisecond)
		got := mustAcquire(t, r, j.ID, "B")
		if got.Phase != policy.PhaseSend || got.Index != 1 || got.State != policy.JobRunning {
			t.Fatalf("taken over = %+v", got)
		}
		_, _, err := r.ClaimItem(ctxT(t), j.ID, "A", jobLease, 1, "d2")
		wantErr(t, err, policy.ErrJobLost)
		wantErr(t, r.Finish(ctxT(t), j.ID, "A", policy.JobCompleted, ""), policy.ErrJobLost)
		// B finds d1 still sending: it never claims it again.
		if ok, prev := mustClaimItem(t, r, j.ID, "B", 0, "d1"); ok || prev != policy.ItemSending {
			t.Fatalf("claim of the interrupted item = %v, %q", ok, prev)
		}
		if err := r.Release(ctxT(t), j.ID, "B"); err != nil {
			t.Fatal(err)
		}
		if got := mustAcquire(t, r, j.ID, "C"); got.Owner != "C" {
			t.Fatalf("after release = %+v", got)
		}
	})
}

func TestReplayJobItemCapAndDryRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(ReplayStoreOptions{MaxItems: 3})
		j := mustJob(t, r, "{}")
		mustAcquire(t, r, j.ID, "A")
		total, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "p1", true, []string{"a", "b", "a", "c", "d", "e"})
		wantErr(t, err, policy.ErrJobFull)
		if total != 3 {
			t.Fatalf("total = %d, want 3", total)
		}
		got, _ := r.Job(ctxT(t), j.ID)
		items, _ := r.Items(ctxT(t), j.ID, 1, 5)
		want := []policy.ReplayItem{{DeadLetterID: "b", Status: policy.ItemWouldSend}, {DeadLetterID: "c", Status: policy.ItemWouldSend}}
		if got.Total != 3 || got.Position != "" || !slices.Equal(items, want) {
			t.Fatalf("job %+v items %+v", got, items)
		}
	})
}

// deadLetter records a keyed callout of endpoint and makes it a dead
// letter (reason permanent) at the clock's time; it returns its request.
func deadLetter(t *testing.T, s *Store, endpoint, key string) (policy.NewCallout, string) {
	t.Helper()
	nc := req(endpoint, key, `{"n":1}`)
	if _, err := s.Enqueue(ctxT(t), nc, enqOpts); err != nil {
		t.Fatal(err)
	}
	c := mustClaim(t, s, endpoint, ClaimOptions{Batch: 1, Lease: testLease}).Claimed[0]
	comp := failure(time.Time{})
	comp.Action, comp.Reason = policy.ActionDeadLetter, policy.DeadLetterPermanent
	mustComplete(t, s, c, comp)
	return nc, c.ID
}

// TestReplayedDeadLetterKeepsHistory: a replay is a new chain (kind
// replay, fresh attempt count and window, the original key) that completes
// like any callout, while the dead letter it replays keeps its record and
// history until the dead-letter retention ends (contract §7, §8).
func TestReplayedDeadLetterKeepsHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		r := NewReplayStore(s, ReplayStoreOptions{})
		nc, dl := deadLetter(t, s, "hist-api", "key-7")
		e.clk.Advance(time.Hour)
		nc.ReplayOf = dl
		res, err := s.Enqueue(ctxT(t), nc, enqOpts)
		if err != nil || res.ID == "" {
			t.Fatalf("replay = %+v, %v", res, err)
		}
		if ok, err := r.MarkReplayed(ctxT(t), dl, res.ID); !ok || err != nil {
			t.Fatalf("mark = %v, %v", ok, err)
		}
		cl := mustClaim(t, s, "hist-api", claimOpts).Claimed[0]
		if cl.Kind != policy.KindReplay || cl.Attempt != 1 || !cl.FirstAttemptAt.Equal(t0.Add(time.Hour)) ||
			cl.ReplayOf != dl || cl.IdempotencyKey != "key-7" || string(cl.Body) != `{"n":1}` {
			t.Fatalf("replay claim = %+v", cl)
		}
		if out := mustComplete(t, s, cl, success()); out.State != policy.Succeeded || out.Attempts != 1 {
			t.Fatalf("replay completion = %+v", out)
		}
		chain := mustGet(t, s, res.ID)
		if chain.State != policy.Succeeded || len(chain.AttemptLog) != 1 || chain.AttemptLog[0].Kind != policy.KindReplay {
			t.Fatalf("chain = %+v", chain)
		}
		orig := mustGet(t, s, dl)
		if orig.State != policy.DeadLettered || len(orig.AttemptLog) != 1 || orig.DeadLetterReason != policy.DeadLetterPermanent {
			t.Fatalf("replayed dead letter = %+v", orig)
		}
		page, _ := s.DeadLetters(ctxT(t), policy.DeadLetterQuery{Endpoint: "hist-api"})
		if len(page.Items) != 1 || page.Items[0].ReplayedBy != res.ID || !page.Items[0].ReplayedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("listing = %+v", page.Items)
		}
		if m, _ := r.ReplayMarkOf(ctxT(t), dl); m.ReplayedBy != res.ID {
			t.Fatalf("mark = %+v", m)
		}
		if d := pttl(t, e, keysOf("hist-api").callout(dl)); d <= 30*day-time.Minute || d > 30*day {
			t.Fatalf("dead letter TTL after replay = %v, want the retention left", d)
		}
		if e.b.Mini == nil {
			return
		}
		e.b.Mini.FastForward(30*day - 2*time.Hour)
		if got := mustGet(t, s, dl); got.State != policy.DeadLettered {
			t.Fatalf("before the retention ends: %+v", got)
		}
		e.b.Mini.FastForward(2 * time.Hour)
		_, err = s.Get(ctxT(t), dl)
		wantErr(t, err, policy.ErrNotFound)
		e.clk.Advance(30 * day)
		if n, err := r.PruneDeadLetters(ctxT(t), "hist-api"); n != 1 || err != nil {
			t.Fatalf("prune = %d, %v", n, err)
		}
		if ok, _ := r.MarkReplayed(ctxT(t), dl, "x"); ok || e.b.Mini.Exists(keysOf("hist-api").callout(dl)) {
			t.Fatal("marking an expired dead letter recreated its record")
		}
	})
}

func TestMarkReplayedOnlyDeadLetters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		r := NewReplayStore(s, ReplayStoreOptions{})
		ids := mustEnqueue(t, s, "mark-api", 1)
		if ok, err := r.MarkReplayed(ctxT(t), ids[0], "x"); ok || err != nil {
			t.Fatalf("mark of a scheduled callout = %v, %v", ok, err)
		}
		_, err := r.MarkReplayed(ctxT(t), "bad", "x")
		wantErr(t, err, policy.ErrNotFound)
		if m, err := r.ReplayMarkOf(ctxT(t), ids[0]); m.ReplayedBy != "" || err != nil {
			t.Fatalf("mark = %+v, %v", m, err)
		}
	})
}

// A replay job's id never starts with '-' or '_', so a command line never
// reads it as a flag (calloutctl replay-jobs get ID).
func TestJobIDsNeverLookLikeFlags(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := NewReplayStore(e.store(), ReplayStoreOptions{})
		for i := range 200 {
			j, err := r.CreateJob(ctxT(t), `{}`, "ops")
			if err != nil {
				t.Fatal(err)
			}
			if j.ID[0] == '-' || j.ID[0] == '_' {
				t.Fatalf("job %d has id %q", i, j.ID)
			}
		}
	})
}
