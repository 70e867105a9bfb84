package gateview

import (
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
)

func newViews(t *testing.T) (*Views, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.UnixMilli(1_700_000_000_000))
	v, err := New(nil, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v, clk
}

// A view is used for less than TTL, per breaker partition, and Forget
// drops every view of its endpoint (its own and its partitions') only.
func TestViewsFreshForget(t *testing.T) {
	v, clk := newViews(t)
	open := View{Gate: policy.Gate{State: policy.GateOpen}}
	shut := View{Gate: policy.Gate{State: policy.GateBreakerOpen, Until: clk.Now().Add(time.Minute)}, Level: "t1"}
	v.Keep("api", "", open)
	v.Keep("api", "t1", shut)
	if got, ok := v.Fresh("api", "t1"); !ok || got != shut {
		t.Fatalf("Fresh(api, t1) = %+v, %v; want the partition's view", got, ok)
	}
	clk.Advance(TTL - time.Millisecond)
	if got, ok := v.Fresh("api", ""); !ok || got != open {
		t.Fatalf("Fresh(api) just under TTL = %+v, %v; want the view", got, ok)
	}
	clk.Advance(time.Millisecond)
	if _, ok := v.Fresh("api", ""); ok {
		t.Fatal("a view TTL old is still fresh")
	}
	v.Keep("api", "", open)
	v.Keep("api", "t1", shut)
	v.Keep("other", "", open)
	v.Forget("api")
	for _, part := range []string{"", "t1"} {
		if _, ok := v.Fresh("api", part); ok {
			t.Fatalf("Fresh(api, %q) after Forget(api): still fresh", part)
		}
	}
	if _, ok := v.Fresh("other", ""); !ok {
		t.Fatal("Forget(api) dropped another endpoint's view")
	}
}

// A claim skips a shut partition until its gate may open, at most
// SkipRecheck from now; never the endpoint's own gate.
func TestViewsSkip(t *testing.T) {
	v, clk := newViews(t)
	now := clk.Now()
	if got := v.Skip("api", "t1", now.Add(time.Hour)); !got.Equal(now.Add(SkipRecheck)) {
		t.Fatalf("Skip until an hour = %v, want SkipRecheck from now (%v)", got, now.Add(SkipRecheck))
	}
	if got := v.Skip("api", "t2", time.Time{}); !got.Equal(now.Add(SkipRecheck)) {
		t.Fatalf("Skip with no until = %v, want SkipRecheck from now", got)
	}
	soon := now.Add(200 * time.Millisecond)
	if got := v.Skip("api", "t3", soon); !got.Equal(soon) {
		t.Fatalf("Skip until soon = %v, want %v", got, soon)
	}
	if got := v.Skipped("api", "t3", now); !got.Equal(soon) {
		t.Fatalf("Skipped(t3) = %v, want %v", got, soon)
	}
	if got := v.Skipped("api", "t3", soon); !got.IsZero() {
		t.Fatalf("Skipped(t3) at its until = %v, want not skipped", got)
	}
	if got := v.Skipped("api", "", now); !got.IsZero() {
		t.Fatalf("Skipped(the endpoint's own gate) = %v, want never skipped", got)
	}
	if got := v.Skipped("other", "t1", now); !got.IsZero() {
		t.Fatalf("Skipped(another endpoint's t1) = %v, want not skipped", got)
	}
}

// Args are the gate arguments of a queue's script: none for the home
// queue, else the state and its until in Unix ms ("0": none).
func TestViewArgs(t *testing.T) {
	until := time.UnixMilli(1_700_000_123_456)
	for _, tt := range []struct {
		name        string
		v           View
		given       bool
		state, ends string
	}{
		{"home queue", View{Gate: policy.Gate{State: policy.GatePaused, Until: until}}, false, "", ""},
		{"paused", View{Gate: policy.Gate{State: policy.GatePaused, Until: until}}, true, "paused", "1700000123456"},
		{"open", View{Gate: policy.Gate{State: policy.GateOpen}}, true, "open", "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if s, u := tt.v.Args(tt.given); s != tt.state || u != tt.ends {
				t.Fatalf("Args = %q, %q; want %q, %q", s, u, tt.state, tt.ends)
			}
		})
	}
}
