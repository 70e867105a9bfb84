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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrOverloaded is what Acquire returns when the budget had no room within
// the wait: the caller answers 503 overloaded with Retry-After.
var ErrOverloaded = errors.New("limit: the memory budget (max_inflight_bytes) is exhausted")

// SmallBytes is the most a Holder may hold in all and still draw on the
// whole budget; a Holder holding more draws only on the budget minus its
// headroom (one eighth), so a flood of large bodies leaves room for every
// small callout (a read, a small write: its headers, body and response).
const SmallBytes = 64 << 10

// Budget counts the bytes of request and response bodies and request
// headers held in memory at once (limits.max_inflight_bytes). Reservations
// are made through Holders, one per request. A nil *Budget has no limit.
// It is safe for concurrent use.
type Budget struct {
	max      int64 // bytes; small holders may fill it
	largeMax int64 // bytes; what larger holders may fill
	wait     time.Duration

	refused prometheus.Counter

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced on every release
}

// NewBudget returns a budget of max bytes whose Acquire waits at most
// wait for room. max must be positive.
func NewBudget(max int64, wait time.Duration) *Budget {
	return &Budget{max: max, largeMax: max - max/8, wait: wait, changed: make(chan struct{}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callout_overloaded_total",
			Help: "Reservations refused because the memory budget (max_inflight_bytes) had no room within overload_wait.",
		})}
}

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
		b.refused,
	}
}

// InUse is the number of bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Holder returns a new, empty holder: one request's share of the budget.
func (b *Budget) Holder() *Holder { return &Holder{b: b} }

// acquire reserves n bytes for a holder that will then hold total, waiting
// until ctx ends or the budget's wait has passed. Errors: ErrOverloaded.
func (b *Budget) acquire(ctx context.Context, n, total int64) error {
	limit := b.largeMax
	if total <= SmallBytes {
		limit = b.max
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= limit || (b.used == 0 && n <= b.max) {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			b.refused.Inc()
			return ErrOverloaded
		case <-ctx.Done():
			b.refused.Inc()
			return ErrOverloaded
		}
	}
}

// release returns n bytes and wakes every waiter.
func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// Holder is one request's reservations in a Budget: every byte it acquires
// is held until Release. A Holder of a nil Budget, and a nil *Holder, hold
// nothing and never refuse. Safe for concurrent use.
type Holder struct {
	b    *Budget
	mu   sync.Mutex
	held int64
}

// Acquire reserves n more bytes, waiting for room at most the budget's
// wait (limits.overload_wait) or until ctx ends. While the holder holds at
// most SmallBytes in all it may fill the whole budget; beyond, seven
// eighths of it. Errors: ErrOverloaded; nothing is reserved then.
func (h *Holder) Acquire(ctx context.Context, n int64) error {
	if h == nil || h.b == nil || n <= 0 {
		return nil
	}
	h.mu.Lock()
	total := h.held + n
	h.mu.Unlock()
	if err := h.b.acquire(ctx, n, total); err != nil {
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
	h.mu.Unlock()
	h.b.release(n)
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
