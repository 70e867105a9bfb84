package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
	"github.com/redis/go-redis/v9"
)

// jobScripts are the replay-job scripts (lua/job_*.lua and
// lua/replay_mark.lua), each with lib.lua and job_lib.lua prepended.
type jobScripts struct {
	acquire, collect, send, claim, item *redis.Script
	finish, cancel, release, mark       *redis.Script
}

func loadJobScripts() (jobScripts, error) {
	var lib []byte
	for _, name := range []string{"lib", "job_lib"} {
		b, err := luaFS.ReadFile("lua/" + name + ".lua")
		if err != nil {
			return jobScripts{}, fmt.Errorf("redisstore: script %s: %w", name, err)
		}
		lib = append(append(lib, b...), '\n')
	}
	var s jobScripts
	for _, p := range []struct {
		dst  **redis.Script
		name string
	}{
		{&s.acquire, "job_acquire"}, {&s.collect, "job_collect"}, {&s.send, "job_send"},
		{&s.claim, "job_claim"}, {&s.item, "job_item"}, {&s.finish, "job_finish"},
		{&s.cancel, "job_cancel"}, {&s.release, "job_release"}, {&s.mark, "replay_mark"},
	} {
		body, err := luaFS.ReadFile("lua/" + p.name + ".lua")
		if err != nil {
			return jobScripts{}, fmt.Errorf("redisstore: script %s: %w", p.name, err)
		}
		*p.dst = redis.NewScript(string(lib) + string(body))
	}
	return s, nil
}

// Acquire takes (or renews) the lease on job id for owner (a replica's
// token) until now+lease and returns the job as it is afterwards; a queued
// job starts running in PhaseCollect. Every later step of the job is
// fenced on this lease and renews it by the same lease. One round trip.
// Errors: ErrJobNotFound, ErrJobFinal, ErrJobBusy (another replica holds a
// live lease), ErrUnavailable.
func (j *ReplayStore) Acquire(ctx context.Context, id, owner string, lease time.Duration) (policy.ReplayJob, error) {
	if !validJobID(id) {
		return policy.ReplayJob{}, fmt.Errorf("redisstore: acquire job %q: %w", id, policy.ErrJobNotFound)
	}
	now := j.s.now()
	v, err := j.s.run(ctx, "acquire job", j.lua.acquire, []string{keyspace.JobOf(id).Hash},
		msArg(now), owner, msArg(now.Add(lease)))
	if err != nil {
		return policy.ReplayJob{}, err
	}
	a, err := replyN("acquire job", v, 1)
	if err != nil {
		return policy.ReplayJob{}, err
	}
	if err := jobRefusal("acquire job", id, replyStr(a[0])); err != nil {
		return policy.ReplayJob{}, err
	}
	m := make(map[string]string, (len(a)-1)/2)
	for i := 1; i+1 < len(a); i += 2 {
		m[replyStr(a[i])] = replyStr(a[i+1])
	}
	return decodeJob(id, m), nil
}

// Collect adds dead-letter ids to job id's queue, each at most once per job
// however many filters match it (contract §8), and saves position, the
// caller's opaque record of where collection got to (Job.Position). With
// dryRun the items are recorded as would-send. It returns the job's total
// afterwards. Fenced on owner's lease, which it renews. One round trip.
// Errors: ErrJobFull (the cap was reached: nothing past it was added and
// the position was not saved), ErrJobCancelled, ErrJobLost, ErrJobNotFound,
// ErrUnavailable.
func (j *ReplayStore) Collect(ctx context.Context, id, owner string, lease time.Duration, position string,
	dryRun bool, ids []string) (int, error) {
	now := j.s.now()
	state := string(itemQueued)
	if dryRun {
		state = string(itemWouldSend)
	}
	args := []any{msArg(now), owner, msArg(now.Add(lease)), itoa(j.maxItems), position, state}
	for _, dl := range ids {
		args = append(args, dl)
	}
	v, err := j.s.run(ctx, "collect", j.lua.collect, keyspace.JobOf(id).All(), args...)
	if err != nil {
		return 0, err
	}
	a, err := replyN("collect", v, 1)
	if err != nil {
		return 0, err
	}
	total := 0
	if len(a) > 1 {
		total = int(replyInt(a[1]))
	}
	return total, jobRefusal("collect", id, replyStr(a[0]))
}

// StartSending ends job id's collect phase: its send position goes to the
// head of its queue. Fenced on owner's lease, which it renews. Errors:
// ErrJobCancelled, ErrJobLost, ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) StartSending(ctx context.Context, id, owner string, lease time.Duration) error {
	now := j.s.now()
	v, err := j.s.run(ctx, "start sending", j.lua.send, []string{keyspace.JobOf(id).Hash},
		msArg(now), owner, msArg(now.Add(lease)))
	if err != nil {
		return err
	}
	return jobRefusal("start sending", id, replyStr(v))
}

// Queue returns up to n dead-letter ids of job id's queue from index from
// (0-based), in collection order. Errors: ErrUnavailable.
func (j *ReplayStore) Queue(ctx context.Context, id string, from, n int) ([]string, error) {
	ids, err := j.s.rdb.LRange(ctx, keyspace.JobOf(id).Queue, int64(from), int64(from+n-1)).Result()
	return ids, j.s.wrap("job queue", err)
}

// ClaimItem takes dead letter dl, the job's queue item at index, for
// sending, and moves the send position to index+1, atomically: a dead
// letter is claimed at most once per job, even by racing replicas. It
// reports whether the caller claimed it; when not, prev is the item's
// state (ItemSending means a replica died while sending it: record it with
// FinishItem). Fenced on owner's lease, which it renews; a cancel request
// is honoured here, before anything more is sent.
// Errors: ErrJobCancelled, ErrJobLost, ErrJobNotFound, ErrUnavailable.
func (j *ReplayStore) ClaimItem(ctx context.Context, id, owner string, lease time.Duration, index int,
	dl string) (claimed bool, prev policy.ItemStatus, err error) {
	now := j.s.now()
	k := keyspace.JobOf(id)
	v, err := j.s.run(ctx, "claim item", j.lua.claim, []string{k.Hash, k.Items},
		msArg(now), owner, msArg(now.Add(lease)), itoa(index+1), dl)
	if err != nil {
		return false, "", err
	}
	a, err := replyN("claim item", v, 1)
	if err != nil {
		return false, "", err
	}
	switch r := replyStr(a[0]); r {
	case "ok":
		return true, "", nil
	case "done":
		if len(a) < 2 {
			return false, "", fmt.Errorf("redisstore: claim item: unexpected reply %v", a)
		}
		return false, decodeItem(dl, replyStr(a[1])).Status, nil
	default:
		return false, "", jobRefusal("claim item", id, r)
	}
}

// FinishItem records the result of a claimed item of job id and counts it
// (Job.Sent, WouldSend, Skipped, Refused or Failed, by it.Status). Not fenced: the
// replay it records has happened. It reports false, changing nothing, when
// the item was not pending (already recorded). Errors: ErrUnavailable, or
// an error for a Status that is not a result.
func (j *ReplayStore) FinishItem(ctx context.Context, id string, it policy.ReplayItem) (bool, error) {
	counter := resultCounter(it.Status)
	if counter == "" {
		return false, fmt.Errorf("redisstore: finish item %s: %q is not a result", it.DeadLetterID, it.Status)
	}
	k := keyspace.JobOf(id)
	v, err := j.s.run(ctx, "finish item", j.lua.item, []string{k.Hash, k.Items},
		msArg(j.s.now()), it.DeadLetterID, encodeItem(it), counter)
	if err != nil {
		return false, err
	}
	return replyInt(v) == 1, nil
}

// Finish ends job id held by owner in state (JobCompleted, JobCancelled or
// JobFailed, with errText saying why it failed) and drops it from the
// active set; its keys expire after the job retention. Errors: ErrJobLost
// (the caller does not hold it, or it already ended), ErrJobNotFound,
// ErrUnavailable.
func (j *ReplayStore) Finish(ctx context.Context, id, owner string, state policy.JobState, errText string) error {
	if !state.Final() {
		return fmt.Errorf("redisstore: finish job %s: %q is not a final state", id, state)
	}
	v, err := j.s.run(ctx, "finish job", j.lua.finish, keyspace.JobOf(id).All(),
		msArg(j.s.now()), owner, string(state), errText, durMs(j.ttl))
	if err != nil {
		return err
	}
	if err := jobRefusal("finish job", id, replyStr(v)); err != nil {
		return err
	}
	return j.Forget(ctx, id)
}

// Release gives up owner's lease on job id (a replica shutting down) so
// another replica may take it over at once; a lease the caller does not
// hold is left alone. Errors: ErrUnavailable.
func (j *ReplayStore) Release(ctx context.Context, id, owner string) error {
	_, err := j.s.run(ctx, "release job", j.lua.release, []string{keyspace.JobOf(id).Hash}, owner)
	return err
}

// Items returns up to limit (1–1000, default 100) items of job id's queue
// from index offset, in collection order, with their states. Two round
// trips. Errors: ErrUnavailable.
func (j *ReplayStore) Items(ctx context.Context, id string, offset, limit int) ([]policy.ReplayItem, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := j.Queue(ctx, id, max(offset, 0), min(limit, maxBatch))
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	vals, err := j.s.rdb.HMGet(ctx, keyspace.JobOf(id).Items, ids...).Result()
	if err != nil {
		return nil, j.s.wrap("job items", err)
	}
	out := make([]policy.ReplayItem, len(ids))
	for i, dl := range ids {
		out[i] = decodeItem(dl, replyStr(vals[i]))
	}
	return out, nil
}

// Stored forms of the states before a result (the items hash).
const (
	itemQueued    = "q"
	itemSending   = "p"
	itemWouldSend = "w"
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
	case itemWouldSend:
		it.Status = policy.ItemWouldSend
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
