package limit

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// orgHolder is a holder of b assigned to org that acquired n bytes.
func orgHolder(t *testing.T, b *Budget, org string, n int64) *Holder {
	t.Helper()
	h := b.Holder()
	h.Assign(org)
	if err := h.Acquire(context.Background(), n); err != nil {
		t.Fatalf("%s acquiring %d bytes: %v", org, n, err)
	}
	return h
}

// TestShareAppliesPastHalfTheBudget: in a budget of 8 MiB with a share of
// 2 MiB, one organisation alone may hold up to half the budget (4 MiB, no
// pressure yet), not a byte more; another may then take exactly its share
// (2 MiB) and no more; a third, under its share, is refused only when the
// budget's large-holder limit (7 MiB) is reached — with ErrOverloaded, not
// the share. A share refusal waits the budget's wait first.
func TestShareAppliesPastHalfTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mib = 1 << 20
		b := NewBudget(8*mib, time.Second, 2*mib)
		for range 4 {
			orgHolder(t, b, "org-a", mib)
		}
		if got := b.OrgInUse("org-a"); got != 4*mib {
			t.Fatalf("org-a holds %d, want %d", got, 4*mib)
		}
		start := time.Now()
		if err := b.Holder().Acquire(context.Background(), 1); err != nil {
			t.Fatalf("an unassigned byte at half the budget (no share applies to it): %v", err)
		}
		extra := b.Holder()
		extra.Assign("org-a")
		err := extra.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrShareExceeded) || !errors.Is(err, ErrOverloaded) {
			t.Fatalf("org-a past half the budget and past its share: %v, want ErrShareExceeded (an ErrOverloaded)", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("the share refusal came after %s, want the budget's wait of 1s", waited)
		}
		b2 := orgHolder(t, b, "org-b", 2*mib-1) // up to exactly its share, with the unassigned byte: 6 MiB held
		if err := b2.Acquire(context.Background(), 1); err != nil {
			t.Fatalf("org-b's last byte of its share: %v", err)
		}
		if err := b2.Acquire(context.Background(), 1); !errors.Is(err, ErrShareExceeded) {
			t.Fatalf("org-b one byte past its share: %v, want ErrShareExceeded", err)
		}
		c := orgHolder(t, b, "org-c", mib-2) // 7 MiB - 1 held
		if err := c.Acquire(context.Background(), 1); err != nil {
			t.Fatalf("org-c up to the large-holder limit (7 MiB): %v", err)
		}
		err = c.Acquire(context.Background(), 1)
		if !errors.Is(err, ErrOverloaded) || errors.Is(err, ErrShareExceeded) {
			t.Fatalf("org-c, under its share, past 7 MiB: %v, want ErrOverloaded, not the share", err)
		}
		if b.InUse() != 7*mib || b.OrgInUse("org-b") != 2*mib || b.OrgInUse("org-c") != mib-1 {
			t.Errorf("in use %d, org-b %d, org-c %d after the refusals", b.InUse(), b.OrgInUse("org-b"), b.OrgInUse("org-c"))
		}
	})
}

// TestShareReleaseLetsTheWaiterIn: an organisation refused for its share
// waits; its own release within the wait lets the reservation through.
func TestShareReleaseLetsTheWaiterIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mib = 1 << 20
		b := NewBudget(8*mib, time.Second, 2*mib)
		first := orgHolder(t, b, "org-a", 4*mib)
		done := make(chan error)
		go func() {
			h := b.Holder()
			h.Assign("org-a")
			done <- h.Acquire(context.Background(), mib)
		}()
		time.Sleep(999 * time.Millisecond)
		first.Release()
		if err := <-done; err != nil {
			t.Fatalf("Acquire after org-a released within the wait: %v", err)
		}
		if got := b.OrgInUse("org-a"); got != mib {
			t.Errorf("org-a holds %d, want %d", got, mib)
		}
	})
}

// TestAssignMovesWhatIsHeld: bytes acquired before Assign (a request's
// header, before its token is verified) move to the organisation, and
// Release returns them from it; an organisation holding nothing leaves no
// entry behind.
func TestAssignMovesWhatIsHeld(t *testing.T) {
	b := NewBudget(8<<20, time.Millisecond, 2<<20)
	h := b.Holder()
	if err := h.Acquire(context.Background(), 700); err != nil {
		t.Fatal(err)
	}
	h.Assign("org-a")
	if got := b.OrgInUse("org-a"); got != 700 {
		t.Fatalf("org-a holds %d after Assign, want 700", got)
	}
	if err := h.Acquire(context.Background(), 300); err != nil {
		t.Fatal(err)
	}
	if got := b.OrgInUse("org-a"); got != 1000 {
		t.Fatalf("org-a holds %d, want 1000", got)
	}
	h.Release()
	h.Release()
	if b.InUse() != 0 || b.OrgInUse("org-a") != 0 || len(b.byOrg) != 0 {
		t.Errorf("after release: in use %d, org-a %d, %d organisations remembered", b.InUse(), b.OrgInUse("org-a"), len(b.byOrg))
	}
}

// TestNoShare: with share 0 (one organisation) an organisation fills the
// budget's large-holder limit, seven eighths.
func TestNoShare(t *testing.T) {
	const mib = 1 << 20
	b := NewBudget(8*mib, time.Millisecond, 0)
	orgHolder(t, b, "org-a", 7*mib)
	h := b.Holder()
	h.Assign("org-a")
	if err := h.Acquire(context.Background(), SmallBytes+1); !errors.Is(err, ErrOverloaded) || errors.Is(err, ErrShareExceeded) {
		t.Fatalf("past seven eighths without a share: %v, want ErrOverloaded", err)
	}
	if b.Share() != 0 {
		t.Errorf("Share() = %d, want 0", b.Share())
	}
}
