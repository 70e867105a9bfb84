package jobs

import (
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/internal/storetest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// mustJob creates a job and fails the test on error.
func mustJob(t *testing.T, r *Store, spec string) policy.ReplayJob {
	t.Helper()
	j, err := r.CreateJob(ctxT(t), spec, "ops")
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return j
}

// mustAcquire acquires a job for owner and fails the test on error.
func mustAcquire(t *testing.T, r *Store, id, owner string) policy.ReplayJob {
	t.Helper()
	j, err := r.Acquire(ctxT(t), id, owner, jobLease)
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", id, owner, err)
	}
	return j
}

// mustSending acquires job id for owner, collects the dead letters dls
// and starts the job's send phase, failing on any error.
func mustSending(t *testing.T, r *Store, id, owner string, dls ...string) {
	t.Helper()
	mustAcquire(t, r, id, owner)
	if _, err := r.Collect(ctxT(t), id, owner, jobLease, "", dls); err != nil {
		t.Fatal(err)
	}
	if err := r.StartSending(ctxT(t), id, owner, jobLease); err != nil {
		t.Fatal(err)
	}
}

// mustClaimItem claims queue item index of a job and fails on error.
func mustClaimItem(t *testing.T, r *Store, id, owner string, index int, dl string) (bool, policy.ItemStatus) {
	t.Helper()
	ok, prev, err := r.ClaimItem(ctxT(t), id, owner, jobLease, index, dl)
	if err != nil {
		t.Fatalf("claim item %d (%s): %v", index, dl, err)
	}
	return ok, prev
}

func TestReplayJobLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(Options{})
		j := mustJob(t, r, `{"ids":["x"]}`)
		if j.State != policy.JobQueued || j.CreatedBy != "ops" || !j.CreatedAt.Equal(t0) || !validID(j.ID) {
			t.Fatalf("created = %+v", j)
		}
		if active, _ := r.ActiveJobs(ctxT(t)); !slices.Equal(active, []string{j.ID}) {
			t.Fatalf("active = %v", active)
		}
		e.Clk.Advance(time.Second)
		got := mustAcquire(t, r, j.ID, "A")
		if got.State != policy.JobRunning || got.Phase != policy.PhaseCollect || !got.StartedAt.Equal(t0.Add(time.Second)) ||
			got.Owner != "A" || got.Spec != `{"ids":["x"]}` {
			t.Fatalf("acquired = %+v", got)
		}
		_, err := r.Acquire(ctxT(t), j.ID, "B", jobLease)
		storetest.WantErr(t, err, policy.ErrJobBusy)

		// Overlapping batches: every dead letter is taken once.
		for _, batch := range [][]string{{"d1", "d2", "d3"}, {"d2", "d3", "d4"}, {"d1"}} {
			if _, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "pos-"+batch[0], batch); err != nil {
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
func wantFinished(t *testing.T, e *env, r *Store, id string) {
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
		if d := e.PTTL(t, key); d <= DefaultRetention-time.Minute || d > DefaultRetention {
			t.Fatalf("%s TTL = %v, want the job retention", key, d)
		}
	}
	if active, _ := r.ActiveJobs(ctxT(t)); len(active) != 0 {
		t.Fatalf("active after finish = %v", active)
	}
	_, err := r.Acquire(ctxT(t), id, "A", jobLease)
	storetest.WantErr(t, err, policy.ErrJobFinal)
	if list, _ := r.Jobs(ctxT(t), 10); len(list) != 1 || list[0].ID != id {
		t.Fatalf("jobs = %+v", list)
	}
}

func TestReplayJobCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(Options{})
		queued := mustJob(t, r, "{}")
		if st, err := r.CancelJob(ctxT(t), queued.ID, "ops"); err != nil || st != policy.JobCancelled {
			t.Fatalf("cancel queued = %q, %v", st, err)
		}
		j := mustJob(t, r, "{}")
		mustSending(t, r, j.ID, "A", "d1", "d2")
		mustClaimItem(t, r, j.ID, "A", 0, "d1")
		if st, err := r.CancelJob(ctxT(t), j.ID, "viewer-ops"); err != nil || st != policy.JobCancelling {
			t.Fatalf("cancel running = %q, %v", st, err)
		}
		// The item in flight still records its result; the next is refused.
		if ok, _ := r.FinishItem(ctxT(t), j.ID, policy.ReplayItem{DeadLetterID: "d1", Status: policy.ItemSent, ReplayID: "r"}); !ok {
			t.Fatal("in-flight result lost")
		}
		_, _, err := r.ClaimItem(ctxT(t), j.ID, "A", jobLease, 1, "d2")
		storetest.WantErr(t, err, policy.ErrJobCancelled)
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
		storetest.WantErr(t, err, policy.ErrJobNotFound)
		_, err = r.Job(ctxT(t), "not a job id")
		storetest.WantErr(t, err, policy.ErrJobNotFound)
	})
}

func TestReplayJobLeaseTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(Options{})
		j := mustJob(t, r, "{}")
		mustSending(t, r, j.ID, "A", "d1", "d2")
		mustClaimItem(t, r, j.ID, "A", 0, "d1") // A dies while sending d1
		e.Clk.Advance(jobLease + time.Millisecond)
		got := mustAcquire(t, r, j.ID, "B")
		if got.Phase != policy.PhaseSend || got.Index != 1 || got.State != policy.JobRunning {
			t.Fatalf("taken over = %+v", got)
		}
		_, _, err := r.ClaimItem(ctxT(t), j.ID, "A", jobLease, 1, "d2")
		storetest.WantErr(t, err, policy.ErrJobLost)
		storetest.WantErr(t, r.Finish(ctxT(t), j.ID, "A", policy.JobCompleted, ""), policy.ErrJobLost)
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

func TestReplayJobItemCap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(Options{MaxItems: 3})
		j := mustJob(t, r, "{}")
		mustAcquire(t, r, j.ID, "A")
		total, err := r.Collect(ctxT(t), j.ID, "A", jobLease, "p1", []string{"a", "b", "a", "c", "d", "e"})
		storetest.WantErr(t, err, policy.ErrJobFull)
		if total != 3 {
			t.Fatalf("total = %d, want 3", total)
		}
		got, _ := r.Job(ctxT(t), j.ID)
		items, _ := r.Items(ctxT(t), j.ID, 1, 5)
		want := []policy.ReplayItem{{DeadLetterID: "b", Status: policy.ItemQueued}, {DeadLetterID: "c", Status: policy.ItemQueued}}
		if got.Total != 3 || got.Position != "" || !slices.Equal(items, want) {
			t.Fatalf("job %+v items %+v", got, items)
		}
	})
}

// A replay job's id never starts with '-' or '_', so a command line never
// reads it as a flag (calloutctl replay-jobs get ID).
func TestJobIDsNeverLookLikeFlags(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		r := e.replays(Options{})
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
