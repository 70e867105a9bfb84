package salesforce

import (
	"context"
	"testing"
	"time"
)

// hookReplayer calls before ahead of every replay of next.
type hookReplayer struct {
	next   Replayer
	before func()
}

func (h hookReplayer) ReplayOne(ctx context.Context, id, by string) (string, error) {
	h.before()
	return h.next.ReplayOne(ctx, id, by)
}

// TestReprocessPollRenewsItsLock: a poll of many requests takes longer
// than its lock's two intervals (each replay here takes half an interval,
// on the injected clock and Redis's); it renews the lock as it goes, so
// another replica polling meanwhile never gets it, and every request is
// replayed once.
func TestReprocessPollRenewsItsLock(t *testing.T) {
	e := newEnv(t)
	roots := e.settledDeadLetters(8)
	for _, root := range roots {
		e.request(root)
	}
	counter := newCounting(e.replays("replays"))
	_, b := e.replica("replica-b", counter)
	ctx := ctxT(t)
	var bPolled int
	var a *Reprocessor
	_, a = e.replica("replica-a", hookReplayer{next: counter, before: func() {
		e.clk.Advance(a.every / 2)
		e.mini.FastForward(a.every / 2)
		if rep, err := b.Poll(ctx); err != nil || rep.Polled {
			bPolled++
		}
	}})
	rep := poll(t, a)
	if rep.Replayed != len(roots) {
		t.Fatalf("A's poll: %+v, want %d replayed", rep, len(roots))
	}
	if bPolled != 0 {
		t.Errorf("B polled %d times during A's poll of %v (the lock lasts %v)", bPolled,
			time.Duration(len(roots))*a.every/2, 2*a.every)
	}
	counter.wantOnce(t, roots)
}
