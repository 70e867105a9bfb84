package replay

import (
	"errors"
	"testing"
	"time"
)

// TestNoSuchEndpoint: a listing or a job naming an endpoint that is neither
// configured nor seen by the store is refused (ErrNoSuchEndpoint), while an
// endpoint only the store knows (removed from the configuration, its dead
// letters still kept) is listed.
func TestNoSuchEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		s := e.service("A")
		ctx := ctxT(t)
		e.seedN(t, "old-api", "o", 1, time.Millisecond) // not configured, but seen
		if _, err := s.DeadLetters(ctx, Query{Filter: Filter{Endpoints: []string{"nosuch"}}}); !errors.Is(err, ErrNoSuchEndpoint) {
			t.Fatalf("listing nosuch: %v, want ErrNoSuchEndpoint", err)
		}
		if _, err := s.CreateJob(ctx, Spec{Filters: []Filter{{Endpoints: []string{"pay-api", "nosuch"}}}}, "ops"); !errors.Is(err, ErrNoSuchEndpoint) {
			t.Fatalf("job of nosuch: %v, want ErrNoSuchEndpoint", err)
		}
		page, err := s.DeadLetters(ctx, Query{Filter: Filter{Endpoints: []string{"old-api"}}})
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("listing a removed endpoint's dead letters: %+v, %v", page.Items, err)
		}
		if page, err := s.DeadLetters(ctx, Query{Filter: Filter{Endpoints: []string{"pay-api"}}}); err != nil || len(page.Items) != 0 {
			t.Fatalf("a configured endpoint without dead letters: %+v, %v", page.Items, err)
		}
	})
}
