package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors of the replay-job store. Test with errors.Is.
var (
	// ErrJobNotFound: no replay job with that id (or a malformed id, or one
	// whose record expired after the job retention).
	ErrJobNotFound = errors.New("redisstore: replay job not found")
	// ErrJobCancelled: an admin asked to cancel the job; the caller must
	// stop and end it with Finish(JobCancelled). Nothing was changed.
	ErrJobCancelled = errors.New("redisstore: replay job cancel requested")
	// ErrJobLost: the caller no longer holds the job's lease (another
	// replica took it over after the lease expired, or the job ended); the
	// caller must stop working on it. Nothing was changed.
	ErrJobLost = errors.New("redisstore: replay job lease lost")
	// ErrJobBusy: another replica holds a live lease on the job.
	ErrJobBusy = errors.New("redisstore: replay job held by another replica")
	// ErrJobFinal: the job has ended (completed, cancelled or failed).
	ErrJobFinal = errors.New("redisstore: replay job has ended")
	// ErrJobFull: the job already holds ReplayStoreOptions.MaxItems dead letters.
	ErrJobFull = errors.New("redisstore: replay job item cap reached")
)

// JobState is a replay job's state (SPEC §8 "replay jobs").
type JobState string

// The replay-job states.
const (
	// JobQueued: created; no replica has started it yet.
	JobQueued JobState = "queued"
	// JobRunning: a replica is collecting or sending its dead letters.
	JobRunning JobState = "running"
	// JobCancelling: an admin asked to cancel it; its replica stops before
	// its next item.
	JobCancelling JobState = "cancelling"
	// JobCancelled: stopped by an admin part-way (or before it started).
	JobCancelled JobState = "cancelled"
	// JobCompleted: every collected dead letter was handled (for a dry
	// run: collected, nothing sent).
	JobCompleted JobState = "completed"
	// JobFailed: stopped by an error that retrying cannot fix (Job.Error
	// says which, e.g. more dead letters match than a job may hold).
	JobFailed JobState = "failed"
)

// Final reports whether the state is final.
func (s JobState) Final() bool { return s == JobCancelled || s == JobCompleted || s == JobFailed }

// JobPhase is what a running job is doing.
type JobPhase string

// The phases of a running job: first every matching dead letter is
// collected into the job's queue (so its total is known before anything is
// sent, and a dry run stops there), then the queue is sent in order.
const (
	PhaseCollect JobPhase = "collect"
	PhaseSend    JobPhase = "send"
)

// ReplayStoreOptions configures a ReplayStore. The zero value works.
type ReplayStoreOptions struct {
	// Retention is how long a job that ended stays readable (its record,
	// items and queue). Default 7 days.
	Retention time.Duration
	// MaxItems is the most dead letters one job may hold; a job whose
	// filters match more fails (ErrJobFull). Default 100,000.
	MaxItems int
}

// DefaultJobRetention and DefaultJobMaxItems are ReplayStoreOptions' defaults.
const (
	DefaultJobRetention = 7 * 24 * time.Hour
	DefaultJobMaxItems  = 100_000
)

// ReplayStore keeps replay jobs in Redis (keys.go: cp:job:{J}, its :items and
// :queue, cp:jobs, cp:jobs:active) so that a job survives the replica that
// runs it and runs in one replica at a time (a lease in the job's hash,
// fencing every step). It is safe for concurrent use.
type ReplayStore struct {
	s        *Store
	lua      jobScripts
	ttl      time.Duration
	maxItems int
}

// NewReplayStore returns the replay-job store on s's Redis, clock and random
// source, filling o's defaults.
func NewReplayStore(s *Store, o ReplayStoreOptions) *ReplayStore {
	lua, err := loadJobScripts()
	if err != nil {
		panic(err) // the scripts are embedded: a build defect, not a runtime condition
	}
	if o.Retention <= 0 {
		o.Retention = DefaultJobRetention
	}
	if o.MaxItems <= 0 {
		o.MaxItems = DefaultJobMaxItems
	}
	return &ReplayStore{s: s, lua: lua, ttl: o.Retention, maxItems: o.MaxItems}
}

// MaxItems is the most dead letters one job may hold.
func (j *ReplayStore) MaxItems() int { return j.maxItems }

// Job is a replay job as stored. Counters count items: Total collected,
// then each handled item is exactly one of Sent, Skipped, Refused, Failed.
type Job struct {
	ID string
	// Spec is what to replay, as its creator encoded it (the replay
	// package's JSON); the store does not read it.
	Spec      string
	State     JobState
	Phase     JobPhase
	CreatedBy string
	CreatedAt time.Time
	// StartedAt is when a replica first took it; zero while queued.
	StartedAt time.Time
	// FinishedAt is when it ended; zero until then.
	FinishedAt time.Time
	// UpdatedAt is its last change (progress included).
	UpdatedAt   time.Time
	CancelledBy string
	CancelledAt time.Time
	Total       int
	Sent        int
	Skipped     int
	Refused     int
	Failed      int
	// Error says why a job failed.
	Error string
	// Position is where collection got to (opaque, the collector's).
	Position string
	// Index is the send position: the queue index of the next item.
	Index int
	// Owner is the token of the replica holding its lease ("" when none),
	// until LeaseExpiresAt.
	Owner          string
	LeaseExpiresAt time.Time
}

// Fields of a job hash cp:job:{J} (keys.go). Times are Unix ms.
const (
	jSpec        = "sp"  // spec (opaque)
	jState       = "s"   // JobState
	jPhase       = "ph"  // JobPhase while running
	jBy          = "by"  // creator (admin token name)
	jCreated     = "ct"  // created ms
	jStarted     = "sa"  // first taken ms
	jFinished    = "ft"  // ended ms
	jUpdated     = "ut"  // last change ms
	jCancelledBy = "cb"  // who asked to cancel
	jCancelledAt = "ca"  // when
	jTotal       = "tot" // items collected
	jSent        = "sn"  // items sent (a new replay chain)
	jSkipped     = "sk"  // items skipped (already replayed, gone)
	jRefused     = "rf"  // items refused (endpoint disabled or unknown, backlog full)
	jFailed      = "fl"  // items failed (store error, interrupted)
	jError       = "er"  // why the job failed
	jPosition    = "pos" // collect position (opaque)
	jIndex       = "i"   // send position
	jOwner       = "ow"  // lease holder's token
	jLeaseUntil  = "lx"  // lease expiry ms
)

// jobKeys are the three keys of one job, in the order the scripts take them.
type jobKeys struct{ job, items, queue string }

func keysOfJob(id string) jobKeys {
	j := keyPrefix + "job:{" + id + "}"
	return jobKeys{job: j, items: j + ":items", queue: j + ":queue"}
}

func (k jobKeys) all() []string { return []string{k.job, k.items, k.queue} }

// The job index keys (keys.go); neither is hash-tagged.
const (
	jobsKey       = keyPrefix + "jobs"
	activeJobsKey = keyPrefix + "jobs:active"
)

// validJobID reports whether id is shaped like a job id: base64url (no
// padding) of 16 bytes.
func validJobID(id string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	return err == nil && len(b) == 16
}

// CreateJob records a new queued job with spec (opaque to the store) made
// by the admin token createdBy, indexes it (cp:jobs) and makes it visible
// to the runners (cp:jobs:active). One pipelined round trip over up to
// three slots: not atomic; a failure after the record was written leaves a
// record no runner sees, which is deleted on the way out when possible.
// Errors: ErrUnavailable.
func (j *ReplayStore) CreateJob(ctx context.Context, spec, createdBy string) (Job, error) {
	id, err := j.s.token()
	if err != nil {
		return Job{}, err
	}
	now := msTime(j.s.now())
	k := keysOfJob(id)
	_, err = j.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.job, jSpec, spec, jState, string(JobQueued), jBy, createdBy,
			jCreated, msArg(now), jUpdated, msArg(now))
		p.ZAdd(ctx, jobsKey, redis.Z{Score: float64(now.UnixMilli()), Member: id})
		p.SAdd(ctx, activeJobsKey, id)
		return nil
	})
	if err != nil {
		_ = j.s.rdb.Del(context.WithoutCancel(ctx), k.job).Err()
		return Job{}, j.s.wrap("create job", err)
	}
	return Job{ID: id, Spec: spec, State: JobQueued, CreatedBy: createdBy, CreatedAt: now, UpdatedAt: now}, nil
}

// Job reads a job. One round trip. Errors: ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) Job(ctx context.Context, id string) (Job, error) {
	if !validJobID(id) {
		return Job{}, fmt.Errorf("redisstore: job %q: %w", id, ErrJobNotFound)
	}
	m, err := j.s.rdb.HGetAll(ctx, keysOfJob(id).job).Result()
	if err != nil {
		return Job{}, j.s.wrap("job", err)
	}
	if m[jState] == "" {
		return Job{}, fmt.Errorf("redisstore: job %s: %w", id, ErrJobNotFound)
	}
	return decodeJob(id, m), nil
}

// Jobs lists up to limit jobs (1–1000, default 100), newest first. Index
// entries of jobs that expired are dropped on the way. Two round trips.
// Errors: ErrUnavailable.
func (j *ReplayStore) Jobs(ctx context.Context, limit int) ([]Job, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := j.s.rdb.ZRevRange(ctx, jobsKey, 0, int64(min(limit, maxBatch)-1)).Result()
	if err != nil {
		return nil, j.s.wrap("jobs", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = j.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, keysOfJob(id).job)
		}
		return nil
	})
	if err != nil {
		return nil, j.s.wrap("jobs", err)
	}
	out := make([]Job, 0, len(ids))
	for i, cmd := range cmds {
		if m := cmd.Val(); m[jState] != "" {
			out = append(out, decodeJob(ids[i], m))
			continue
		}
		_ = j.s.rdb.ZRem(ctx, jobsKey, ids[i]).Err() // expired: forget it
	}
	return out, nil
}

// ActiveJobs returns the ids of jobs that have not ended (cp:jobs:active),
// unordered: what a runner looks at. An id may name a job that has just
// ended or expired; Acquire says so and Forget drops it.
// Errors: ErrUnavailable.
func (j *ReplayStore) ActiveJobs(ctx context.Context) ([]string, error) {
	ids, err := j.s.rdb.SMembers(ctx, activeJobsKey).Result()
	return ids, j.s.wrap("active jobs", err)
}

// Forget drops id from the active set (after it ended or expired).
// Errors: ErrUnavailable.
func (j *ReplayStore) Forget(ctx context.Context, id string) error {
	return j.s.wrap("forget job", j.s.rdb.SRem(ctx, activeJobsKey, id).Err())
}

// decodeJob turns a job hash into a Job.
func decodeJob(id string, m map[string]string) Job {
	return Job{
		ID: id, Spec: m[jSpec], State: JobState(m[jState]), Phase: JobPhase(m[jPhase]),
		CreatedBy: m[jBy], CreatedAt: fromMs(m[jCreated]), StartedAt: fromMs(m[jStarted]),
		FinishedAt: fromMs(m[jFinished]), UpdatedAt: fromMs(m[jUpdated]),
		CancelledBy: m[jCancelledBy], CancelledAt: fromMs(m[jCancelledAt]),
		Total: atoi(m[jTotal]), Sent: atoi(m[jSent]), Skipped: atoi(m[jSkipped]),
		Refused: atoi(m[jRefused]), Failed: atoi(m[jFailed]), Error: m[jError],
		Position: m[jPosition], Index: atoi(m[jIndex]), Owner: m[jOwner],
		LeaseExpiresAt: fromMs(m[jLeaseUntil]),
	}
}

// CancelJob asks job id to stop, on behalf of the admin token by (SPEC §8
// "cancel"). A job no replica works on (queued, or its lease expired) is
// cancelled at once; a running one becomes JobCancelling and its replica
// ends it JobCancelled before sending anything more. Cancelling a job that
// is cancelling or has ended changes nothing. It returns the job's state
// afterwards. Errors: ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) CancelJob(ctx context.Context, id, by string) (JobState, error) {
	if !validJobID(id) {
		return "", fmt.Errorf("redisstore: cancel job %q: %w", id, ErrJobNotFound)
	}
	v, err := j.s.run(ctx, "cancel job", j.lua.cancel, keysOfJob(id).all(),
		msArg(j.s.now()), by, durMs(j.ttl))
	if err != nil {
		return "", err
	}
	st := JobState(replyStr(v))
	switch {
	case st == "missing":
		return "", fmt.Errorf("redisstore: cancel job %s: %w", id, ErrJobNotFound)
	case st == JobCancelled:
		_ = j.Forget(ctx, id)
	}
	return st, nil
}

// jobRefusal turns a job script's refusal into its error; nil for "ok".
func jobRefusal(op, id, r string) error {
	switch r {
	case "ok":
		return nil
	case "missing":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobNotFound)
	case "cancel":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobCancelled)
	case "lost":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobLost)
	case "busy":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobBusy)
	case "final":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobFinal)
	case "full":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, ErrJobFull)
	}
	return fmt.Errorf("redisstore: %s %s: unexpected reply %q", op, id, r)
}

// itoa formats an int for a script argument.
func itoa(n int) string { return strconv.Itoa(n) }
