// Package jobs keeps replay jobs in Redis (contract §8 "filtered ... and
// bulk" replays): a job's record, the dead letters it collected and the
// lease of the one replica running it, so that a job survives the replica
// that runs it and runs in one replica at a time. Its keys are keyspace's
// cp:job:{J}, cp:job:{J}:items, cp:job:{J}:queue, cp:jobs and
// cp:jobs:active (proxy/redisstore/keyspace documents each).
//
// The package stores the domain's types (policy.ReplayJob, ReplayItem,
// JobState, ItemStatus) and knows nothing of callouts or dead letters
// beyond their ids: what a job replays, and how, is proxy/replay's. It
// imports no other store package but the script layer and the keyspace;
// its scripts (lua/*.lua, embedded) each have one Go type for their
// arguments and one for their reply (scripts.go, proxy/redisstore/script).
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/record"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/script"
	"github.com/redis/go-redis/v9"
)

// Options configures a Store. The zero value works.
type Options struct {
	// Now is this replica's clock: it stamps a job's creation (CreateJob
	// writes keys of three slots, outside any script). Every other instant
	// of a job — its lease, start, progress and end — is Redis's clock,
	// read inside its scripts (ARCHITECTURE.md "One clock"); the
	// composition root passes its Redis-corrected clock, so the two agree.
	// Default time.Now.
	Now func() time.Time
	// PinScriptTime, for tests that travel in time only, makes every
	// script take Now() as its now instead of reading TIME. Never set in
	// production: a pinned clock is the skew that makes two replicas
	// disagree about a lease (contract §1).
	PinScriptTime bool
	// Rand is the source of job ids (16 bytes each). It need not be safe
	// for concurrent use. Default crypto/rand.Reader.
	Rand io.Reader
	// Retention is how long a job that ended stays readable (its record,
	// items and queue). Default DefaultRetention.
	Retention time.Duration
	// MaxItems is the most dead letters one job may hold; a job whose
	// filters match more fails (policy.ErrJobFull). Default
	// DefaultMaxItems.
	MaxItems int
	// Scripts is the script layer of the client (the store's
	// redisstore.Store.Scripts, made by script.Attach): the package's
	// scripts join its one function library. nil: a script.Functions of
	// the package's own on the client (a library of its own).
	Scripts *script.Functions
}

// DefaultRetention and DefaultMaxItems are Options' defaults: 7 days, and
// 100,000 dead letters a job.
const (
	DefaultRetention = 7 * 24 * time.Hour
	DefaultMaxItems  = 100_000
)

// maxList bounds one listing (Jobs, Items).
const maxList = 1000

// Store is the replay-job store on one Redis (a *redis.Client or a
// *redis.ClusterClient: a job's three keys share its hash tag). Every step
// of a running job is fenced on the lease in the job's hash, which it
// renews. It is safe for concurrent use.
type Store struct {
	rdb      redis.UniversalClient
	now      func() time.Time
	randMu   sync.Mutex
	rand     io.Reader
	lua      scripts
	ttl      time.Duration
	maxItems int
	pin      bool // Options.PinScriptTime
}

// New returns the replay-job store on client, filling o's defaults. It does
// not contact Redis.
func New(client redis.UniversalClient, o Options) *Store {
	if o.Scripts == nil {
		o.Scripts = script.Attach(client, nil)
	}
	lua, err := loadScripts(o.Scripts)
	if err != nil {
		panic(err) // the scripts are embedded: a build defect, not a runtime condition
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxItems <= 0 {
		o.MaxItems = DefaultMaxItems
	}
	return &Store{rdb: client, now: o.Now, rand: o.Rand, lua: lua, ttl: o.Retention, maxItems: o.MaxItems,
		pin: o.PinScriptTime}
}

// clockArg is every script's now argument (A.now): 0, which makes the
// script read Redis's clock (script.Clock), or with Options.PinScriptTime
// Now() in Unix ms.
func (j *Store) clockArg() int64 {
	if j.pin {
		return j.now().UnixMilli()
	}
	return 0
}

// MaxItems is the most dead letters one job may hold (Options.MaxItems).
func (j *Store) MaxItems() int { return j.maxItems }

// Fields of a job hash cp:job:{J} (keyspace) that Go writes or reads by
// name; lua/*.lua write the others. Times are Unix ms.
const (
	jSpec        = "sp"  // spec (opaque)
	jState       = "s"   // policy.JobState
	jPhase       = "ph"  // policy.JobPhase while running
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

// token returns a job id: base64url (no padding) of 16 random bytes.
func (j *Store) token() (string, error) {
	var b [16]byte
	j.randMu.Lock()
	_, err := io.ReadFull(j.rand, b[:])
	j.randMu.Unlock()
	if err != nil {
		return "", fmt.Errorf("jobs: job id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// validID reports whether id is shaped like a job id: base64url (no
// padding) of 16 bytes.
func validID(id string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	return err == nil && len(b) == 16
}

// wrap classifies a Redis error (script.Wrap): connection-level failures
// wrap policy.ErrUnavailable. nil stays nil.
func wrap(op string, err error) error { return script.Wrap("jobs: "+op, err) }

// CreateJob records a new queued job with spec (opaque to the store) made
// by the admin token createdBy, indexes it (cp:jobs) and makes it visible
// to the runners (cp:jobs:active) once its record is written (contract §8
// "replay jobs"). Two round trips over up to three slots: not atomic; a
// failure after the record was written leaves a record no runner sees,
// which is deleted on the way out when possible. Errors:
// policy.ErrUnavailable.
func (j *Store) CreateJob(ctx context.Context, spec, createdBy string) (policy.ReplayJob, error) {
	// A job id never starts with '-' (or '_'): calloutctl and shells take
	// `replay-jobs get -abc…` for a flag. One draw in 32 is drawn again.
	id, err := j.token()
	for err == nil && (id[0] == '-' || id[0] == '_') {
		id, err = j.token()
	}
	if err != nil {
		return policy.ReplayJob{}, err
	}
	now := time.UnixMilli(j.now().UnixMilli())
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	k := keyspace.JobOf(id)
	// The job hash first, then the active set, in that order: on Redis
	// Cluster the keys live on different nodes and one pipeline runs them in
	// parallel, so a runner could list the id before its hash exists, find
	// no job and forget it for good.
	_, err = j.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.Hash, jSpec, spec, jState, string(policy.JobQueued), jBy, createdBy,
			jCreated, ms, jUpdated, ms)
		p.ZAdd(ctx, keyspace.Jobs, redis.Z{Score: float64(now.UnixMilli()), Member: id})
		return nil
	})
	if err == nil {
		err = j.rdb.SAdd(ctx, keyspace.JobsActive, id).Err()
	}
	if err != nil {
		_ = j.rdb.Del(context.WithoutCancel(ctx), k.Hash).Err()
		return policy.ReplayJob{}, wrap("create job", err)
	}
	return policy.ReplayJob{ID: id, Spec: spec, State: policy.JobQueued, CreatedBy: createdBy, CreatedAt: now, UpdatedAt: now}, nil
}

// Job reads a job. One round trip. Errors: policy.ErrJobNotFound,
// policy.ErrUnavailable.
func (j *Store) Job(ctx context.Context, id string) (policy.ReplayJob, error) {
	if !validID(id) {
		return policy.ReplayJob{}, fmt.Errorf("jobs: job %q: %w", id, policy.ErrJobNotFound)
	}
	m, err := j.rdb.HGetAll(ctx, keyspace.JobOf(id).Hash).Result()
	if err != nil {
		return policy.ReplayJob{}, wrap("job", err)
	}
	if m[jState] == "" {
		return policy.ReplayJob{}, fmt.Errorf("jobs: job %s: %w", id, policy.ErrJobNotFound)
	}
	return decodeJob(id, m), nil
}

// Jobs lists up to limit jobs (1–1000, default 100), newest first. Index
// entries of jobs that expired are dropped on the way. Two round trips.
// Errors: policy.ErrUnavailable.
func (j *Store) Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := j.rdb.ZRevRange(ctx, keyspace.Jobs, 0, int64(min(limit, maxList)-1)).Result()
	if err != nil {
		return nil, wrap("jobs", err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = j.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, keyspace.JobOf(id).Hash)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("jobs", err)
	}
	out := make([]policy.ReplayJob, 0, len(ids))
	for i, cmd := range cmds {
		if m := cmd.Val(); m[jState] != "" {
			out = append(out, decodeJob(ids[i], m))
			continue
		}
		_ = j.rdb.ZRem(ctx, keyspace.Jobs, ids[i]).Err() // expired: forget it
	}
	return out, nil
}

// ActiveJobs returns the ids of jobs that have not ended (cp:jobs:active),
// unordered: what a runner looks at. An id may name a job that has just
// ended or expired; Acquire says so and Forget drops it.
// Errors: policy.ErrUnavailable.
func (j *Store) ActiveJobs(ctx context.Context) ([]string, error) {
	ids, err := j.rdb.SMembers(ctx, keyspace.JobsActive).Result()
	return ids, wrap("active jobs", err)
}

// Forget drops id from the active set (after it ended or expired).
// Errors: policy.ErrUnavailable.
func (j *Store) Forget(ctx context.Context, id string) error {
	return wrap("forget job", j.rdb.SRem(ctx, keyspace.JobsActive, id).Err())
}

// decodeJob turns a job hash (field -> value, as HGETALL reads it and
// acquire.lua answers it) into a ReplayJob.
func decodeJob(id string, m map[string]string) policy.ReplayJob {
	return policy.ReplayJob{
		ID: id, Spec: m[jSpec], State: policy.JobState(m[jState]), Phase: policy.JobPhase(m[jPhase]),
		CreatedBy: m[jBy], CreatedAt: record.ParseMs(m[jCreated]), StartedAt: record.ParseMs(m[jStarted]),
		FinishedAt: record.ParseMs(m[jFinished]), UpdatedAt: record.ParseMs(m[jUpdated]),
		CancelledBy: m[jCancelledBy], CancelledAt: record.ParseMs(m[jCancelledAt]),
		Total: atoi(m[jTotal]), Sent: atoi(m[jSent]), WouldSend: atoi(m[jWouldSend]), Skipped: atoi(m[jSkipped]),
		Refused: atoi(m[jRefused]), Failed: atoi(m[jFailed]), Error: m[jError],
		Position: m[jPosition], Index: atoi(m[jIndex]), Owner: m[jOwner],
		LeaseExpiresAt: record.ParseMs(m[jLeaseUntil]),
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// CancelJob asks job id to stop, on behalf of the admin token by (contract §8
// "cancel"). A job no replica works on (queued, or its lease expired) is
// cancelled at once; a running one becomes JobCancelling and its replica
// ends it JobCancelled before sending anything more. Cancelling a job that
// is cancelling or has ended changes nothing. It returns the job's state
// afterwards. One round trip (cancel.lua), and one more to forget a job it
// cancelled. Errors: policy.ErrJobNotFound, policy.ErrUnavailable.
func (j *Store) CancelJob(ctx context.Context, id, by string) (policy.JobState, error) {
	if !validID(id) {
		return "", fmt.Errorf("jobs: cancel job %q: %w", id, policy.ErrJobNotFound)
	}
	k := keyspace.JobOf(id)
	v, err := j.lua.cancel.Run(ctx, j.rdb, &cancelArgs{Job: k.Hash, Items: k.Items, Queue: k.Queue,
		Now: j.clockArg(), By: by, Retention: j.ttl})
	if err != nil {
		return "", wrap("cancel job", err)
	}
	st := policy.JobState(v.State)
	switch {
	case v.Result == "missing":
		return "", fmt.Errorf("jobs: cancel job %s: %w", id, policy.ErrJobNotFound)
	case st == policy.JobCancelled:
		_ = j.Forget(ctx, id)
	}
	return st, nil
}

// refused is the policy error of each result a job script refuses with.
var refused = map[string]error{
	"missing": policy.ErrJobNotFound,
	"cancel":  policy.ErrJobCancelled,
	"lost":    policy.ErrJobLost,
	"busy":    policy.ErrJobBusy,
	"final":   policy.ErrJobFinal,
	"full":    policy.ErrJobFull,
}

// refusal turns a job script's result into its error; nil for "ok".
func refusal(op, id, r string) error {
	if r == "ok" {
		return nil
	}
	err, ok := refused[r]
	if !ok {
		return fmt.Errorf("jobs: %s %s: unexpected result %q", op, id, r)
	}
	return fmt.Errorf("jobs: %s %s: %w", op, id, err)
}
