package salesforce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/salesforce/pubsub"
)

// ChangeEventTopic is the Change Data Capture channel of Failed_Callout__c
// ("Change Event Object Name": X__c changes are published on
// /data/X__ChangeEvent), which the org selects for the proxy
// (apex-stubs PlatformEventChannelMember Failed_Callout_ChangeEvent).
const ChangeEventTopic = "/data/Failed_Callout__ChangeEvent"

// Subscription timing.
const (
	// SubscriptionLease is how long the subscriber lease lasts; its holder
	// renews it every third of it, so another replica takes over within a
	// lease of the holder's death.
	SubscriptionLease = 30 * time.Second
	// SubscribeBackoffStart doubles, after each failed stream in a row, up
	// to SubscribeBackoffMax ("Retry Long-Lived RPC Calls After an Error
	// Occurs": retry with exponential backoff).
	SubscribeBackoffStart = time.Second
	SubscribeBackoffMax   = 5 * time.Minute
)

// SubscriptionState is the subscription's shared state: the one-subscriber
// lease, the replay id after the last batch handled, and the reprocess
// requests deferred.
// *sfsub.State (proxy/redisstore/sfsub) implements it.
type SubscriptionState interface {
	Hold(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, owner string) error
	ReplayID(ctx context.Context) ([]byte, error)
	SaveReplayID(ctx context.Context, owner string, id []byte) (bool, error)
	ForgetReplayID(ctx context.Context) error
	DeferredRequests
}

// SubscriptionOptions configure a Subscription. Reprocessor, PubSub and
// State are required.
type SubscriptionOptions struct {
	// Reprocessor handles the changed records (HandleChanges) and is the
	// fallback poll (Poll); its writer's Owner names this replica in the
	// lease and its Now is the clock.
	Reprocessor *Reprocessor
	// PubSub reads the change events (authenticated by
	// sfapi.Client.PubSubAuth).
	PubSub *pubsub.Client
	State  SubscriptionState
	// Batch is num_requested per FetchRequest (default pubsub.MaxBatch).
	Batch int32
}

// Subscription reprocesses Failed_Callout__c records as their change
// events arrive through the Pub/Sub API, instead of polling (contract §8):
//
//   - one replica subscribes at a time: the holder of the subscriber lease
//     (SubscriptionState.Hold), renewed by every Step; the others wait,
//     and take over within SubscriptionLease when the holder dies;
//   - a change event whose Status__c became Reprocess Requested or
//     Discarded (an update event names the fields that changed in its
//     changedFields bitmap, "Event Deserialization Considerations"; a
//     create event carries every field) hands its record ids to
//     Reprocessor.HandleChanges: one Composite call reads their current
//     state and each request is handled as a poll would (its claim keeps
//     it to one replay across replicas and redeliveries);
//   - a gap event (changeType GAP_*, header only: "Gap Events", "Overflow
//     Events") makes a catch-up poll due: the changes it stands for are
//     read by the poll;
//   - the replay id after each batch is stored only once the batch is
//     handled and no catch-up poll is due (one due runs first; while it
//     cannot run — another replica's poll lock, paused writes — nothing
//     is stored), so after a restart or a failover the stream resumes
//     after the last handled event (replay preset CUSTOM), or at LATEST
//     with a new catch-up poll: an event is handled at least once, a
//     request replayed at most once (the claims). A replay id Salesforce
//     refuses (invalid, or past the 72-hour retention: "Event Message
//     Durability") is forgotten; the subscription starts again at LATEST
//     after one catch-up poll, as the first subscription does. A
//     catch-up poll is done only when it ran (this replica held the poll
//     lock) and succeeded;
//   - while no stream runs (it failed; the retry waits its backoff), the
//     holder polls every reprocess_interval (Reprocessor.Poll): the
//     fallback. While a stream is open no replica polls but for a
//     catch-up poll due (a replica with the subscription off leaves its
//     polls to the lease holder: ReprocessOptions.Subscribed), so an idle
//     org costs no API call (the Pub/Sub API's RPCs are not REST calls;
//     the events count toward the org's event delivery allocation
//     instead).
//
// Requests HandleChanges or a poll defers (a full backlog, paused writes,
// another replica's claim) are kept in Redis (SubscriptionState.Defer) and
// looked at again after ReprocessLease by whichever replica then holds the
// lease, so a failover of the subscriber loses none; a claim of another
// replica only once (it was a finished request, or its replica died and
// the claim has lapsed).
type Subscription struct {
	p     *Reprocessor
	o     SubscriptionOptions
	owner string
	log   *slog.Logger

	pollMu sync.Mutex // one poll of this replica at a time (Step, a stream's batches)

	mu         sync.Mutex
	cancel     context.CancelFunc // ends the running stream; nil when none runs
	gen        int                // the running stream's number
	catchUpDue bool               // a catch-up poll must run before a replay id is stored
	topicOK    bool               // GetTopic said the integration user may subscribe
	fails      int                // failed streams in a row
	retryAt    time.Time          // no stream before it
	pollAt     time.Time          // the next fallback poll
	polled     time.Time          // the last fallback poll
	ended      chan struct{}      // gets a value when a stream ends (wakes Run)
	counts     SubscriptionCounts
}

// SubscriptionCounts are totals since the Subscription was made.
type SubscriptionCounts struct {
	// Streams is how many Subscribe streams were opened; Failed how many
	// ended with an error (not a close by the server).
	Streams, Failed int
	// Batches and Events are the FetchResponses and events handled;
	// Stored is how many replay ids were stored after them.
	Batches, Events, Stored int
	// Polls is the fallback and catch-up polls run (this replica held
	// the poll lock).
	Polls int
	// Gaps is the gap events seen.
	Gaps int
	// Replayed and Answered are HandleChanges' totals (ReprocessReport).
	Replayed, Answered int
}

// NewSubscription returns a Subscription. Errors: a missing dependency.
func NewSubscription(o SubscriptionOptions) (*Subscription, error) {
	if o.Reprocessor == nil || o.PubSub == nil || o.State == nil {
		return nil, fmt.Errorf("salesforce: a subscription needs a reprocessor, a Pub/Sub client and its state")
	}
	return &Subscription{p: o.Reprocessor, o: o, owner: o.Reprocessor.w.o.Owner,
		log: o.Reprocessor.w.log.With(slog.String("topic", ChangeEventTopic)), ended: make(chan struct{}, 1)}, nil
}

// Counts returns the totals so far.
func (s *Subscription) Counts() SubscriptionCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Streaming reports whether a stream is running.
func (s *Subscription) Streaming() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancel != nil
}

// Run steps the subscription until ctx ends, then ends the stream and
// gives the lease back.
func (s *Subscription) Run(ctx context.Context) {
	defer func() {
		s.stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.o.State.Release(rctx, s.owner)
	}()
	for {
		wait := s.Step(ctx)
		if !sleep(ctx, max(wait, 10*time.Millisecond), s.ended) {
			return
		}
	}
}

// Step does what is due now and returns how long until the next Step: it
// takes or renews the lease (without it, it ends its stream and waits);
// holding it, it looks again at deferred requests whose time came, runs a
// catch-up poll still due beside a running stream, starts a stream when
// none runs and its backoff is over, else runs the fallback poll when due.
func (s *Subscription) Step(ctx context.Context) time.Duration {
	every := SubscriptionLease / 3
	held, err := s.o.State.Hold(ctx, s.owner, SubscriptionLease)
	if err != nil || !held {
		if err != nil {
			s.log.Warn("Pub/Sub subscriber lease unavailable", slog.Any("error", err))
		}
		s.stop()
		return every
	}
	now := s.p.w.o.Now()
	s.retryDue(ctx)
	s.mu.Lock()
	running, retryAt, pollAt, catchUp := s.cancel != nil, s.retryAt, s.pollAt, s.catchUpDue
	s.mu.Unlock()
	if running {
		if catchUp {
			s.catchUp(ctx)
		}
		return every
	}
	if !now.Before(retryAt) {
		s.start(ctx)
		return every
	}
	if !now.Before(pollAt) {
		if _, err := s.poll(ctx); err != nil {
			s.log.Warn("fallback poll failed", slog.Any("error", err))
		}
		s.mu.Lock()
		s.polled, s.pollAt = now, now.Add(s.p.every)
		pollAt = s.pollAt
		s.mu.Unlock()
	}
	return min(retryAt.Sub(now), pollAt.Sub(now), every)
}

// stop ends the running stream, if any.
func (s *Subscription) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
}

// start runs one stream in the background.
func (s *Subscription) start(ctx context.Context) {
	sctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel = cancel
	s.gen++
	gen := s.gen
	s.counts.Streams++
	s.mu.Unlock()
	go func() {
		err := s.stream(sctx)
		s.streamEnded(gen, err)
		cancel()
	}()
}

// streamEnded notes how stream gen ended and when the next may start.
func (s *Subscription) streamEnded(gen int, err error) {
	now := s.p.w.o.Now()
	s.mu.Lock()
	defer func() {
		s.mu.Unlock()
		select {
		case s.ended <- struct{}{}:
		default:
		}
	}()
	if s.gen != gen || s.cancel == nil {
		return // stopped (lease lost, or Run ended), or a newer stream runs
	}
	s.cancel = nil
	switch {
	case err == nil:
		s.fails, s.retryAt = 0, now // closed by the server: subscribe again at once
	case errors.Is(err, pubsub.ErrReplayID):
		s.log.Warn("Salesforce refused the stored replay id: subscribing from the latest event after a catch-up poll",
			slog.Any("error", err))
		s.fails, s.retryAt = 0, now
	default:
		s.counts.Failed++
		backoff := SubscribeBackoffStart << min(s.fails, 20)
		s.fails++
		s.retryAt = now.Add(min(backoff, SubscribeBackoffMax))
		s.pollAt = now // the fallback poll runs at once, but at most once a poll interval
		if next := s.polled.Add(s.p.every); next.After(now) {
			s.pollAt = next
		}
		s.log.Warn("Pub/Sub subscription failed: polling until it is back", slog.Any("error", err),
			slog.Duration("retry_in", min(backoff, SubscribeBackoffMax)))
	}
}

// stream subscribes after the stored replay id, or at LATEST after a
// catch-up poll when there is none yet, and handles every batch until the
// stream ends.
func (s *Subscription) stream(ctx context.Context) error {
	if err := s.checkTopic(ctx); err != nil {
		return err
	}
	after, err := s.o.State.ReplayID(ctx)
	if err != nil {
		return err
	}
	o := pubsub.SubscribeOptions{Topic: ChangeEventTopic, After: after, Batch: s.o.Batch}
	if after == nil {
		// No replay id stored yet (the first stream, or every earlier one
		// ended before a batch or keepalive): EARLIEST would deliver every
		// event of the last 72 hours again ("Message Durability"), each
		// counted against the delivery allocation and each Discarded one
		// costing a Composite call. Subscribed at LATEST, a poll now covers
		// what changed before; until it ran and succeeded, no replay id is
		// stored (batch), so a stream that fails first leaves none behind.
		o.Opened = func() error {
			s.mu.Lock()
			s.catchUpDue = true
			s.mu.Unlock()
			s.catchUp(ctx)
			return nil
		}
	}
	err = s.o.PubSub.Subscribe(ctx, o, s.batch)
	if errors.Is(err, pubsub.ErrReplayID) {
		if ferr := s.o.State.ForgetReplayID(context.WithoutCancel(ctx)); ferr != nil {
			return ferr
		}
	}
	return err
}

// checkTopic asks once per process whether the integration user may
// subscribe to the topic ("GetTopic RPC Method": can_subscribe), so that a
// missing Change Data Capture selection or permission is named in the log.
func (s *Subscription) checkTopic(ctx context.Context) error {
	s.mu.Lock()
	ok := s.topicOK
	s.mu.Unlock()
	if ok {
		return nil
	}
	info, err := s.o.PubSub.Topic(ctx, ChangeEventTopic)
	if err != nil {
		return err
	}
	if !info.GetCanSubscribe() {
		return fmt.Errorf("salesforce: the integration user may not subscribe to %s: deploy force-app (its "+
			"ChangeEvents channel member) and check %s", ChangeEventTopic, IntegrationPermissionSet)
	}
	s.mu.Lock()
	s.topicOK = true
	s.mu.Unlock()
	return nil
}
