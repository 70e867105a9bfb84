package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// Jobs is what the service needs of the replay-job store (contract §8
// "replay jobs"): a job's record, its queue of dead-letter ids with each
// item's state, and the lease of the one replica running it. Every step of
// a running job (Acquire, Collect, StartSending, ClaimItem, Finish) is
// fenced on owner's lease and renews it by lease; they fail with
// policy.ErrJobLost when another replica holds the job, and with
// policy.ErrJobCancelled once an admin asked to cancel it. Every method may
// fail with policy.ErrUnavailable. *jobs.Store (proxy/redisstore/jobs)
// implements it.
type Jobs interface {
	// CreateJob records a queued job of spec (opaque to the store) made by
	// the admin token createdBy.
	CreateJob(ctx context.Context, spec, createdBy string) (policy.ReplayJob, error)
	// Job reads job id; policy.ErrJobNotFound when there is none.
	Job(ctx context.Context, id string) (policy.ReplayJob, error)
	// Jobs lists up to limit jobs, newest first.
	Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error)
	// CancelJob asks job id to stop on behalf of by and returns its state
	// afterwards; policy.ErrJobNotFound when there is none.
	CancelJob(ctx context.Context, id, by string) (policy.JobState, error)
	// Items returns up to limit items of job id's queue from offset, in
	// collection order.
	Items(ctx context.Context, id string, offset, limit int) ([]policy.ReplayItem, error)
	// ActiveJobs returns the ids of the jobs that have not ended.
	ActiveJobs(ctx context.Context) ([]string, error)
	// Forget drops id from the active jobs (it ended or expired).
	Forget(ctx context.Context, id string) error
	// Acquire takes or renews owner's lease on job id and returns the job;
	// policy.ErrJobBusy while another replica's lease is live,
	// policy.ErrJobFinal once it ended, policy.ErrJobNotFound.
	Acquire(ctx context.Context, id, owner string, lease time.Duration) (policy.ReplayJob, error)
	// Collect adds dead-letter ids to job id's queue, each once per job,
	// and saves position (ReplayJob.Position). It returns the job's total;
	// policy.ErrJobFull past MaxItems.
	Collect(ctx context.Context, id, owner string, lease time.Duration, position string, ids []string) (int, error)
	// MaxItems is the most dead letters one job may hold.
	MaxItems() int
	// StartSending ends job id's collect phase; sending starts at the head
	// of its queue.
	StartSending(ctx context.Context, id, owner string, lease time.Duration) error
	// Queue returns up to n dead-letter ids of job id's queue from index
	// from.
	Queue(ctx context.Context, id string, from, n int) ([]string, error)
	// ClaimItem claims dead letter dl, the queue item at index, for
	// sending, at most once per job, and moves the send position past it;
	// unclaimed, prev is the item's state (policy.ItemSending: its replica
	// died while sending it).
	ClaimItem(ctx context.Context, id, owner string, lease time.Duration, index int,
		dl string) (claimed bool, prev policy.ItemStatus, err error)
	// FinishItem records a claimed item's result and counts it; false when
	// it was recorded already.
	FinishItem(ctx context.Context, id string, it policy.ReplayItem) (bool, error)
	// Finish ends job id in a final state (errText: why it failed).
	Finish(ctx context.Context, id, owner string, state policy.JobState, errText string) error
	// Release gives up owner's lease on job id, so another replica may take
	// it over at once.
	Release(ctx context.Context, id, owner string) error
}

// Spec is what a replay job replays (contract §8 "filtered ... and bulk"):
// every dead letter matching any of Filters, and every dead letter of IDs,
// each at most once however they overlap.
type Spec struct {
	Filters []Filter `json:"filters,omitempty"`
	IDs     []string `json:"ids,omitempty"`
	// DryRun collects what would be replayed and sends nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Rate is how many dead letters are replayed per second, at most
	// (0.1–1000; 0 means DefaultRate).
	Rate float64 `json:"rate,omitempty"`
}

// Limits of a Spec.
const (
	// DefaultRate is a job's rate when none is given, per second.
	DefaultRate = 10
	// MinRate and MaxRate bound a job's rate, per second.
	MinRate = 0.1
	MaxRate = 1000
	// MaxFilters bounds a job's filters; MaxIDs its ids.
	MaxFilters = 20
	MaxIDs     = 10_000
)

// Validate reports the first malformed part of sp: an *policy.Error, code
// ErrInvalid, its Field the filter concerned (filters[i]) when one is.
func (sp Spec) Validate() error {
	switch {
	case len(sp.Filters) == 0 && len(sp.IDs) == 0:
		return invalid("a replay job needs filters or ids")
	case len(sp.Filters) > MaxFilters:
		return invalid("at most %d filters", MaxFilters)
	case len(sp.IDs) > MaxIDs:
		return invalid("at most %d ids; use filters", MaxIDs)
	case sp.Rate != 0 && (math.IsNaN(sp.Rate) || sp.Rate < MinRate || sp.Rate > MaxRate):
		return invalid("rate %g is not %g–%d per second", sp.Rate, MinRate, MaxRate)
	}
	for i, f := range sp.Filters {
		if err := f.Validate(); err != nil {
			return inField(err, fmt.Sprintf("filters[%d]", i))
		}
	}
	for _, id := range sp.IDs {
		if _, ok := keyspace.ShardOfID(id); !ok {
			return invalid("%q is not a callout id", id)
		}
	}
	return nil
}

// interval is the pause between two sends at sp's rate.
func (sp Spec) interval() time.Duration {
	rate := sp.Rate
	if !(rate >= MinRate) { // zero, negative or NaN: an unreadable spec
		rate = DefaultRate
	}
	return time.Duration(float64(time.Second) / rate)
}

// SpecOf decodes the spec a replay job was created with (CreateJob
// encodes it into policy.ReplayJob.Spec, which the store does not read).
// Errors: the JSON decoder's, for a spec this package did not write; the
// Spec is then as far as it could be read, and the job can never run
// (RunJob ends it failed, its error UnreadableSpec).
func SpecOf(j policy.ReplayJob) (Spec, error) {
	var sp Spec
	err := json.Unmarshal([]byte(j.Spec), &sp)
	return sp, err
}

// UnreadableSpec is the error text of a job whose spec SpecOf cannot
// decode: what RunJob ends it with, and what a document of it shows.
const UnreadableSpec = "unreadable spec"

// CreateJob records a replay job of sp made by the admin token by and
// wakes this replica's runner. A filter without Until gets the creation
// time, so a job never picks up dead letters that arrive while it runs
// (its own failed replays among them); a zero Rate gets DefaultRate. The
// caller audit-logs it; SpecOf reads the spec back from the job.
// Errors: ErrInvalid, ErrNoSuchEndpoint, policy.ErrUnavailable.
func (s *Service) CreateJob(ctx context.Context, sp Spec, by string) (policy.ReplayJob, error) {
	if err := sp.Validate(); err != nil {
		return policy.ReplayJob{}, err
	}
	for _, f := range sp.Filters {
		if len(f.Endpoints) == 0 {
			continue
		}
		if _, err := s.endpoints(ctx, f.Endpoints); err != nil {
			return policy.ReplayJob{}, err
		}
	}
	now := s.o.Now()
	if sp.Rate == 0 {
		sp.Rate = DefaultRate
	}
	sp.Filters = append([]Filter(nil), sp.Filters...)
	for i := range sp.Filters {
		if sp.Filters[i].Until.IsZero() {
			sp.Filters[i].Until = now
			if sp.Filters[i].Since.After(now) {
				return policy.ReplayJob{}, inField(invalid("since (%s) is in the future: no dead letter can match",
					sp.Filters[i].Since.Format(time.RFC3339Nano)), fmt.Sprintf("filters[%d]", i))
			}
		}
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return policy.ReplayJob{}, err
	}
	r, err := s.o.Jobs.CreateJob(ctx, string(b), by)
	if err != nil {
		return policy.ReplayJob{}, err
	}
	s.Wake()
	return r, nil
}

// Job reads replay job id. Errors: policy.ErrJobNotFound,
// policy.ErrUnavailable.
func (s *Service) Job(ctx context.Context, id string) (policy.ReplayJob, error) {
	return s.o.Jobs.Job(ctx, id)
}

// Jobs lists up to limit replay jobs, newest first. Errors:
// policy.ErrUnavailable.
func (s *Service) Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error) {
	return s.o.Jobs.Jobs(ctx, limit)
}

// CancelJob asks replay job id to stop on behalf of by and returns it as
// it is then: cancelled at once when no replica works on it, else
// cancelling until its replica stops, before its next send (poll Job). A
// job that ended is returned unchanged. The caller audit-logs it. Errors:
// policy.ErrJobNotFound, policy.ErrUnavailable.
func (s *Service) CancelJob(ctx context.Context, id, by string) (policy.ReplayJob, error) {
	if _, err := s.o.Jobs.CancelJob(ctx, id, by); err != nil {
		return policy.ReplayJob{}, err
	}
	return s.Job(ctx, id)
}

// Item is one dead letter of a replay job: its state or result and, while
// the dead letter is kept, its summary.
type Item struct {
	policy.ReplayItem
	// DeadLetter is the dead letter's summary; nil when it expired or was
	// discarded.
	DeadLetter *policy.DeadLetter
}

// ItemPage is one page of a job's items, in collection order.
type ItemPage struct {
	Items []Item
	// Next is the offset of the following page; 0 when this is the last.
	Next int
}

// JobItems returns up to limit (1–1000, default 100) items of job id from
// offset on. An item still sending in a job that ended was interrupted
// (its replica died; whether it was sent is unknown): it is reported
// failed, "interrupted"; one still queued in a cancelled or failed job is
// reported skipped, "not_sent". Errors: policy.ErrJobNotFound,
// policy.ErrUnavailable.
func (s *Service) JobItems(ctx context.Context, id string, offset, limit int) (ItemPage, error) {
	j, err := s.o.Jobs.Job(ctx, id)
	if err != nil {
		return ItemPage{}, err
	}
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	its, err := s.o.Jobs.Items(ctx, id, offset, limit)
	if err != nil {
		return ItemPage{}, err
	}
	ids := make([]string, len(its))
	for i, it := range its {
		ids[i] = it.DeadLetterID
	}
	sums, err := s.o.DeadLetters.Summaries(ctx, ids)
	if err != nil {
		return ItemPage{}, err
	}
	page := ItemPage{Items: make([]Item, len(its))}
	for i, it := range its {
		it = settled(it, j.State)
		if it.Status == policy.ItemWouldSend && sums[i] == nil {
			it.Status, it.Detail = policy.ItemSkipped, "not_found" // a dry run would skip it
		}
		page.Items[i] = Item{ReplayItem: it, DeadLetter: sums[i]}
	}
	if len(its) == limit && offset+limit < j.Total {
		page.Next = offset + limit
	}
	return page, nil
}

// settled reports an item of a job that ended as what became of it.
func settled(it policy.ReplayItem, st policy.JobState) policy.ReplayItem {
	if !st.Final() {
		return it
	}
	switch it.Status {
	case policy.ItemSending:
		it.Status, it.Detail = policy.ItemFailed, "interrupted"
	case policy.ItemQueued:
		it.Status, it.Detail = policy.ItemSkipped, "not_sent"
	}
	return it
}
