package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
)

// Wake makes Run look for jobs now (after a job was created here). It
// never blocks.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run runs replay jobs until ctx ends. Every PollEvery, and at once after
// Wake, it looks at the jobs that have not ended and starts each whose
// lease it can take, up to MaxJobs at a time in this replica; a job whose
// replica died is taken over when that replica's lease expires, and goes
// on where it stopped. Every SweepEvery one replica (lock
// "dead-letter-retention") prunes the dead-letter indexes. On return every
// job lease this replica held has been released, so another replica takes
// its jobs over at once.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		case <-s.wake:
		}
		s.poll(ctx, &wg)
		s.sweep(ctx)
		t.Reset(s.o.PollEvery)
	}
}

// poll starts the active jobs this replica is not running yet.
func (s *Service) poll(ctx context.Context, wg *sync.WaitGroup) {
	ids, err := s.o.Jobs.ActiveJobs(ctx)
	if err != nil {
		s.o.Logger.Warn("replay: listing jobs failed", slog.Any("error", err))
		return
	}
	for _, id := range ids {
		s.mu.Lock()
		start := !s.running[id] && len(s.running) < s.o.MaxJobs
		if start {
			s.running[id] = true
		}
		s.mu.Unlock()
		if !start {
			continue
		}
		wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.running, id)
				s.mu.Unlock()
			}()
			s.RunJob(ctx, id)
		})
	}
}

// baseLease is a job lease without pauses; a slow rate adds three pauses.
const baseLease = 30 * time.Second

// jobRun is one job being run by this replica.
type jobRun struct {
	s     *Service
	id    string
	by    string
	spec  Spec
	lease time.Duration
}

// RunJob runs job id in this replica if it can take the job's lease, until
// the job ends, ctx ends or the lease is lost; then it releases the lease.
// Run calls it for every active job; it is exported for tests that drive
// one job step by step.
func (s *Service) RunJob(ctx context.Context, id string) {
	rec, err := s.o.Jobs.Acquire(ctx, id, s.o.Owner, baseLease)
	switch {
	case errors.Is(err, policy.ErrJobFinal) || errors.Is(err, policy.ErrJobNotFound):
		_ = s.o.Jobs.Forget(ctx, id)
		return
	case errors.Is(err, policy.ErrJobBusy):
		return
	case err != nil:
		s.o.Logger.Warn("replay: taking a job failed", slog.String("job_id", id), slog.Any("error", err))
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.o.Jobs.Release(rctx, id, s.o.Owner)
	}()
	sp, spErr := SpecOf(rec)
	r := &jobRun{s: s, id: id, by: rec.CreatedBy, spec: sp, lease: baseLease + 3*sp.interval()}
	switch {
	case rec.Error != "":
		err = fmt.Errorf("%w: %s", errUnrunnable, rec.Error)
	case spErr != nil:
		err = fmt.Errorf("%w: %s", errUnrunnable, UnreadableSpec)
	case rec.State == policy.JobCancelling:
		err = policy.ErrJobCancelled
	default:
		err = r.run(ctx, rec)
	}
	r.end(ctx, err)
}

// errUnrunnable marks a job that can never run (its spec is unreadable).
var errUnrunnable = errors.New("replay: job cannot run")

// run collects (when not done yet) and sends. A dry run goes through the
// same queue with the same claims, and asks Preview instead of Replay, so
// each item's would-be result comes from the rules the real run applies.
func (r *jobRun) run(ctx context.Context, rec policy.ReplayJob) error {
	if rec.Phase != policy.PhaseSend {
		if err := r.collect(ctx, rec.Position); err != nil {
			return err
		}
		if err := r.s.o.Jobs.StartSending(ctx, r.id, r.s.o.Owner, r.lease); err != nil {
			return err
		}
		rec.Index = 0
	}
	return r.send(ctx, rec.Index)
}

// end ends the job as err says: completed (nil), cancelled, failed (cap
// reached, unrunnable); a lost lease or a transient error leaves it to the
// next poll (of this or another replica).
func (r *jobRun) end(ctx context.Context, err error) {
	state, why := policy.JobCompleted, ""
	switch {
	case err == nil:
	case errors.Is(err, policy.ErrJobCancelled):
		state = policy.JobCancelled
	case errors.Is(err, policy.ErrJobFull):
		state = policy.JobFailed
		why = fmt.Sprintf("more than %d dead letters match; narrow the filters", r.s.o.Jobs.MaxItems())
	case errors.Is(err, errUnrunnable):
		state, why = policy.JobFailed, err.Error()
	case errors.Is(err, policy.ErrJobLost):
		return
	case errors.Is(err, ErrInvalid):
		// A spec the listing refuses (written by an older version, or
		// outside CreateJob) can never run: retrying would log forever.
		state, why = policy.JobFailed, err.Error()
	default:
		if ctx.Err() == nil {
			r.s.o.Logger.Warn("replay: job interrupted; it resumes at the next poll",
				slog.String("job_id", r.id), slog.Any("error", err))
		}
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.s.o.Jobs.Finish(fctx, r.id, r.s.o.Owner, state, why); err != nil {
		r.s.o.Logger.Warn("replay: ending a job failed", slog.String("job_id", r.id), slog.Any("error", err))
		return
	}
	r.s.o.Logger.Info("replay job ended", slog.String("job_id", r.id), slog.String("state", string(state)),
		slog.String("token", r.by))
}

// position is where collection got to: filter F at listing cursor C, then
// (F == len(filters)) the ids from index I.
type position struct {
	F int    `json:"f"`
	C string `json:"c,omitempty"`
	I int    `json:"i,omitempty"`
}

func (p position) encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// collectBatch is how many dead letters one collect step reads and adds.
const collectBatch = 1000

// collect adds every matching dead letter to the job's queue, resuming at
// pos (Job.Position; "" from the start). Each step saves its position with
// its ids, atomically, so a replica taking the job over goes on from there.
func (r *jobRun) collect(ctx context.Context, pos string) error {
	var p position
	if pos != "" {
		if err := json.Unmarshal([]byte(pos), &p); err != nil {
			return fmt.Errorf("%w: collect position %q", errUnrunnable, pos)
		}
	}
	for ; p.F < len(r.spec.Filters); p.F, p.C = p.F+1, "" {
		for {
			page, err := r.s.DeadLetters(ctx, Query{Filter: r.spec.Filters[p.F], Cursor: p.C, Limit: collectBatch})
			if err != nil {
				return err
			}
			next := position{F: p.F, C: page.Next}
			if page.Next == "" {
				next = position{F: p.F + 1}
			}
			ids := make([]string, len(page.Items))
			for i, d := range page.Items {
				ids[i] = d.ID
			}
			if _, err := r.s.o.Jobs.Collect(ctx, r.id, r.s.o.Owner, r.lease, next.encode(), ids); err != nil {
				return err
			}
			if p.C = page.Next; p.C == "" {
				break
			}
		}
	}
	for p.I < len(r.spec.IDs) {
		end := min(p.I+collectBatch, len(r.spec.IDs))
		next := position{F: p.F, I: end}
		if _, err := r.s.o.Jobs.Collect(ctx, r.id, r.s.o.Owner, r.lease, next.encode(),
			r.spec.IDs[p.I:end]); err != nil {
			return err
		}
		p.I = end
	}
	return nil
}

// sendBatch is how many queue entries one read returns.
const sendBatch = 100

// send replays the queue from index on, one dead letter per interval of
// the job's rate (the injected clock and sleeper pace it); a dry run, which
// sends nothing, is not paced.
func (r *jobRun) send(ctx context.Context, index int) error {
	interval := r.spec.interval()
	next := r.s.o.Now()
	for {
		ids, err := r.s.o.Jobs.Queue(ctx, r.id, index, sendBatch)
		if err != nil || len(ids) == 0 {
			return err
		}
		for _, dl := range ids {
			if !r.spec.DryRun {
				if err := r.pace(ctx, &next, interval); err != nil {
					return err
				}
			}
			claimed, prev, err := r.s.o.Jobs.ClaimItem(ctx, r.id, r.s.o.Owner, r.lease, index, dl)
			if err != nil {
				return err
			}
			index++
			switch {
			case claimed:
				r.replayItem(ctx, dl)
			case prev == policy.ItemSending:
				r.record(ctx, policy.ReplayItem{DeadLetterID: dl, Status: policy.ItemFailed, Detail: "interrupted"})
			}
		}
	}
}

// pace waits until *next, the time of the next send, and moves it one
// interval on. A run that fell more than one interval behind (slow Redis)
// starts afresh from now instead of bursting to catch up.
func (r *jobRun) pace(ctx context.Context, next *time.Time, interval time.Duration) error {
	now := r.s.o.Now()
	if next.Before(now.Add(-interval)) {
		*next = now
	}
	if d := next.Sub(now); d > 0 {
		if err := r.s.o.Sleep(ctx, d); err != nil {
			return err
		}
	}
	*next = next.Add(interval)
	return nil
}

// itemTimeout bounds the replay and record of one claimed item, which go
// on even when the runner is stopping, so a claimed item always gets its
// result.
const itemTimeout = 10 * time.Second

// replayItem replays one claimed dead letter (a dry run previews it) and
// records what happened.
func (r *jobRun) replayItem(ctx context.Context, dl string) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), itemTimeout)
	defer cancel()
	var res Result
	var err error
	if r.spec.DryRun {
		res, err = r.s.Preview(ictx, dl)
	} else {
		res, err = r.s.Replay(ictx, dl, r.by, r.id)
	}
	r.record(logx.WithTraceContext(ictx, res.TraceContext), ItemOf(dl, res, err, r.spec.DryRun))
}

// ItemOf is the job item a replay (or, with dry, a Preview) of dead letter
// dl came to: sent (would_send), or skipped, refused or failed with the
// reason's code in Detail. A skip is the end state the caller wanted —
// already_replayed (a chain that has not dead-lettered holds the key),
// superseded (a newer dead letter holds it: replay that one), not_found
// (discarded or expired); a refusal (endpoint_disabled, unknown_endpoint,
// backlog_full) or failure (store_unavailable, error) means a dead letter
// that should have been sent was not.
func ItemOf(dl string, res Result, err error, dry bool) policy.ReplayItem {
	it := policy.ReplayItem{DeadLetterID: dl, ReplayID: res.ReplayID}
	switch {
	case err == nil && res.Created && dry:
		it.Status = policy.ItemWouldSend
		if res.State == policy.Held {
			it.Detail = "held"
		}
	case err == nil && res.Created:
		it.Status = policy.ItemSent
		if res.State == policy.Held {
			it.Detail = "held"
		}
	case err == nil:
		it.Status, it.Detail = policy.ItemSkipped, "already_replayed"
	case errors.Is(err, ErrNotDeadLetter) || errors.Is(err, ErrSuperseded):
		it.Status, it.Detail = policy.ItemSkipped, refusal(err)
	case errors.Is(err, ErrEndpointDisabled) || errors.Is(err, ErrUnknownEndpoint) || errors.Is(err, ErrBacklogFull):
		it.Status, it.Detail = policy.ItemRefused, refusal(err)
	default:
		it.Status, it.Detail = policy.ItemFailed, refusal(err)
	}
	return it
}

// record stores an item's result; a failure is logged (the item then shows
// as interrupted once the job ends), with the dead letter's callout_id and
// the trace_id ctx carries (logx.WithTraceContext: its caller's).
func (r *jobRun) record(ctx context.Context, it policy.ReplayItem) {
	if _, err := r.s.o.Jobs.FinishItem(ctx, r.id, it); err != nil {
		r.s.o.Logger.LogAttrs(logx.WithCallout(ctx, it.DeadLetterID), slog.LevelWarn,
			"replay: recording an item failed", slog.String("job_id", r.id), slog.Any("error", err))
	}
}

// sweep prunes every known endpoint's dead-letter index of entries past
// the retention (Store.PruneDeadLetters), at most every SweepEvery,
// in one replica at a time.
func (s *Service) sweep(ctx context.Context) {
	now := s.o.Now()
	if !s.swept.IsZero() && now.Sub(s.swept) < s.o.SweepEvery {
		return
	}
	s.swept = now
	held, err := s.o.Store.TryLock(ctx, "dead-letter-retention", s.o.Owner, s.o.SweepEvery)
	if err != nil || !held {
		return
	}
	eps, err := s.endpoints(ctx, nil)
	if err != nil {
		return
	}
	var pruned int64
	for _, ep := range eps {
		n, err := s.o.Store.PruneDeadLetters(ctx, ep)
		if err != nil {
			s.o.Logger.Warn("replay: pruning dead letters failed", slog.String("endpoint", ep), slog.Any("error", err))
			continue
		}
		pruned += n
	}
	if pruned > 0 {
		s.o.Logger.Info("expired dead letters pruned from the index", slog.Int64("entries", pruned))
	}
}
