package salesforce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
)

// Replayer replays one dead letter (contract §8): a new attempt chain with the
// original request and Idempotency-Key. by names who asked, for the audit
// log ("salesforce:<user id>" here). It returns the new chain's callout
// id, or with policy.ErrReplayAlreadyReplayed the chain already holding
// the dead letter's key, with policy.ErrReplaySuperseded the newer dead
// letter to replay instead. Errors wrap the domain's replay errors
// (policy.ErrReplay*: not a dead letter, already replayed, superseded,
// endpoint disabled or not configured, backlog full), which the poller
// answers; any other error is taken as the store's (transient).
// *replay.Service implements it.
type Replayer interface {
	ReplayOne(ctx context.Context, id, by string) (newID string, err error)
}

// ReprocessRequests keeps each reprocess request to one replay across
// replicas. The store's outbox (proxy/redisstore/outbox) implements it
// (its ClaimReprocess documents the rule).
type ReprocessRequests interface {
	ClaimReprocess(ctx context.Context, root string, stamp time.Time, owner string, lease time.Duration) (bool, error)
	FinishReprocess(ctx context.Context, root string, stamp time.Time) error
}

// ReprocessLease is how long a replica holds a reprocess request it
// claimed: far longer than one replay (a few Redis round trips). A request
// whose replica died, or whose endpoint's backlog was full, is taken again
// by the first poll after it lapses.
const ReprocessLease = time.Minute

// reprocessPoll names the reprocess poll's lock and watermark.
const reprocessPoll = "reprocess"

// maxSupersededHops bounds how far a request follows newer dead letters
// of its record (each failed replay adds one).
const maxSupersededHops = 8

// ReplayMarks reads a callout's replay mark (policy.ReplayMark: its latest
// replay chain). The store's core (proxy/redisstore) implements it.
type ReplayMarks interface {
	ReplayMarkOf(ctx context.Context, id string) (policy.ReplayMark, error)
}

// ReprocessOptions configure a Reprocessor. All but Subscribed are
// required.
type ReprocessOptions struct {
	// Writer queries Salesforce and queues the status writes; its
	// salesforce section's reprocess_interval paces Run, its Owner names
	// this replica in the poll lock and the request claims.
	Writer   *Writer
	Replayer Replayer
	Requests ReprocessRequests
	// Marks tells whether the copy a request would replay was replayed
	// already by a chain the record does not name yet (see Reprocessor).
	Marks ReplayMarks
	// Subscribed, optional, reports whether a replica holds the Pub/Sub
	// subscriber lease (sfsub.State.Held). A replica that does not
	// subscribe itself (salesforce.pubsub off) skips its Run polls while
	// one does: the subscriber covers the org, and polls itself when its
	// stream fails (docs/salesforce.md "Reprocess without polling").
	Subscribed func(ctx context.Context) (bool, error)
	// Deferred, optional (with Subscribed), is the set of requests a
	// subscriber deferred (sfsub.State): while no replica subscribes, Run
	// looks at its due requests before each poll, so that none is left
	// there when every replica has the subscription off.
	Deferred DeferredRequests
}

// Reprocessor picks up the Failed_Callout__c records an admin set to
// Reprocess Requested (contract §8) and replays them: one replica polls at a
// time (a lock in Redis), and each request — a record and its
// SystemModstamp — is replayed once even if two replicas poll at once
// (ReprocessRequests). The record shows Reprocessing while the new chain
// runs; the Writer then writes Reprocessed or Failed Again when it ends.
//
// The replayed copy is the record's latest (Replay_Callout_Id__c, else
// Callout_Id__c), following newer dead letters (ErrReplaySuperseded). The
// replay comes first and Reprocessing is queued after it, dated from just
// before it, so that a record never shows Reprocessing without a chain and
// a chain that ended first is never shown as running. A request that
// makes no chain is answered: Expired when the proxy's copy is gone;
// Reprocessing or Reprocessed from the state of a chain that already
// holds the key or is the latest copy; Failed Again when the endpoint is
// disabled or no longer configured (re-enable it, then request again;
// the picklist has no better value and a kept request would be polled
// forever). A full backlog defers the request (ErrPollAgain). A replica
// that dies between the replay and its claim's end leaves the request to
// be taken again after ReprocessLease: a dead letter with an
// Idempotency-Key is then found in flight; either kind is found replayed
// by its replay mark: before replaying the record's latest copy, the
// request reads that copy's mark, and a chain the record does not name yet
// (the dead replica's, or one whose status write is still queued) answers
// the request from its state instead of a second replay. The one window
// left is a replica dying between creating a chain and marking its copy
// (one Redis round trip inside replay.Service.Replay): a copy without an
// Idempotency-Key (PUT or DELETE, idempotent by HTTP semantics, contract
// §5) is then replayed a second time; so is one whose mark failed to be
// written (logged by the replay service, no crash needed).
type Reprocessor struct {
	w          *Writer
	r          Replayer
	q          ReprocessRequests
	m          ReplayMarks
	subscribed func(ctx context.Context) (bool, error)
	deferred   DeferredRequests
	every      time.Duration
	log        *slog.Logger
}

// NewReprocessor returns a Reprocessor. Errors: a missing dependency.
func NewReprocessor(o ReprocessOptions) (*Reprocessor, error) {
	if o.Writer == nil || o.Replayer == nil || o.Requests == nil || o.Marks == nil {
		return nil, fmt.Errorf("salesforce: reprocessor needs a writer, a replayer, a request store and replay marks")
	}
	every := min(o.Writer.sf.ReprocessInterval, o.Writer.sf.PollInterval) // both polls share one call
	if every <= 0 {
		every = time.Minute
	}
	return &Reprocessor{w: o.Writer, r: o.Replayer, q: o.Requests, m: o.Marks, subscribed: o.Subscribed,
		deferred: o.Deferred, every: every, log: o.Writer.log.With(slog.String("poll", reprocessPoll))}, nil
}

// ReprocessReport is what one Poll did.
type ReprocessReport struct {
	// Polled is false when another replica holds the poll lock, or while
	// Salesforce writes are paused (REQUEST_LIMIT_EXCEEDED).
	Polled bool
	// Requests is the records seen as Reprocess Requested.
	Requests int
	// Replayed requests made a new replay chain (Reprocessing).
	Replayed int
	// Answered requests were answered without one: Expired (the proxy's
	// copy is gone), Reprocessing or Reprocessed (a chain already holds
	// the key), Failed Again (the endpoint refuses replays).
	Answered int
	// Skipped requests were claimed by another replica or handled before.
	Skipped int
	// Deferred requests wait for their endpoint's backlog to drain; the
	// first poll after ReprocessLease tries them again.
	Deferred int
	// Discarded is the records seen as Discarded, whose proxy copies were
	// deleted (Writer.PollDiscarded; polled in the same Composite call).
	Discarded int
	// DeferredIDs and ClaimedIDs are the Salesforce record Ids of the
	// Deferred requests and of those Skipped as claimed (by a replica
	// that may have died, or handled before): the subscription looks at
	// them again after ReprocessLease, as no poll may come.
	DeferredIDs, ClaimedIDs []string
}

// Run polls (both polls, one call) every reprocess_interval, or
// poll_interval when shorter, until ctx ends; with Subscribed, only while
// no replica holds the subscriber lease.
func (p *Reprocessor) Run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		rep, err := p.runPoll(ctx)
		switch {
		case err != nil:
			p.log.Warn("polling Reprocess Requested Failed_Callout__c records failed", slog.Any("error", err))
		case rep.Requests > rep.Skipped:
			p.log.Info("Salesforce reprocess requests handled", slog.Int("replayed", rep.Replayed),
				slog.Int("answered", rep.Answered), slog.Int("deferred", rep.Deferred))
		}
		if rep.Discarded > 0 {
			p.log.Info("deleted the proxy's copies of Discarded records", slog.Int("records", rep.Discarded))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runPoll is Run's poll: none while another replica subscribes; before
// it, the due requests a subscriber deferred.
func (p *Reprocessor) runPoll(ctx context.Context) (ReprocessReport, error) {
	if p.subscribed != nil {
		if on, err := p.subscribed(ctx); on || err != nil {
			return ReprocessReport{}, err
		}
	}
	if p.deferred != nil {
		if _, err := p.lookAgain(ctx, p.deferred); err != nil {
			p.log.Warn("deferred reprocess requests: looking again failed", slog.Any("error", err))
		}
	}
	return p.Poll(ctx)
}

// errPollLockLost ends a poll whose lock another replica took (this one
// stalled past the lock's two intervals).
var errPollLockLost = errors.New("salesforce: the reprocess poll lock was lost")

// Poll asks Salesforce, when this replica holds the poll lock (for two
// intervals, renewed every half interval while the poll runs, so that a
// poll of many requests is never run by two replicas at once), for the
// records set to Reprocess
// Requested since the last poll and handles each (see Reprocessor), and in
// the same Composite call for the records set to Discarded
// (Writer.PollDiscarded): one API call a poll, at most 1,440 a day at the
// default interval.
// Errors: the lock's, the query's, the store's; the watermark then stays
// and the next poll looks again (a handled request is skipped).
func (p *Reprocessor) Poll(ctx context.Context) (ReprocessReport, error) {
	var rep ReprocessReport
	if paused, err := p.w.paused(ctx); paused || err != nil {
		return rep, err
	}
	lock, ttl := "sf-poll-"+reprocessPoll, 2*p.every
	held, err := p.w.o.Store.TryLock(ctx, lock, p.w.o.Owner, ttl)
	if err != nil || !held {
		return rep, err
	}
	rep.Polled = true
	renewed := p.w.o.Now()
	renew := func() error { // before each record: the replays are the long part of a poll
		now := p.w.o.Now()
		if now.Sub(renewed) < p.every/2 {
			return nil
		}
		held, err := p.w.o.Store.TryLock(ctx, lock, p.w.o.Owner, ttl)
		if err == nil && !held {
			err = errPollLockLost
		}
		renewed = now
		return err
	}
	err = p.w.pollAll(ctx, p.polls(ctx, &rep, renew))
	return rep, err
}

// answer is what a request comes to: the record's status, its latest
// replay chain ("" keep) and the event time.
type answer struct {
	status, replay string
	at             time.Time
}

// handle claims one request, replays it and queues the record's status.
func (p *Reprocessor) handle(ctx context.Context, r sfapi.Record, stamp time.Time, rep *ReprocessReport) error {
	root, _ := r[ExternalIDField].(string)
	if root == "" {
		return nil
	}
	rep.Requests++
	recordID, _ := r["Id"].(string)
	took, err := p.q.ClaimReprocess(ctx, root, stamp, p.w.o.Owner, ReprocessLease)
	if err != nil {
		return err
	}
	if !took {
		rep.Skipped++
		rep.ClaimedIDs = append(rep.ClaimedIDs, recordID)
		return nil
	}
	latest, _ := r["Replay_Callout_Id__c"].(string)
	by := "salesforce"
	if user, _ := r["LastModifiedById"].(string); user != "" {
		by += ":" + user
	}
	a, created, err := p.replayed(ctx, cmp.Or(latest, root))
	if err == nil && a.status == "" {
		a, created, err = p.reprocess(ctx, root, cmp.Or(latest, root), by)
	}
	if errors.Is(err, policy.ErrReplayBacklogFull) {
		rep.Deferred++
		rep.DeferredIDs = append(rep.DeferredIDs, recordID)
		p.log.WarnContext(p.w.about(ctx, root, ""), "reprocess request deferred: the endpoint's backlog is full",
			slog.String("callout_id", root), slog.Duration("retry_after", ReprocessLease))
		return ErrPollAgain // the claim lapses after ReprocessLease
	}
	if err != nil {
		return err
	}
	err = p.w.statusAt(ctx, root, a.status, a.replay, a.at, stamp) // it answers the request of stamp
	if errors.Is(err, policy.ErrNotFound) {
		p.log.Warn("reprocess request for a record that is not the proxy's", slog.String("callout_id", root))
	} else if err != nil {
		return err
	}
	if created {
		rep.Replayed++
	} else {
		rep.Answered++
	}
	return p.q.FinishReprocess(ctx, root, stamp)
}

// replayed answers a request from a replay chain of target (the record's
// latest copy) that the record does not name yet, when target's replay
// mark names one that still exists: the request was served by it (a
// replica died after the replay, before its claim ended), or it was made
// while that chain's status write was queued. The zero answer: none, so
// replay. Errors: the store's.
func (p *Reprocessor) replayed(ctx context.Context, target string) (answer, bool, error) {
	m, err := p.m.ReplayMarkOf(ctx, target)
	if err != nil || m.ReplayedBy == "" {
		return answer{}, false, err
	}
	if _, err := p.w.o.Store.Get(ctx, m.ReplayedBy); errors.Is(err, policy.ErrNotFound) {
		return answer{}, false, nil // that chain is gone: replay the copy again
	} else if err != nil {
		return answer{}, false, err
	}
	p.log.InfoContext(p.w.about(ctx, target, ""), "reprocess request already replayed by a chain the record "+
		"does not name yet: answering from it", slog.String("dead_letter_id", target), slog.String("replay_id", m.ReplayedBy))
	return p.copyAnswer(ctx, m.ReplayedBy, p.w.o.Now())
}

// reprocess replays target (the record's latest copy), following newer
// dead letters of the record, and returns the answer and whether a chain
// was created. Status events of the replay are dated from before it
// started, so that a chain that ends first is never shown as running.
func (p *Reprocessor) reprocess(ctx context.Context, root, target, by string) (answer, bool, error) {
	started := p.w.o.Now()
	for hops := 0; ; hops++ {
		newID, err := p.r.ReplayOne(ctx, target, by)
		switch {
		case err == nil:
			p.log.InfoContext(p.w.about(ctx, root, ""), "reprocess requested in Salesforce: replaying",
				slog.String("callout_id", root),
				slog.String("dead_letter_id", target), slog.String("replay_id", newID))
			return answer{policy.RecordReprocessing, newID, started}, true, nil
		case errors.Is(err, policy.ErrReplaySuperseded) && newID != "" && newID != target && hops < maxSupersededHops:
			target = newID
		case errors.Is(err, policy.ErrReplayAlreadyReplayed) && newID != "":
			return p.copyAnswer(ctx, newID, started)
		case errors.Is(err, policy.ErrReplayNotDeadLetter):
			return p.copyAnswer(ctx, target, started)
		case errors.Is(err, policy.ErrReplayEndpointDisabled), errors.Is(err, policy.ErrReplayUnknownEndpoint),
			errors.Is(err, policy.ErrReplaySuperseded):
			p.log.WarnContext(p.w.about(ctx, root, ""), "reprocess request refused: Failed Again",
				slog.String("callout_id", root),
				slog.String("dead_letter_id", target), slog.Any("error", err))
			return answer{policy.RecordFailedAgain, "", started}, false, nil
		default:
			return answer{}, false, err
		}
	}
}

// copyAnswer answers a request that made no chain from the state of the
// copy id: gone, Expired; a chain still running, Reprocessing; one that
// succeeded, Reprocessed; else Failed Again.
func (p *Reprocessor) copyAnswer(ctx context.Context, id string, at time.Time) (answer, bool, error) {
	c, err := p.w.o.Store.Get(ctx, id)
	if errors.Is(err, policy.ErrNotFound) {
		p.log.Info("reprocess request for an expired dead letter: Expired", slog.String("callout_id", id))
		return answer{policy.RecordExpired, "", p.w.o.Now()}, false, nil
	}
	if err != nil {
		return answer{}, false, err
	}
	var chain string
	if c.ReplayOf != "" {
		chain = c.ID
	}
	switch c.State {
	case policy.Scheduled, policy.Held, policy.InFlight:
		return answer{policy.RecordReprocessing, chain, at}, false, nil
	case policy.Succeeded:
		return answer{policy.RecordReprocessed, chain, at}, false, nil
	}
	return answer{policy.RecordFailedAgain, chain, at}, false, nil
}
