package redistest

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestBackendsAreEmptyAndReachable(t *testing.T) {
	bs := Backends(t)
	if len(bs) == 0 || bs[0].Name != "miniredis" || bs[0].Mini == nil || bs[0].Real() {
		t.Fatalf("first backend = %+v, want miniredis", bs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			if err := b.Client.Set(ctx, "redistest:{x}", "1", 0).Err(); err != nil {
				t.Fatalf("%s: %v", b.Name, err)
			}
			if b.Real() != (b.Name != "miniredis") || b.Cluster() != (b.Name == "cluster") {
				t.Fatalf("%s: Real=%v Cluster=%v", b.Name, b.Real(), b.Cluster())
			}
		})
	}
}

// TestBackendsFlushed runs after TestBackendsAreEmptyAndReachable wrote a
// key to every backend: each is empty again.
func TestBackendsFlushed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range Backends(t) {
		if n, err := b.Client.Exists(ctx, "redistest:{x}").Result(); err != nil || n != 0 {
			t.Fatalf("%s: key survived (%d, %v)", b.Name, n, err)
		}
	}
}

func TestSplitSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a:1", []string{"a:1"}},
		{" a:1 , b:2,,", []string{"a:1", "b:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := splitSeeds(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("splitSeeds(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
