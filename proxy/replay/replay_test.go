package replay

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/jobs"
)

var (
	_ Store = (*redisstore.Store)(nil)
	_ Jobs  = (*jobs.Store)(nil)
)

// completeChain claims the replay chain of endpoint and ends it as action
// (a dead letter, permanent, or succeeded).
func (e *testEnv) completeChain(t *testing.T, endpoint string, action policy.Action) string {
	t.Helper()
	cr, err := e.store.Claim(ctxT(t), endpoint, redisstore.ClaimOptions{Batch: 1, Lease: testLease})
	if err != nil || len(cr.Claimed) != 1 {
		t.Fatalf("claim chain: %+v, %v", cr, err)
	}
	c := policy.Completion{Action: action, Attempt: &policy.Attempt{StartedAt: e.clk.Now(), Status: 200}}
	if action == policy.ActionDeadLetter {
		c.Reason, c.Attempt.Status = policy.DeadLetterPermanent, 400
	}
	if _, err := e.store.Complete(ctxT(t), cr.Claimed[0], c); err != nil {
		t.Fatal(err)
	}
	return cr.Claimed[0].ID
}

func TestReplayOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ctx := ctxT(t)
		d := e.seed(t, "pay-api", "k1", 503, policy.DeadLetterExhausted)
		e.clk.Advance(time.Minute)

		first, err := s.ReplayOne(ctx, d.ID, "ops")
		if err != nil || first == "" {
			t.Fatalf("replay = %q, %v", first, err)
		}
		chain, _ := e.store.Get(ctx, first)
		if chain.ReplayOf != d.ID || chain.IdempotencyKey != "k1" || chain.Header.Get("Idempotency-Key") != `"k1"` ||
			string(chain.Body) != `{"key":"k1"}` || chain.Attempts != 0 || chain.State != policy.Scheduled {
			t.Fatalf("chain = %+v", chain)
		}
		again, err := s.ReplayOne(ctx, d.ID, "ops")
		if !errors.Is(err, ErrAlreadyReplayed) || again != first {
			t.Fatalf("second replay = %q, %v; want %s, ErrAlreadyReplayed", again, err, first)
		}
		// The chain dead-letters too: the original is superseded by it.
		e.completeChain(t, "pay-api", policy.ActionDeadLetter)
		got, err := s.ReplayOne(ctx, d.ID, "ops")
		if !errors.Is(err, ErrSuperseded) || got != first {
			t.Fatalf("replay of the superseded = %q, %v", got, err)
		}
		second, err := s.ReplayOne(ctx, first, "ops")
		if err != nil || second == first {
			t.Fatalf("replay of the newer dead letter = %q, %v", second, err)
		}
		_, m, _ := s.DeadLetter(ctx, d.ID)
		if m.ReplayedBy != first {
			t.Fatalf("mark of the original = %+v", m)
		}
		var results []string
		for _, a := range e.logs.Audits() {
			if a["token"] != "ops" || a["action"] != "replay" || a["dead_letter_id"] == "" {
				t.Fatalf("audit line = %v", a)
			}
			results = append(results, a["result"].(string))
		}
		if want := []string{"replayed", "already_replayed", "superseded", "replayed"}; !slices.Equal(results, want) {
			t.Fatalf("audit results = %v, want %v", results, want)
		}
	})
}

func TestReplayOneRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ctx := ctxT(t)
		dis := e.seed(t, "crm-api", "k2", 0, policy.DeadLetterAmbiguous)
		gone := e.seed(t, "old-api", "k3", 500, policy.DeadLetterExhausted)
		pending, err := e.store.Enqueue(ctx, policy.NewCallout{Endpoint: "pay-api", Method: "PUT", Path: "/x"},
			policy.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Disable(ctx, "crm-api", "test"); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			id   string
			want error
		}{
			{"disabled endpoint", dis.ID, ErrEndpointDisabled},
			{"endpoint no longer configured", gone.ID, ErrUnknownEndpoint},
			{"pending callout", pending.ID, ErrNotDeadLetter},
			{"unknown id", "00AAAAAAAAAAAAAAAAAAAAAA", ErrNotDeadLetter},
			{"malformed id", "nope", ErrNotDeadLetter},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.ReplayOne(ctx, tt.id, "ops"); !errors.Is(err, tt.want) {
					t.Fatalf("error = %v, want %v", err, tt.want)
				}
			})
		}
		// Refused until the endpoint is re-enabled; then replayed.
		if err := e.store.Enable(ctx, "crm-api"); err != nil {
			t.Fatal(err)
		}
		if id, err := s.ReplayOne(ctx, dis.ID, "ops"); err != nil || id == "" {
			t.Fatalf("after enable = %q, %v", id, err)
		}
	})
}

func TestDeadLettersFilterAndCursor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		var all []seeded
		for i, st := range []int{503, 400, 0, 503, 429} {
			reason := policy.DeadLetterExhausted
			if st == 400 {
				reason = policy.DeadLetterPermanent
			}
			all = append(all, e.seed(t, "pay-api", "p"+string(rune('a'+i)), st, reason))
			all = append(all, e.seed(t, "crm-api", "c"+string(rune('a'+i)), st, reason))
			e.clk.Advance(time.Second)
		}
		byEndpoint := func(keep func(seeded) bool) []string {
			var out []string
			for _, ep := range []string{"crm-api", "pay-api"} {
				for _, d := range all {
					if d.Endpoint == ep && keep(d) {
						out = append(out, d.ID)
					}
				}
			}
			return out
		}
		tests := []struct {
			name   string
			filter Filter
			keep   func(seeded) bool
		}{
			{"everything", Filter{}, func(seeded) bool { return true }},
			{"one endpoint", Filter{Endpoints: []string{"pay-api"}}, func(d seeded) bool { return d.Endpoint == "pay-api" }},
			{"status 503", Filter{Statuses: []int{503}}, func(d seeded) bool { return d.Status == 503 }},
			{"no response", Filter{Statuses: []int{0}}, func(d seeded) bool { return d.Status == 0 }},
			{"reason permanent", Filter{Reasons: []policy.DeadLetterReason{policy.DeadLetterPermanent}},
				func(d seeded) bool { return d.Reason == policy.DeadLetterPermanent }},
			{"window", Filter{Since: t0.Add(time.Second), Until: t0.Add(3 * time.Second)}, func(d seeded) bool {
				i := slices.IndexFunc(all, func(x seeded) bool { return x.ID == d.ID }) / 2
				return i >= 1 && i <= 3
			}},
		}
		for _, tt := range tests {
			for _, limit := range []int{1, 3, 100} {
				var got []string
				q := Query{Filter: tt.filter, Limit: limit}
				for pages := 0; ; pages++ {
					p, err := s.DeadLetters(ctxT(t), q)
					if err != nil || pages > 20 {
						t.Fatalf("%s/%d: page %d: %v", tt.name, limit, pages, err)
					}
					for _, d := range p.Items {
						got = append(got, d.ID)
					}
					if q.Cursor = p.Next; q.Cursor == "" {
						break
					}
				}
				if want := byEndpoint(tt.keep); !slices.Equal(got, want) {
					t.Fatalf("%s/%d: got %v\nwant %v", tt.name, limit, got, want)
				}
			}
		}
		if _, err := s.DeadLetters(ctxT(t), Query{Cursor: "!!"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad cursor: %v", err)
		}
	})
}

func TestFilterValidate(t *testing.T) {
	tests := []struct {
		name string
		f    Filter
		ok   bool
	}{
		{"empty", Filter{}, true},
		{"full", Filter{Endpoints: []string{"pay-api"}, Since: t0, Until: t0, Statuses: []int{0, 100, 599},
			Reasons: []policy.DeadLetterReason{"exhausted", "permanent", "ambiguous", "endpoint_disabled"}}, true},
		{"bad endpoint", Filter{Endpoints: []string{"Pay_API"}}, false},
		{"until before since", Filter{Since: t0, Until: t0.Add(-time.Millisecond)}, false},
		{"status 99", Filter{Statuses: []int{99}}, false},
		{"status 600", Filter{Statuses: []int{600}}, false},
		{"unknown reason", Filter{Reasons: []policy.DeadLetterReason{"timeout"}}, false},
		{"too many", Filter{Statuses: make([]int, MaxFilterValues+1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	id := "00AAAAAAAAAAAAAAAAAAAAAA"
	tests := []struct {
		name string
		sp   Spec
		ok   bool
	}{
		{"ids", Spec{IDs: []string{id}}, true},
		{"filter and rate", Spec{Filters: []Filter{{}}, Rate: 200}, true},
		{"nothing", Spec{Rate: 5}, false},
		{"bad id", Spec{IDs: []string{"x"}}, false},
		{"rate too low", Spec{IDs: []string{id}, Rate: 0.01}, false},
		{"rate too high", Spec{IDs: []string{id}, Rate: 1001}, false},
		{"bad filter", Spec{Filters: []Filter{{Statuses: []int{7}}}}, false},
		{"too many filters", Spec{Filters: make([]Filter, MaxFilters+1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sp.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
