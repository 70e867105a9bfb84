package jobs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// The steps of a running job (contract §8 "replay jobs"): Acquire takes its
// lease, Collect fills its queue, StartSending ends collection, ClaimItem
// and FinishItem send it item by item, Finish ends it and Release gives the
// lease back. Every step but FinishItem and Release is fenced on the
// caller's lease (owner, a replica's token) and renews it for lease from
// Redis's now.

// Acquire takes (or renews) the lease on job id for owner for lease (from
// Redis's now) and returns the job as it is afterwards; a queued job starts running in
// policy.PhaseCollect. One round trip (acquire.lua). Errors:
// policy.ErrJobNotFound, policy.ErrJobFinal, policy.ErrJobBusy (another
// replica holds a live lease), policy.ErrUnavailable.
func (j *Store) Acquire(ctx context.Context, id, owner string, lease time.Duration) (policy.ReplayJob, error) {
	if !validID(id) {
		return policy.ReplayJob{}, fmt.Errorf("jobs: acquire job %q: %w", id, policy.ErrJobNotFound)
	}
	v, err := j.lua.acquire.Run(ctx, j.rdb, &acquireArgs{Job: keyspace.JobOf(id).Hash, Now: j.clockArg(),
		Owner: owner, Lease: lease})
	if err != nil {
		return policy.ReplayJob{}, wrap("acquire job", err)
	}
	if err := refusal("acquire job", id, v.Result); err != nil {
		return policy.ReplayJob{}, err
	}
	m := make(map[string]string, len(v.Job)/2)
	for i := 0; i+1 < len(v.Job); i += 2 {
		m[v.Job[i]] = v.Job[i+1]
	}
	return decodeJob(id, m), nil
}

// Collect adds dead-letter ids to job id's queue, each at most once per job
// however many filters match it (contract §8), and saves position, the
// caller's opaque record of where collection got to (ReplayJob.Position).
// It returns the job's total afterwards (a dry run's items are queued
// like a real run's: what the dry run records is each item's result). Fenced on owner's lease, which it renews. One round
// trip (collect.lua). Errors: policy.ErrJobFull (the cap, Options.MaxItems,
// was reached: nothing past it was added and the position was not saved),
// policy.ErrJobCancelled, policy.ErrJobLost, policy.ErrJobNotFound,
// policy.ErrUnavailable.
func (j *Store) Collect(ctx context.Context, id, owner string, lease time.Duration, position string,
	ids []string) (int, error) {
	k := keyspace.JobOf(id)
	v, err := j.lua.collect.Run(ctx, j.rdb, &collectArgs{Job: k.Hash, Items: k.Items, Queue: k.Queue,
		Now: j.clockArg(), Owner: owner, Lease: lease, Cap: j.maxItems,
		Position: position, IDs: ids})
	if err != nil {
		return 0, wrap("collect", err)
	}
	return v.Total, refusal("collect", id, v.Result)
}

// StartSending ends job id's collect phase: its send position goes to the
// head of its queue. Fenced on owner's lease, which it renews. One round
// trip (send.lua). Errors: policy.ErrJobCancelled, policy.ErrJobLost,
// policy.ErrJobNotFound, policy.ErrUnavailable.
func (j *Store) StartSending(ctx context.Context, id, owner string, lease time.Duration) error {
	v, err := j.lua.send.Run(ctx, j.rdb, &sendArgs{Job: keyspace.JobOf(id).Hash, Now: j.clockArg(),
		Owner: owner, Lease: lease})
	if err != nil {
		return wrap("start sending", err)
	}
	return refusal("start sending", id, v.Result)
}

// Queue returns up to n dead-letter ids of job id's queue from index from
// (0-based), in collection order. One round trip. Errors:
// policy.ErrUnavailable.
func (j *Store) Queue(ctx context.Context, id string, from, n int) ([]string, error) {
	ids, err := j.rdb.LRange(ctx, keyspace.JobOf(id).Queue, int64(from), int64(from+n-1)).Result()
	return ids, wrap("job queue", err)
}

// ClaimItem takes dead letter dl, the job's queue item at index, for
// sending, and moves the send position to index+1, atomically: a dead
// letter is claimed at most once per job, even by racing replicas. It
// reports whether the caller claimed it; when not, prev is the item's
// state (policy.ItemSending means a replica died while sending it: record
// it with FinishItem). Fenced on owner's lease, which it renews; a cancel
// request is honoured here, before anything more is sent. One round trip
// (claim.lua). Errors: policy.ErrJobCancelled, policy.ErrJobLost,
// policy.ErrJobNotFound, policy.ErrUnavailable.
func (j *Store) ClaimItem(ctx context.Context, id, owner string, lease time.Duration, index int,
	dl string) (claimed bool, prev policy.ItemStatus, err error) {
	k := keyspace.JobOf(id)
	v, err := j.lua.claim.Run(ctx, j.rdb, &claimArgs{Job: k.Hash, Items: k.Items, Now: j.clockArg(),
		Owner: owner, Lease: lease, Next: index + 1, DeadLetter: dl})
	if err != nil {
		return false, "", wrap("claim item", err)
	}
	switch v.Result {
	case "ok":
		return true, "", nil
	case "done":
		return false, decodeItem(dl, v.State).Status, nil
	default:
		return false, "", refusal("claim item", id, v.Result)
	}
}

// FinishItem records the result of a claimed item of job id and counts it
// (ReplayJob.Sent, WouldSend, Skipped, Refused or Failed, by it.Status).
// Not fenced: the replay it records has happened. It reports false,
// changing nothing, when the item was not pending (already recorded). One
// round trip (item.lua). Errors: policy.ErrUnavailable, or an error for a
// Status that is not a result.
func (j *Store) FinishItem(ctx context.Context, id string, it policy.ReplayItem) (bool, error) {
	counter := resultCounter(it.Status)
	if counter == "" {
		return false, fmt.Errorf("jobs: finish item %s: %q is not a result", it.DeadLetterID, it.Status)
	}
	k := keyspace.JobOf(id)
	v, err := j.lua.item.Run(ctx, j.rdb, &itemArgs{Job: k.Hash, Items: k.Items, Now: j.clockArg(),
		DeadLetter: it.DeadLetterID, Result: encodeItem(it), Counter: counter})
	if err != nil {
		return false, wrap("finish item", err)
	}
	return v.Recorded, nil
}

// Finish ends job id held by owner in state (policy.JobCompleted,
// JobCancelled or JobFailed, with errText saying why it failed) and drops
// it from the active set; its keys expire after Options.Retention. Two
// round trips (finish.lua, then the active set). Errors: policy.ErrJobLost
// (the caller does not hold it, or it already ended),
// policy.ErrJobNotFound, policy.ErrUnavailable, or an error for a state
// that is not final.
func (j *Store) Finish(ctx context.Context, id, owner string, state policy.JobState, errText string) error {
	if !state.Final() {
		return fmt.Errorf("jobs: finish job %s: %q is not a final state", id, state)
	}
	k := keyspace.JobOf(id)
	v, err := j.lua.finish.Run(ctx, j.rdb, &finishArgs{Job: k.Hash, Items: k.Items, Queue: k.Queue,
		Now: j.clockArg(), Owner: owner, State: string(state), Error: errText, Retention: j.ttl})
	if err != nil {
		return wrap("finish job", err)
	}
	if err := refusal("finish job", id, v.Result); err != nil {
		return err
	}
	return j.Forget(ctx, id)
}

// Release gives up owner's lease on job id (a replica shutting down) so
// another replica may take it over at once; a lease the caller does not
// hold is left alone. One round trip (release.lua). Errors:
// policy.ErrUnavailable.
func (j *Store) Release(ctx context.Context, id, owner string) error {
	_, err := j.lua.release.Run(ctx, j.rdb, &releaseArgs{Job: keyspace.JobOf(id).Hash, Owner: owner})
	return wrap("release job", err)
}

// Items returns up to limit (1–1000, default 100) items of job id's queue
// from index offset, in collection order, with their states. Two round
// trips. Errors: policy.ErrUnavailable.
func (j *Store) Items(ctx context.Context, id string, offset, limit int) ([]policy.ReplayItem, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := j.Queue(ctx, id, max(offset, 0), min(limit, maxList))
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	vals, err := j.rdb.HMGet(ctx, keyspace.JobOf(id).Items, ids...).Result()
	if err != nil {
		return nil, wrap("job items", err)
	}
	out := make([]policy.ReplayItem, len(ids))
	for i, dl := range ids {
		s, _ := vals[i].(string)
		out[i] = decodeItem(dl, s)
	}
	return out, nil
}

// Stored forms of the states before a result (the items hash, keyspace
// cp:job:{J}:items).
const (
	itemQueued  = "q"
	itemSending = "p"
)

// resultCounter is the job counter field of a result; "" for a state that
// is not a result.
func resultCounter(st policy.ItemStatus) string {
	switch st {
	case policy.ItemSent:
		return jSent
	case policy.ItemWouldSend:
		return jWouldSend
	case policy.ItemSkipped:
		return jSkipped
	case policy.ItemRefused:
		return jRefused
	case policy.ItemFailed:
		return jFailed
	}
	return ""
}

// encodeItem is the stored form of a result: "status|replay id|detail".
func encodeItem(it policy.ReplayItem) string {
	return string(it.Status) + "|" + it.ReplayID + "|" + strings.ReplaceAll(it.Detail, "|", "/")
}

// decodeItem parses a stored item state ("" when the item is unknown:
// reported as failed, "missing").
func decodeItem(dl, v string) policy.ReplayItem {
	it := policy.ReplayItem{DeadLetterID: dl}
	switch v {
	case itemQueued:
		it.Status = policy.ItemQueued
	case itemSending:
		it.Status = policy.ItemSending
	case "":
		it.Status, it.Detail = policy.ItemFailed, "missing"
	default:
		parts := strings.SplitN(v, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		it.Status, it.ReplayID, it.Detail = policy.ItemStatus(parts[0]), parts[1], parts[2]
	}
	return it
}
