package redisstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
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

// ReplayStore keeps replay jobs in Redis (keyspace: cp:job:{J}, its :items and
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

// Fields of a job hash cp:job:{J} (keyspace). Times are Unix ms.
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
	jWouldSend   = "ws"  // a dry run's items that the real run would send
	jSkipped     = "sk"  // items skipped (already replayed, gone)
	jRefused     = "rf"  // items refused (endpoint disabled or unknown, backlog full)
	jFailed      = "fl"  // items failed (store error, interrupted)
	jError       = "er"  // why the job failed
	jPosition    = "pos" // collect position (opaque)
	jIndex       = "i"   // send position
	jOwner       = "ow"  // lease holder's token
	jLeaseUntil  = "lx"  // lease expiry ms
)

// validJobID reports whether id is shaped like a job id: base64url (no
// padding) of 16 bytes.
func validJobID(id string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	return err == nil && len(b) == 16
}

// CreateJob records a new queued job with spec (opaque to the store) made
// by the admin token createdBy, indexes it (cp:jobs) and makes it visible
// to the runners (cp:jobs:active) once its record is written. Two round
// trips over up to three slots: not atomic; a failure after the record was written leaves a
// record no runner sees, which is deleted on the way out when possible.
// Errors: ErrUnavailable.
func (j *ReplayStore) CreateJob(ctx context.Context, spec, createdBy string) (policy.ReplayJob, error) {
	// A job id never starts with '-' (or '_'): calloutctl and shells take
	// `replay-jobs get -abc…` for a flag. One draw in 32 is drawn again.
	id, err := j.s.token()
	for err == nil && (id[0] == '-' || id[0] == '_') {
		id, err = j.s.token()
	}
	if err != nil {
		return policy.ReplayJob{}, err
	}
	now := msTime(j.s.now())
	k := keyspace.JobOf(id)
	// The job hash first, then the active set, in that order: on Redis
	// Cluster the keys live on different nodes and one pipeline runs them in
	// parallel, so a runner could list the id before its hash exists, find
	// no job and forget it for good.
	_, err = j.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.Hash, jSpec, spec, jState, string(policy.JobQueued), jBy, createdBy,
			jCreated, msArg(now), jUpdated, msArg(now))
		p.ZAdd(ctx, keyspace.Jobs, redis.Z{Score: float64(now.UnixMilli()), Member: id})
		return nil
	})
	if err == nil {
		err = j.s.rdb.SAdd(ctx, keyspace.JobsActive, id).Err()
	}
	if err != nil {
		_ = j.s.rdb.Del(context.WithoutCancel(ctx), k.Hash).Err()
		return policy.ReplayJob{}, j.s.wrap("create job", err)
	}
	return policy.ReplayJob{ID: id, Spec: spec, State: policy.JobQueued, CreatedBy: createdBy, CreatedAt: now, UpdatedAt: now}, nil
}

// Job reads a job. One round trip. Errors: ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) Job(ctx context.Context, id string) (policy.ReplayJob, error) {
	if !validJobID(id) {
		return policy.ReplayJob{}, fmt.Errorf("redisstore: job %q: %w", id, policy.ErrJobNotFound)
	}
	m, err := j.s.rdb.HGetAll(ctx, keyspace.JobOf(id).Hash).Result()
	if err != nil {
		return policy.ReplayJob{}, j.s.wrap("job", err)
	}
	if m[jState] == "" {
		return policy.ReplayJob{}, fmt.Errorf("redisstore: job %s: %w", id, policy.ErrJobNotFound)
	}
	return decodeJob(id, m), nil
}

// Jobs lists up to limit jobs (1–1000, default 100), newest first. Index
// entries of jobs that expired are dropped on the way. Two round trips.
// Errors: ErrUnavailable.
func (j *ReplayStore) Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := j.s.rdb.ZRevRange(ctx, keyspace.Jobs, 0, int64(min(limit, maxBatch)-1)).Result()
	if err != nil {
		return nil, j.s.wrap("jobs", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = j.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, keyspace.JobOf(id).Hash)
		}
		return nil
	})
	if err != nil {
		return nil, j.s.wrap("jobs", err)
	}
	out := make([]policy.ReplayJob, 0, len(ids))
	for i, cmd := range cmds {
		if m := cmd.Val(); m[jState] != "" {
			out = append(out, decodeJob(ids[i], m))
			continue
		}
		_ = j.s.rdb.ZRem(ctx, keyspace.Jobs, ids[i]).Err() // expired: forget it
	}
	return out, nil
}

// ActiveJobs returns the ids of jobs that have not ended (cp:jobs:active),
// unordered: what a runner looks at. An id may name a job that has just
// ended or expired; Acquire says so and Forget drops it.
// Errors: ErrUnavailable.
func (j *ReplayStore) ActiveJobs(ctx context.Context) ([]string, error) {
	ids, err := j.s.rdb.SMembers(ctx, keyspace.JobsActive).Result()
	return ids, j.s.wrap("active jobs", err)
}

// Forget drops id from the active set (after it ended or expired).
// Errors: ErrUnavailable.
func (j *ReplayStore) Forget(ctx context.Context, id string) error {
	return j.s.wrap("forget job", j.s.rdb.SRem(ctx, keyspace.JobsActive, id).Err())
}

// decodeJob turns a job hash into a Job.
func decodeJob(id string, m map[string]string) policy.ReplayJob {
	return policy.ReplayJob{
		ID: id, Spec: m[jSpec], State: policy.JobState(m[jState]), Phase: policy.JobPhase(m[jPhase]),
		CreatedBy: m[jBy], CreatedAt: fromMs(m[jCreated]), StartedAt: fromMs(m[jStarted]),
		FinishedAt: fromMs(m[jFinished]), UpdatedAt: fromMs(m[jUpdated]),
		CancelledBy: m[jCancelledBy], CancelledAt: fromMs(m[jCancelledAt]),
		Total: atoi(m[jTotal]), Sent: atoi(m[jSent]), WouldSend: atoi(m[jWouldSend]), Skipped: atoi(m[jSkipped]),
		Refused: atoi(m[jRefused]), Failed: atoi(m[jFailed]), Error: m[jError],
		Position: m[jPosition], Index: atoi(m[jIndex]), Owner: m[jOwner],
		LeaseExpiresAt: fromMs(m[jLeaseUntil]),
	}
}

// CancelJob asks job id to stop, on behalf of the admin token by (contract §8
// "cancel"). A job no replica works on (queued, or its lease expired) is
// cancelled at once; a running one becomes JobCancelling and its replica
// ends it JobCancelled before sending anything more. Cancelling a job that
// is cancelling or has ended changes nothing. It returns the job's state
// afterwards. Errors: ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) CancelJob(ctx context.Context, id, by string) (policy.JobState, error) {
	if !validJobID(id) {
		return "", fmt.Errorf("redisstore: cancel job %q: %w", id, policy.ErrJobNotFound)
	}
	v, err := j.s.run(ctx, "cancel job", j.lua.cancel, keyspace.JobOf(id).All(),
		msArg(j.s.now()), by, durMs(j.ttl))
	if err != nil {
		return "", err
	}
	st := policy.JobState(replyStr(v))
	switch {
	case st == "missing":
		return "", fmt.Errorf("redisstore: cancel job %s: %w", id, policy.ErrJobNotFound)
	case st == policy.JobCancelled:
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
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobNotFound)
	case "cancel":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobCancelled)
	case "lost":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobLost)
	case "busy":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobBusy)
	case "final":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobFinal)
	case "full":
		return fmt.Errorf("redisstore: %s %s: %w", op, id, policy.ErrJobFull)
	}
	return fmt.Errorf("redisstore: %s %s: unexpected reply %q", op, id, r)
}

// itoa formats an int for a script argument.
func itoa(n int) string { return strconv.Itoa(n) }
