package limit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestBudgetWaitsThenRefuses: a reservation that does not fit waits for a
// release up to the budget's wait, then fails with ErrOverloaded and
// reserves nothing; a release within the wait lets it through.
func TestBudgetWaitsThenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(1<<20, time.Second, 0)
		big := b.Holder()
		if err := big.Acquire(context.Background(), 900<<10); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		late := b.Holder()
		if err := late.Acquire(context.Background(), 200<<10); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("Acquire past the budget = %v, want ErrOverloaded", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %s, want the budget's wait of 1s", waited)
		}
		if late.Held() != 0 || b.InUse() != 900<<10 {
			t.Errorf("refused holder holds %d, budget in use %d", late.Held(), b.InUse())
		}
		done := make(chan error)
		go func() { done <- late.Acquire(context.Background(), 200<<10) }()
		time.Sleep(500 * time.Millisecond)
		big.Release()
		if err := <-done; err != nil {
			t.Fatalf("Acquire after a release within the wait = %v", err)
		}
		if b.InUse() != 200<<10 {
			t.Errorf("in use %d, want %d", b.InUse(), 200<<10)
		}
		late.Release()
		late.Release() // twice is harmless
		if b.InUse() != 0 {
			t.Errorf("in use %d after release, want 0", b.InUse())
		}
	})
}

// TestBudgetKeepsRoomForSmallCallouts: holders past SmallBytes may fill
// only seven eighths of the budget; a small callout still gets the rest.
func TestBudgetKeepsRoomForSmallCallouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(8<<20, time.Second, 0)
		var large []*Holder
		for {
			h := b.Holder()
			if err := h.Acquire(context.Background(), 1<<20); err != nil {
				break
			}
			large = append(large, h)
		}
		if len(large) != 7 {
			t.Fatalf("%d large holders of 1 MiB fit in 8 MiB, want 7", len(large))
		}
		for i := range 16 {
			small := b.Holder()
			if err := small.Acquire(context.Background(), SmallBytes); err != nil {
				t.Fatalf("small holder %d refused beside large ones: %v", i, err)
			}
		}
		if err := b.Holder().Acquire(context.Background(), 1); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("the budget is full, Acquire = %v", err)
		}
	})
}

// TestBudgetContextEndsWait: a wait ends with the caller's context.
func TestBudgetContextEndsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(1<<20, time.Hour, 0)
		if err := b.Holder().Acquire(context.Background(), 1<<20); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Holder().Acquire(ctx, 1); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("Acquire = %v, want ErrOverloaded at the context's end", err)
		}
	})
}

// TestBudgetDeadlineEndsWait: AcquireBy waits for room until its deadline
// when that comes before the budget's wait (the ingress's
// limits.overload_wait as a time), at once when it has passed, and never
// past the budget's wait; a reservation that fits ignores the deadline.
func TestBudgetDeadlineEndsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(1<<20, time.Hour, 0)
		if err := b.Holder().AcquireBy(context.Background(), time.Now().Add(-time.Second), 1<<20); err != nil {
			t.Fatalf("a reservation that fits, its deadline past = %v", err)
		}
		for _, tc := range []struct {
			name     string
			deadline time.Duration // from now
			want     time.Duration // waited
		}{
			{"deadline first", time.Second, time.Second},
			{"deadline past", -time.Second, 0},
			{"the budget's wait first", 2 * time.Hour, time.Hour},
		} {
			start := time.Now()
			if err := b.Holder().AcquireBy(context.Background(), start.Add(tc.deadline), 1); !errors.Is(err, ErrOverloaded) {
				t.Fatalf("%s: AcquireBy = %v, want ErrOverloaded", tc.name, err)
			}
			if waited := time.Since(start); waited != tc.want {
				t.Errorf("%s: waited %s, want %s", tc.name, waited, tc.want)
			}
		}
	})
}

// TestBudgetLoneReservation: a reservation as large as the whole budget
// passes when nothing else is held; a nil budget or holder never refuses.
func TestBudgetLoneReservation(t *testing.T) {
	b := NewBudget(1<<20, time.Millisecond, 0)
	h := b.Holder()
	if err := h.Acquire(context.Background(), 1<<20); err != nil {
		t.Fatalf("lone reservation of the whole budget: %v", err)
	}
	h.Release()
	if err := b.Holder().Acquire(context.Background(), 2<<20); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("a reservation larger than the budget = %v, want ErrOverloaded", err)
	}
	var none *Budget
	if err := none.Holder().Acquire(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
	var nilHolder *Holder
	if err := nilHolder.Acquire(context.Background(), 1); err != nil || nilHolder.Held() != 0 {
		t.Fatal("nil holder refused or holds")
	}
	nilHolder.Release()
}
