package dispatch

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/attempt"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
)

// Store is what the dispatcher needs of the delay queue, in the domain's
// types. *redisstore.Store implements it.
type Store interface {
	// ClaimBatch claims due callouts of several endpoints under a lease, at
	// most total in all, one result per request in order.
	ClaimBatch(ctx context.Context, reqs []policy.ClaimRequest, total int) ([]policy.ClaimResult, error)
	Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error)
	// Reap returns up to limit of endpoint's expired leases to the due set
	// and returns their ids.
	Reap(ctx context.Context, endpoint string, limit int) ([]string, error)
	// Get reads a callout's record: the trace context a reaped callout was
	// accepted under, for its log line (contract §12 "log fields").
	Get(ctx context.Context, id string) (*policy.Callout, error)
}

// Refiller is a completion writer that can claim, in the script call that
// completes an attempt, the next due callouts of its queue
// (*redisstore.Completer): up to want under leases of lease. The claim
// runs after the completions of that call, behind an open gate only, and
// its result (the callouts leased to the caller, the gate it saw) comes
// with the completion's error too.
type Refiller interface {
	CompleteAndClaim(ctx context.Context, cl *policy.Claimed, c policy.Completion, want int,
		lease time.Duration) (policy.CompleteResult, policy.ClaimResult, error)
}

// Options configure a Dispatcher. Config, Store, Upstream, Metrics and
// Logger are required.
type Options struct {
	Config *config.Config
	Store  Store
	// Completions, optional, writes completions (*redisstore.Completer
	// pipelines those of a round); nil: Store.Complete. When it is a
	// Refiller, an attempt that ends claims its endpoint's next callouts
	// in its completion's script call (Dispatcher "Refills").
	Completions attempt.Completions
	Upstream    attempt.Upstream
	Metrics     *metrics.Metrics
	Logger      *slog.Logger
	// Ended, optional, is called after this replica ended a callout
	// (succeeded, dead-lettered) whose Salesforce writes the store queued in
	// the outbox; it must not block (the Salesforce writer's Wake). nil:
	// the endings are only logged.
	Ended func()
	// Stats, optional, counts every attempt and dead letter for the
	// console's charts (proxy/redisstore/stats); it must not block.
	Stats attempt.Stats
	// Breakers is told of breaker changes; nil: ignored.
	Breakers attempt.BreakerWatcher
	// Now is the clock (time.Now when nil); Rand the jitter source in
	// [0,1) (math/rand/v2 when nil).
	Now  func() time.Time
	Rand func() float64
	// Concurrency bounds attempts in flight in this replica. Default 64.
	// Ignored when Slots is given (its capacity).
	Concurrency int
	// Slots, optional, are the replica's dispatch slots and its attempts
	// in flight, shared with the Dispatcher of the configuration before
	// (NewSlots): after a reload the old Dispatcher's attempts run to
	// their end, and they count toward the new one's Concurrency, each
	// endpoint's max_concurrency and the kept slot, so a reload never
	// lets more attempts run at once. nil: slots of its own.
	Slots *Slots
	// PerEndpoint bounds attempts in flight to one endpoint in this replica
	// unless the endpoint sets max_concurrency. Default 16.
	PerEndpoint int
	// Batch is the most callouts claimed from one endpoint per round
	// (docs/limits.md). Default 16.
	Batch int
	// ClaimLinger is how long a freed slot may wait for others before the
	// round that refills it, while at least half of its endpoint's batch of
	// slots is still busy: the next claim then takes several callouts in
	// one script call instead of one per finished attempt (a
	// claim and its candidates pipeline cost two round trips whatever they
	// claim). A slot never waits longer than this, and not at all when half
	// the batch or more is free or nothing else is in flight. Default 2 ms;
	// negative: refill at once.
	ClaimLinger time.Duration
	// Idle is the backstop: the longest Run waits after a round that left
	// no work it could see (nothing more due than it claimed, or no free
	// slot) when nothing wakes it sooner — a Wake (this replica
	// enqueued, or a slot freed), a message on Wakeups (another replica's
	// enqueue, reap or release of held callouts), or the earliest due time
	// or lease expiry the round saw. It bounds the schedule lag of work a
	// lost wake message announced. Default 1s.
	Idle time.Duration
	// ReapEvery is the longest an endpoint goes without a look at its
	// expired leases besides the lease expiries the rounds see (each round
	// reads every queue's earliest lease). Default 10s.
	ReapEvery time.Duration
	// Wakeups, optional, delivers a value when another replica published
	// new due work (proxy/redisstore/wake).
	Wakeups <-chan struct{}
	// TracerProvider, optional, makes a span of every attempt, in the
	// trace the callout was accepted under (its stored trace context), on
	// whichever replica and however late it runs (docs/tracing.md); nil or
	// a no-op provider: tracing off. Propagator is the one the forwarder
	// injects with (W3C Trace Context when nil).
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// Dispatcher claims due callouts fairly across endpoints and makes their
// attempts with bounded concurrency. Every replica runs one; the store's
// leases make sure no callout runs in two places at once.
type Dispatcher struct {
	o        Options
	slots    chan struct{}  // the Slots' own
	mu       *sync.Mutex    // the Slots' own: it guards the fields below too
	inFlight map[string]int // endpoint -> attempts in flight here (the Slots')
	// orgInFlight: endpoint -> issuer -> attempts in flight here (orgCap; the Slots')
	orgInFlight map[string]map[string]int
	shutTill    map[string]time.Time // endpoint -> skip claims until (a shut gate, at most GateRecheck)
	// wasShut and reopenedAt: when this replica last saw an endpoint's gate
	// open again after seeing it shut. Schedule lag counts from there for
	// callouts that fell due while the gate held them: waiting behind a
	// breaker or a pause is the policy at work, not dispatcher lag.
	wasShut    map[string]bool
	reopenedAt map[string]time.Time
	reapedAt   map[string]time.Time
	leaseAt    map[string]time.Time // endpoint -> earliest lease expiry seen
	next       int                  // round-robin start
	wakeAt     time.Time            // earliest due time or lease expiry the last round saw
	lingering  bool                 // a ClaimLinger wake is armed
	more       bool                 // the last round may have left due work for free slots
	wg         sync.WaitGroup
	wake       chan struct{}
	tr         *tracing.Tracer // nil: tracing off
	attempts   *attempt.Runner
	refill     Refiller    // nil: no refills (Options.Completions is no Refiller)
	stopping   atomic.Bool // Run's context ended: no more refills
	share      int         // an endpoint's fair share of the slots: Concurrency / endpoints
}

// Slots are a replica's dispatch slots and its attempts in flight, by
// endpoint and by organisation, for the Dispatchers of one configuration
// after another (Options.Slots). Safe for concurrent use.
type Slots struct {
	mu          sync.Mutex
	slots       chan struct{}
	inFlight    map[string]int
	orgInFlight map[string]map[string]int
}

// NewSlots returns Slots for at most concurrency attempts in flight at once
// (default 64 when ≤ 0).
func NewSlots(concurrency int) *Slots {
	return &Slots{slots: make(chan struct{}, orDefault(concurrency, 64)), inFlight: map[string]int{},
		orgInFlight: map[string]map[string]int{}}
}

// New returns a Dispatcher with o's defaults filled in.
func New(o Options) *Dispatcher {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Completions == nil {
		o.Completions = o.Store
	}
	o.Concurrency = orDefault(o.Concurrency, 64)
	o.PerEndpoint = orDefault(o.PerEndpoint, 16)
	o.Batch = orDefault(o.Batch, 16)
	if o.Idle <= 0 {
		o.Idle = time.Second
	}
	if o.ClaimLinger == 0 {
		o.ClaimLinger = DefaultClaimLinger
	}
	if o.ReapEvery <= 0 {
		o.ReapEvery = 10 * time.Second
	}
	if o.Slots == nil {
		o.Slots = NewSlots(o.Concurrency)
	}
	refill, _ := o.Completions.(Refiller)
	tr := tracing.New(o.TracerProvider, o.Propagator)
	d := &Dispatcher{
		o: o, slots: o.Slots.slots, mu: &o.Slots.mu, inFlight: o.Slots.inFlight, orgInFlight: o.Slots.orgInFlight,
		shutTill: map[string]time.Time{}, reapedAt: map[string]time.Time{}, leaseAt: map[string]time.Time{},
		wasShut: map[string]bool{}, reopenedAt: map[string]time.Time{},
		wake: make(chan struct{}, 1), tr: tr,
		attempts: &attempt.Runner{Config: o.Config, Upstream: o.Upstream, Completions: o.Completions,
			Breakers: o.Breakers, Metrics: o.Metrics, Logger: o.Logger, Tracer: tr, Now: o.Now, Rand: o.Rand,
			Ended: o.Ended, Stats: o.Stats},
		refill: refill,
		share:  cap(o.Slots.slots) / max(len(o.Config.EndpointNames()), 1),
	}
	if refill != nil {
		d.attempts.Completions = refilling{d: d, plain: o.Completions}
	}
	return d
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// DefaultClaimLinger is Options.ClaimLinger's default.
const DefaultClaimLinger = 2 * time.Millisecond

// Wake makes a waiting Run start its next round now (after this replica
// scheduled something due immediately). It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for the attempts in flight to
// complete (each is bounded by its endpoint's attempt limit) and returns.
// After a round that may have left due work for free slots (an endpoint
// claimed all it asked for and has slots left) it starts the next at once;
// otherwise it waits for a wake (Wake, a freed slot, Wakeups), the
// earliest due time or lease expiry that round saw, or Idle, whichever
// comes first — no polling while idle, and not one round per finished
// attempt while busy.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.stopping.Store(true)
			d.wg.Wait()
			return
		case <-t.C:
		case <-d.wake:
		case <-d.o.Wakeups:
		}
		d.Round(ctx)
		wait := time.Duration(0)
		if !d.takeMore() {
			wait = d.o.Idle
			d.mu.Lock()
			if !d.wakeAt.IsZero() {
				wait = min(wait, max(d.wakeAt.Sub(d.o.Now()), time.Millisecond))
			}
			d.mu.Unlock()
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// Wait blocks until every attempt started by Round has completed.
func (d *Dispatcher) Wait() { d.wg.Wait() }

// Round visits every endpoint once, starting one further each round:
// reaps its expired leases when due, sizes its claim to its free slots
// (its max_concurrency or PerEndpoint, and Batch), then claims for all of
// them in one batched store call bounded by the replica's free slots
// (Concurrency), fewest attempts in flight first, and starts the
// attempts. It returns how many it claimed. Attempts run in goroutines;
// Wait waits for them.
func (d *Dispatcher) Round(ctx context.Context) int {
	d.mu.Lock()
	d.more = false
	d.mu.Unlock()
	names := d.o.Config.EndpointNames()
	if len(names) == 0 {
		return 0
	}
	start := d.next % len(names)
	d.next++
	var wants []want
	eps := make([]*config.Endpoint, 0, len(names))
	for i := range names {
		ep, _ := d.o.Config.Endpoint(names[(start+i)%len(names)])
		d.reap(ctx, ep)
		eps = append(eps, ep)
	}
	// The slots this round may fill are taken now, with the endpoints'
	// counts of attempts in flight, under one lock: a refill (an attempt's
	// completion claiming its successors) meanwhile sees them taken, so
	// neither can exceed a bound the other counted on. What the claim does
	// not use is given back after it.
	d.mu.Lock()
	for _, ep := range eps {
		if n := d.freeLocked(ep); n > 0 {
			wants = append(wants, want{ep, n, d.inFlight[ep.Name]})
		}
	}
	asked := 0
	for _, w := range wants {
		d.inFlight[w.ep.Name] += w.n
		asked += w.n
	}
	slots := d.takeSlots(asked)
	d.wakeAt = time.Time{}
	d.mu.Unlock()
	// Fairness (docs/limits.md): when due work exceeds the free slots,
	// each slot goes to the endpoint with the fewest attempts in flight
	// here among those with work due (rotation breaks ties), so a hung
	// endpoint holding slots never starves the others of the ones freed.
	sort.SliceStable(wants, func(i, j int) bool { return wants[i].inFlight < wants[j].inFlight })
	reqs := make([]policy.ClaimRequest, len(wants))
	eps = eps[:len(wants)]
	for i, w := range wants {
		reqs[i] = policy.ClaimRequest{Endpoint: w.ep.Name, ClaimOptions: policy.ClaimOptions{
			Batch: w.n, Lease: w.ep.Rules().Lease(), Breaker: w.ep.Rules().Breaker()}}
		if c := d.orgCap(w.ep); c > 0 {
			d.mu.Lock()
			reqs[i].OrgCap, reqs[i].OrgInFlight = c, maps.Clone(d.orgInFlight[w.ep.Name])
			d.mu.Unlock()
		}
		eps[i] = w.ep
	}
	if len(reqs) == 0 || slots == 0 {
		d.giveBack(slots, wants...)
		return 0
	}
	res, err := d.o.Store.ClaimBatch(ctx, reqs, slots)
	if err != nil {
		d.o.Logger.Warn("claim failed", slog.Int("endpoints", len(reqs)), slog.Any("error", err))
	}
	// Each endpoint's claimed start on the slots taken for them, within
	// its n and the slots taken in all (a store that claimed more than it
	// was asked: those wait for slots of their own); the rest go back.
	claimed, more, left := 0, false, slots
	taken := make([]int, len(wants))
	unused := make([]want, len(wants))
	for i, w := range wants {
		unused[i] = w
		if i < len(res) {
			taken[i] = min(len(res[i].Claimed), w.n, left)
			left -= taken[i]
			unused[i].n -= taken[i]
		}
	}
	d.giveBack(left, unused...)
	for i, r := range res {
		n := d.claimed(ctx, eps[i], r, taken[i])
		claimed += n
		// It got all it asked for, or saw more due than it got (another
		// replica was first), and still has free slots: more may be due.
		// Never after a failed claim: that waits for the next wake or Idle.
		more = more || err == nil && ((n > 0 && n == reqs[i].Batch) || r.MoreDue) && d.free(eps[i]) > 0
	}
	d.mu.Lock()
	d.more = more
	d.mu.Unlock()
	return claimed
}

// takeMore reports whether the last round left an endpoint with free slots
// that claimed all it asked for or saw more due than it got (more may be
// due): Run starts the next round at once. Otherwise it waits for a freed
// slot (slotFreed), a wake or the earliest due time — not one round per
// finished attempt.
func (d *Dispatcher) takeMore() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.more
}

// reap returns ep's expired leases to the due set: when a round saw one
// of its leases expire, and at least every ReapEvery.
func (d *Dispatcher) reap(ctx context.Context, ep *config.Endpoint) {
	now := d.o.Now()
	d.mu.Lock()
	at := d.leaseAt[ep.Name]
	due := now.Sub(d.reapedAt[ep.Name]) >= d.o.ReapEvery || (!at.IsZero() && !at.After(now))
	if due {
		d.reapedAt[ep.Name] = now
		delete(d.leaseAt, ep.Name)
	}
	d.mu.Unlock()
	if !due {
		return
	}
	ids, err := d.o.Store.Reap(ctx, ep.Name, 100)
	if err != nil {
		d.o.Logger.Warn("reap failed", slog.String("endpoint", ep.Name), slog.Any("error", err))
		return
	}
	for _, id := range ids {
		// The caller's trace_id with the callout_id (contract §12 "log
		// fields"): one more read, for a lease that expired — a replica
		// lost mid-attempt, rare. A failed read leaves the trace_id out.
		var stored string
		if c, err := d.o.Store.Get(ctx, id); err == nil {
			stored = c.TraceContext
		}
		d.o.Logger.LogAttrs(logx.WithCallout(logx.WithTraceContext(ctx, stored), id), slog.LevelWarn,
			"lease expired; callout returned to the queue", slog.String("endpoint", ep.Name))
	}
}

// GateRecheck is the longest a dispatcher trusts a shut gate it learnt
// from a claim before asking Redis again (ARCHITECTURE.md "Hot-path budget": gate
// state may be cached briefly). A pause or an open breaker is skipped
// without a round trip until then, yet an admin's reset (calloutctl
// endpoints reset) or enable takes effect within GateRecheck instead of at
// the old probe time or pause end (up to retry_after_cap).
const GateRecheck = time.Second

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// limit is the most attempts to ep in flight in this replica.
func (d *Dispatcher) limit(ep *config.Endpoint) int {
	if ep.MaxConcurrency > 0 {
		return ep.MaxConcurrency
	}
	return d.o.PerEndpoint
}

// orgCap is the most attempts to ep this replica runs at once but for the
// kept slot (policy.ClaimOptions.OrgCap): all but one of its slots when
// several organisations may call ep, the last one only for an organisation
// with none in flight — one or several organisations' hanging attempts
// holding the others delay another's first attempt by none, not by an
// attempt limit (contract §10 "Fair dispatch", docs/limits.md). 0 (no
// cap) for an endpoint of one organisation, or of one slot.
func (d *Dispatcher) orgCap(ep *config.Endpoint) int {
	if limit := d.limit(ep); limit > 1 && d.o.Config.Organisations(ep) > 1 {
		return limit - 1
	}
	return 0
}

// free is how many more attempts to ep may start now.
func (d *Dispatcher) free(ep *config.Endpoint) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.freeLocked(ep)
}

// freeLocked is free with d.mu held.
func (d *Dispatcher) freeLocked(ep *config.Endpoint) int {
	if d.o.Now().Before(d.shutTill[ep.Name]) {
		return 0
	}
	return max(0, min(d.limit(ep)-d.inFlight[ep.Name], cap(d.slots)-len(d.slots), d.o.Batch))
}

// takeSlots takes up to n free slots without waiting and returns how many
// it took; d.mu is held (so no other taker races it: start, which waits
// for a slot, takes one only outside a round's or a refill's reservation).
func (d *Dispatcher) takeSlots(n int) int {
	for i := range n {
		select {
		case d.slots <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// giveBack returns slots taken slots and each want's n counted attempts
// in flight that a claim did not use.
func (d *Dispatcher) giveBack(slots int, ws ...want) {
	d.mu.Lock()
	for _, w := range ws {
		d.inFlight[w.ep.Name] -= w.n
	}
	d.mu.Unlock()
	for range slots {
		<-d.slots
	}
}

// want is an endpoint's part of a claim: n slots, counted in its attempts
// in flight while the claim runs; inFlight its attempts in flight before.
type want struct {
	ep       *config.Endpoint
	n        int
	inFlight int
}

// claimed takes in one endpoint's part of a batched claim: the gate it
// saw, the dead letters a disabled gate made, the earliest due time and
// lease expiry (for Run's wait and the reaper), and starts the attempts:
// the first taken of them on slots the round took for them (counted in
// flight), any more waiting for slots of their own.
func (d *Dispatcher) claimed(ctx context.Context, ep *config.Endpoint, res policy.ClaimResult, taken int) int {
	d.noteClaim(ep, res)
	for _, id := range res.DeadLettered {
		d.attempts.DeadLettered(ctx, ep, id,
			policy.CompleteResult{State: policy.DeadLettered, Reason: policy.DeadLetterEndpointDisabled})
	}
	for i, cl := range res.Claimed {
		if i < taken {
			d.launch(ep, cl)
		} else {
			d.start(ep, cl)
		}
	}
	return len(res.Claimed)
}

// noteClaim takes in what a claim saw of ep: its gate (a shut one is not
// claimed from until it may open, at most GateRecheck), when its
// callouts reopened, and the earliest due time and lease expiry.
func (d *Dispatcher) noteClaim(ep *config.Endpoint, res policy.ClaimResult) {
	d.mu.Lock()
	switch {
	case res.Gate.Shut():
		d.wasShut[ep.Name] = true
		if !res.Gate.Until.IsZero() {
			d.shutTill[ep.Name] = minTime(res.Gate.Until, d.o.Now().Add(GateRecheck))
		}
	case d.wasShut[ep.Name] && len(res.Claimed) > 0:
		d.wasShut[ep.Name] = false
		d.reopenedAt[ep.Name] = d.o.Now()
	}
	for _, at := range []time.Time{res.NextDueAt, res.LeaseExpiresAt, d.shutTill[ep.Name]} {
		if at.After(d.o.Now()) && (d.wakeAt.IsZero() || at.Before(d.wakeAt)) {
			d.wakeAt = at
		}
	}
	if !res.LeaseExpiresAt.IsZero() {
		d.leaseAt[ep.Name] = res.LeaseExpiresAt
	}
	d.mu.Unlock()
}

// start runs one claimed attempt in its own goroutine, waiting for a slot.
func (d *Dispatcher) start(ep *config.Endpoint, cl *policy.Claimed) {
	d.slots <- struct{}{}
	d.mu.Lock()
	d.inFlight[ep.Name]++
	d.mu.Unlock()
	d.launch(ep, cl)
}

// running is one attempt in flight, as its completion (refilling) finds it
// in its context: its endpoint and callout, and whether a callout its
// completion claimed took over its slot (kept) or it left ep with due
// work it did not claim (short).
type running struct {
	ep          *config.Endpoint
	cl          *policy.Claimed
	kept, short bool
}

// runKey is the context key of an attempt's *running.
type runKey struct{}

// launch runs cl's attempt in its own goroutine on a slot already taken
// and counted in ep's attempts in flight. Its end gives the slot back —
// unless a callout its completion claimed took it over (refilling) — and
// asks for a round (slotFreed).
func (d *Dispatcher) launch(ep *config.Endpoint, cl *policy.Claimed) {
	d.mu.Lock()
	byOrg := d.orgInFlight[ep.Name]
	if byOrg == nil {
		byOrg = map[string]int{}
		d.orgInFlight[ep.Name] = byOrg
	}
	byOrg[cl.Issuer]++
	d.mu.Unlock()
	run := &running{ep: ep, cl: cl}
	d.wg.Add(1)
	go func() {
		defer func() {
			d.mu.Lock()
			if !run.kept {
				d.inFlight[ep.Name]--
			}
			if byOrg[cl.Issuer]--; byOrg[cl.Issuer] <= 0 {
				delete(byOrg, cl.Issuer)
			}
			d.mu.Unlock()
			if !run.kept {
				<-d.slots
			}
			d.wg.Done()
			if !run.kept || run.short {
				d.slotFreed(ep)
			}
		}()
		// Detached from Run's context: an attempt under way finishes and
		// is recorded even while the replica shuts down.
		ctx := context.WithoutCancel(context.Background())
		if d.refill != nil {
			ctx = context.WithValue(ctx, runKey{}, run)
		}
		d.attempt(ctx, ep, cl)
	}()
}

// refilling is the attempt runner's completion writer when
// Options.Completions is a Refiller: a dispatched attempt's completion
// also claims its endpoint's next callouts (Refills).
type refilling struct {
	d     *Dispatcher
	plain attempt.Completions
}

// Complete completes cl; for an attempt this Dispatcher started that ends
// (not an inline retry) it asks the same script call to claim up to the
// slots the endpoint may fill now, the one this attempt frees included
// (refillWant), and starts what it claimed: the first on this attempt's
// slot, the rest on the slots taken for them.
func (r refilling) Complete(ctx context.Context, cl *policy.Claimed, c policy.Completion) (policy.CompleteResult, error) {
	d := r.d
	run, _ := ctx.Value(runKey{}).(*running)
	if run == nil || run.cl != cl || run.kept || c.Action == policy.ActionRetryInline {
		return r.plain.Complete(ctx, cl, c)
	}
	extra, ok := d.refillWant(run.ep)
	if !ok {
		return r.plain.Complete(ctx, cl, c)
	}
	res, next, err := d.refill.CompleteAndClaim(ctx, cl, c, 1+extra, run.ep.Rules().Lease())
	d.refilled(run, next, extra)
	return res, err
}

// refillWant is how many slots beyond its own an attempt of ep that ends
// may fill with its completion's claim, taken now with ep's count of
// attempts in flight; ok false: none, not even its own (the replica stops,
// ep's gate is shut, ep has several organisations — their fair shares are
// ClaimBatch's — or ep holds its fair share of the slots or more). The
// fair share: Concurrency / configured endpoints, so an endpoint that
// refills its own slots never keeps from another the share the fewest-
// first rule of Round gives it; slots beyond it go through Round.
func (d *Dispatcher) refillWant(ep *config.Endpoint) (extra int, ok bool) {
	if d.stopping.Load() || d.o.Config.Organisations(ep) > 1 {
		return 0, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.o.Now().Before(d.shutTill[ep.Name]) {
		return 0, false
	}
	in := d.inFlight[ep.Name] // this attempt included
	room := min(d.limit(ep), d.share) - in
	if room < 0 {
		return 0, false
	}
	extra = d.takeSlots(min(room, d.o.Batch-1))
	d.inFlight[ep.Name] += extra
	return extra, true
}

// refilled starts what run's completion claimed (next): the first on
// run's slot, up to extra more on the slots refillWant took, and gives
// back the slots it did not use. A claim that left slots unused (the
// queue is empty, another replica was first, the gate shut) marks run
// short: its end asks for a round, which looks at every endpoint.
func (d *Dispatcher) refilled(run *running, next policy.ClaimResult, extra int) {
	ep := run.ep
	d.noteClaim(ep, next)
	got := next.Claimed[:min(len(next.Claimed), 1+extra)]
	used := max(len(got)-1, 0)
	d.giveBack(extra-used, want{ep: ep, n: extra - used})
	for i, cl := range got {
		if i == 0 {
			d.mu.Lock()
			run.kept = true
			d.mu.Unlock()
		}
		d.launch(ep, cl)
	}
	// Claimed over what was asked (never, by the store's contract): they
	// wait for slots of their own.
	for _, cl := range next.Claimed[len(got):] {
		d.start(ep, cl)
	}
	run.short = len(got) < 1+extra
}

// slotFreed starts the next round after an attempt to ep freed its slot,
// instead of after Run's idle wait, so a busy endpoint is refilled: at
// once when half of its batch of slots (or more) is free or nothing else
// of it is in flight, else within ClaimLinger, so that the slots freed
// meanwhile are claimed together.
func (d *Dispatcher) slotFreed(ep *config.Endpoint) {
	if d.o.ClaimLinger < 0 {
		d.Wake()
		return
	}
	limit := d.limit(ep)
	d.mu.Lock()
	busy := d.inFlight[ep.Name]
	if busy == 0 || 2*(limit-busy) >= min(limit, d.o.Batch) {
		d.mu.Unlock()
		d.Wake()
		return
	}
	arm := !d.lingering
	d.lingering = true
	d.mu.Unlock()
	if arm {
		time.AfterFunc(d.o.ClaimLinger, func() {
			d.mu.Lock()
			d.lingering = false
			d.mu.Unlock()
			d.Wake()
		})
	}
}

// attempt makes cl's attempt with the one attempt runner (proxy/attempt)
// and counts its schedule lag when it was dispatched; the slot is freed by
// start. Traced, it joins the trace cl was accepted under.
func (d *Dispatcher) attempt(ctx context.Context, ep *config.Endpoint, cl *policy.Claimed) {
	lag := d.lag(ep, cl)
	res := d.attempts.Run(d.tr.Resume(ctx, cl.TraceContext), attempt.Call{Endpoint: ep, Claimed: cl,
		Request: &forward.Request{Method: cl.Method, Path: cl.Path, RawQuery: cl.Query, Header: cl.Header, Body: cl.Body},
		Mode:    tracing.ModeDispatched})
	if res.Completion.Attempt != nil {
		d.o.Metrics.ScheduleLag.Observe(lag.Seconds())
	}
}

// lag is how late cl was claimed: from its due time, or from when this
// replica saw its endpoint's gate reopen when that came later (a callout
// held behind a breaker or a pause), never negative.
func (d *Dispatcher) lag(ep *config.Endpoint, cl *policy.Claimed) time.Duration {
	d.mu.Lock()
	from := cl.DueAt
	if r := d.reopenedAt[ep.Name]; r.After(from) {
		from = r
	}
	d.mu.Unlock()
	return max(0, cl.StartedAt.Sub(from))
}
