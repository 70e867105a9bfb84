// Package limit holds the limits that keep one caller from exhausting the
// proxy for every other (contract §10): a memory budget for the bytes held at
// once (Budget, Holder), a connection cap per listener that closes idle
// connections first (Listener), and the read deadline of request bodies
// (BodyDeadline). It knows nothing of callouts; the ingress, the forwarder
// and the composition root use it.
package limit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrOverloaded is what Acquire returns when the budget had no room within
// the wait: the caller answers 503 overloaded with Retry-After.
var ErrOverloaded = errors.New("limit: the memory budget (max_inflight_bytes) is exhausted")

// ErrShareExceeded is what Acquire returns when the holder's organisation
// held its share of the budget (max_inflight_bytes_per_issuer) while the
// budget was under pressure, for the whole wait. It matches ErrOverloaded
// too (errors.Is): the caller answers 503 overloaded, naming the share.
var ErrShareExceeded = fmt.Errorf("%w: the organisation's share of it (max_inflight_bytes_per_issuer) is full", ErrOverloaded)

// SmallBytes is the most a Holder may hold in all and still draw on the
// whole budget; a Holder holding more draws only on the budget minus its
// headroom (one eighth), so a flood of large bodies leaves room for every
// small callout (a read, a small write: its headers, body and response).
const SmallBytes = 64 << 10

// Budget counts the bytes of request and response bodies and request
// headers held in memory at once (limits.max_inflight_bytes). Reservations
// are made through Holders, one per request. A nil *Budget has no limit.
// It is safe for concurrent use.
//
// Organisation shares (contract §10, docs/limits.md): a holder assigned to
// an organisation (Holder.Assign, the caller's JWT issuer) counts toward
// that organisation's bytes too. While the budget is under pressure — more
// than half of it would be held — an organisation that would hold more
// than its share is refused (ErrShareExceeded), however much room is left,
// so the room that is left stays for the others. Below half the budget no
// share applies: one busy organisation alone may use what nobody else
// needs.
type Budget struct {
	max      int64 // bytes; small holders may fill it
	largeMax int64 // bytes; what larger holders may fill
	pressure int64 // bytes; past it, shares apply
	wait     time.Duration

	refused, shareRefused prometheus.Counter

	mu      sync.Mutex
	share   int64 // bytes per organisation; 0: no share
	used    int64
	byOrg   map[string]int64 // bytes held per organisation; no zero entries
	changed chan struct{}    // closed and replaced on every release
}

// NewBudget returns a budget of max bytes whose Acquire waits at most
// wait for room, and in which, under pressure, no organisation may hold
// more than share bytes (limits.max_inflight_bytes_per_issuer; 0: no
// share, as with a single organisation). max must be positive.
func NewBudget(max int64, wait time.Duration, share int64) *Budget {
	return &Budget{max: max, largeMax: max - max/8, pressure: max / 2, share: share, wait: wait,
		byOrg: map[string]int64{}, changed: make(chan struct{}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callout_overloaded_total",
			Help: "Reservations refused because the memory budget (max_inflight_bytes) had no room within overload_wait, or the organisation's share of it was full.",
		}),
		shareRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callout_overloaded_share_total",
			Help: "Reservations refused because the organisation held its share of the memory budget (max_inflight_bytes_per_issuer) while the budget was more than half full; counted in callout_overloaded_total too.",
		})}
}

// Share is the bytes one organisation may hold under pressure
// (limits.max_inflight_bytes_per_issuer); 0 when no share applies.
func (b *Budget) Share() int64 { return b.read(func() int64 { return b.share }) }

// SetShare sets the bytes one organisation may hold under pressure (a
// reload's limits.max_inflight_bytes_per_issuer, resolved: a fair share
// follows auth.issuers); 0: no share. Bytes already held stay held.
func (b *Budget) SetShare(share int64) {
	b.mu.Lock()
	b.share = share
	b.mu.Unlock()
}

// OrgInUse is the number of bytes organisation org holds now.
func (b *Budget) OrgInUse(org string) int64 { return b.read(func() int64 { return b.byOrg[org] }) }

// Collectors are the budget's metrics: callout_inflight_bytes (bytes held
// now), callout_inflight_bytes_limit and callout_overloaded_total.
func (b *Budget) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "callout_inflight_bytes",
			Help: "Bytes of request and response bodies and request headers held in memory now.",
		}, func() float64 { return float64(b.InUse()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "callout_inflight_bytes_limit",
			Help: "The memory budget, limits.max_inflight_bytes.",
		}, func() float64 { return float64(b.max) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "callout_inflight_bytes_share",
			Help: "What one organisation may hold of the memory budget while it is more than half full, limits.max_inflight_bytes_per_issuer (0: no share).",
		}, func() float64 { return float64(b.Share()) }),
		b.refused, b.shareRefused,
	}
}

// InUse is the number of bytes reserved now.
func (b *Budget) InUse() int64 { return b.read(func() int64 { return b.used }) }

// read returns f's answer under the budget's lock; a nil budget (no memory
// limit) reads 0.
func (b *Budget) read(f func() int64) int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return f()
}

// Holder returns a new, empty holder: one request's share of the budget.
func (b *Budget) Holder() *Holder { return &Holder{b: b} }

// acquire reserves n bytes for a holder of org ("" for none) that will
// then hold total, waiting until ctx ends, deadline passes (zero: none) or
// the budget's wait has passed, whichever is first. Errors:
// ErrShareExceeded when org's share was what refused it last, else
// ErrOverloaded.
func (b *Budget) acquire(ctx context.Context, deadline time.Time, n, total int64, org string) error {
	limit := b.largeMax
	if total <= SmallBytes {
		limit = b.max
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		fits := b.used+n <= limit || (b.used == 0 && n <= b.max)
		overShare := b.overShare(org, n)
		if fits && !overShare {
			b.used += n
			if org != "" {
				b.byOrg[org] += n
			}
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		if timeout == nil {
			wait := b.wait
			if !deadline.IsZero() {
				wait = min(wait, time.Until(deadline))
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
			continue
		case <-timeout:
		case <-ctx.Done():
		}
		b.refused.Inc()
		if overShare {
			b.shareRefused.Inc()
			return ErrShareExceeded
		}
		return ErrOverloaded
	}
}

// overShare reports whether org reserving n more bytes would pass its
// share while the budget is under pressure. b.mu is held.
func (b *Budget) overShare(org string, n int64) bool {
	return org != "" && b.share > 0 && b.used+n > b.pressure && b.byOrg[org]+n > b.share
}

// release returns n bytes of org ("" for none) and wakes every waiter.
func (b *Budget) release(n int64, org string) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.take(org, n)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// take removes n bytes from org's count, dropping it at zero so the map
// holds only organisations holding bytes. b.mu is held.
func (b *Budget) take(org string, n int64) {
	if org == "" {
		return
	}
	if left := b.byOrg[org] - n; left > 0 {
		b.byOrg[org] = left
	} else {
		delete(b.byOrg, org)
	}
}

// assign moves n bytes held without an organisation (from) to org. b.mu is
// not held.
func (b *Budget) assign(from, to string, n int64) {
	if n == 0 || from == to {
		return
	}
	b.mu.Lock()
	b.take(from, n)
	if to != "" {
		b.byOrg[to] += n
	}
	b.mu.Unlock()
}

// Holder is one request's reservations in a Budget: every byte it acquires
// is held until Release. A Holder of a nil Budget, and a nil *Holder, hold
// nothing and never refuse. Safe for concurrent use.
type Holder struct {
	b    *Budget
	mu   sync.Mutex
	held int64
	org  string // "" until Assign
}

// Assign charges the holder, and everything it holds and will acquire, to
// organisation org (the caller's JWT issuer, known once its token is
// verified: the header bytes it acquired before move with it). It never
// refuses: a share is checked when bytes are acquired.
func (h *Holder) Assign(org string) {
	if h == nil || h.b == nil {
		return
	}
	h.mu.Lock()
	from, n := h.org, h.held
	h.org = org
	h.b.assign(from, org, n) // under h.mu, so a concurrent Release sees the new org
	h.mu.Unlock()
}

// Acquire reserves n more bytes, waiting for room at most the budget's
// wait (limits.overload_wait) or until ctx ends. While the holder holds at
// most SmallBytes in all it may fill the whole budget; beyond, seven
// eighths of it; and under pressure its organisation at most its share.
// Errors: ErrShareExceeded, ErrOverloaded; nothing is reserved then.
// Acquire and Assign of one holder are not called concurrently (one
// request's code path calls them in turn).
func (h *Holder) Acquire(ctx context.Context, n int64) error {
	return h.AcquireBy(ctx, time.Time{}, n)
}

// AcquireBy is Acquire that also stops waiting at deadline (zero: no
// deadline of its own): the ingress passes now + limits.overload_wait as a
// time instead of deriving a context with a timeout, whose context, timer
// and cancel func cost 4 allocations on every request, waiting or not. A
// deadline already past refuses at once when there is no room; a
// reservation that fits is made whatever the deadline.
func (h *Holder) AcquireBy(ctx context.Context, deadline time.Time, n int64) error {
	if h == nil || h.b == nil || n <= 0 {
		return nil
	}
	h.mu.Lock()
	total, org := h.held+n, h.org
	h.mu.Unlock()
	if err := h.b.acquire(ctx, deadline, n, total, org); err != nil {
		return err
	}
	h.mu.Lock()
	h.held += n
	h.mu.Unlock()
	return nil
}

// Held is the number of bytes the holder holds.
func (h *Holder) Held() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// Release returns everything the holder holds. It may be called more than
// once; the holder may acquire again afterwards.
func (h *Holder) Release() {
	if h == nil || h.b == nil {
		return
	}
	h.mu.Lock()
	n := h.held
	h.held = 0
	h.b.release(n, h.org) // under h.mu, so a concurrent Assign moves nothing twice
	h.mu.Unlock()
}

// holderKey is the context key of a request's Holder.
type holderKey struct{}

// WithHolder returns ctx carrying h, so code below the ingress (the
// forwarder buffering a response) reserves in the request's holder and the
// ingress releases it once the answer is written.
func WithHolder(ctx context.Context, h *Holder) context.Context {
	return context.WithValue(ctx, holderKey{}, h)
}

// HolderFrom returns the Holder of ctx, or nil.
func HolderFrom(ctx context.Context) *Holder {
	h, _ := ctx.Value(holderKey{}).(*Holder)
	return h
}
