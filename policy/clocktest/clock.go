// Package clocktest is the one test clock of the project: a manual clock
// that tests inject wherever production code takes `Now func() time.Time`
// (and `Sleep func(ctx, d) error` for pacing), so no test waits on wall
// time (STYLE.md habit 2). It imports nothing of ours.
package clocktest

import (
	"context"
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use. Its zero value reads
// the zero time; New starts it at a given instant. Time moves only by
// Advance, Set and Sleep.
type Clock struct {
	mu      sync.Mutex
	t       time.Time
	slept   time.Duration
	gate    time.Time
	blocked chan struct{}
	release chan struct{}
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (backward when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Slept is the total of every Sleep so far.
func (c *Clock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

// GateAt makes the first Sleep that would reach at block until the returned
// release function is called (it may be called more than once); blocked is
// closed when that Sleep blocks, so a test can act at an exact point of a
// paced loop.
func (c *Clock) GateAt(at time.Time) (blocked <-chan struct{}, release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate, c.blocked, c.release = at, make(chan struct{}), make(chan struct{})
	return c.blocked, sync.OnceFunc(func() { close(c.release) })
}

// Sleep advances the clock by d at once and returns ctx.Err(); a Sleep that
// would reach an armed gate (GateAt) first blocks until it is released or
// ctx ends (then it returns ctx.Err() without advancing).
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	if !c.gate.IsZero() && !c.t.Add(d).Before(c.gate) {
		c.gate = time.Time{}
		blocked, release := c.blocked, c.release
		c.mu.Unlock()
		close(blocked)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.slept += d
	return ctx.Err()
}
