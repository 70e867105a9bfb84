package limit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadBody: bodies of known and unknown length are read whole, the
// buffer reserved in the holder as it grows (never more than twice what
// arrived, and exactly the length when it was announced); a body over the
// maximum, announced or not, is ErrTooLarge; one longer than announced
// too; a read error is returned.
func TestReadBody(t *testing.T) {
	b := NewBudget(64<<20, time.Millisecond, 0)
	const maxBytes = 12 << 20
	for _, tt := range []struct {
		name     string
		body     string
		cl       int64
		wantErr  error
		wantHeld int64 // -1: any up to twice the body
	}{
		{"empty", "", 0, nil, 0},
		{"small, known", "hello", 5, nil, 5},
		{"small, unknown", "hello", -1, nil, firstChunk},
		{"1 MiB, known", strings.Repeat("x", 1<<20), 1 << 20, nil, 1 << 20},
		{"1 MiB + 1, unknown", strings.Repeat("x", 1<<20+1), -1, nil, 2 << 20},
		{"at the maximum, known", strings.Repeat("x", maxBytes), maxBytes, nil, maxBytes},
		{"over the maximum, announced", "", maxBytes + 1, ErrTooLarge, 0},
		{"over the maximum, unknown", strings.Repeat("x", maxBytes+1), -1, ErrTooLarge, -1},
		{"longer than announced", "hello!", 5, ErrTooLarge, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := b.Holder()
			defer h.Release()
			got, err := ReadBody(context.Background(), h, iotest.HalfReader(strings.NewReader(tt.body)), tt.cl, maxBytes)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && string(got) != tt.body {
				t.Fatalf("read %d bytes, want %d", len(got), len(tt.body))
			}
			if tt.wantHeld >= 0 && h.Held() != tt.wantHeld {
				t.Errorf("held %d, want %d", h.Held(), tt.wantHeld)
			}
			if h.Held() > 2*int64(len(tt.body))+firstChunk {
				t.Errorf("held %d for a %d-byte body", h.Held(), len(tt.body))
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := ReadBody(context.Background(), b.Holder(), io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(boom)), 10, maxBytes)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	})
}

// TestReadBodyOverloaded: a body that would pass the budget stops reading
// with ErrOverloaded; the part already read stays held until the release.
func TestReadBodyOverloaded(t *testing.T) {
	b := NewBudget(1<<20, time.Millisecond, 0)
	h := b.Holder()
	_, err := ReadBody(context.Background(), h, bytes.NewReader(make([]byte, 2<<20)), 2<<20, 12<<20)
	if !errors.Is(err, ErrOverloaded) {
		t.Fatalf("err = %v, want ErrOverloaded", err)
	}
	if h.Held() == 0 || h.Held() > 1<<20 {
		t.Errorf("held %d, want the part reserved before the refusal", h.Held())
	}
	h.Release()
	if b.InUse() != 0 {
		t.Errorf("in use %d after release", b.InUse())
	}
}

// TestIsTimeoutNil: a nil error is no timeout and costs no allocation
// (readBody asks on every successful body read); a deadline error is one.
func TestIsTimeoutNil(t *testing.T) {
	if IsTimeout(nil) {
		t.Fatal("IsTimeout(nil) = true")
	}
	if !IsTimeout(os.ErrDeadlineExceeded) {
		t.Fatal("IsTimeout(os.ErrDeadlineExceeded) = false")
	}
	if n := testing.AllocsPerRun(100, func() { _ = IsTimeout(nil) }); n != 0 {
		t.Errorf("IsTimeout(nil) allocates %v times, want 0", n)
	}
}
