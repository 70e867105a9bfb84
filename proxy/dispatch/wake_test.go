package dispatch_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/wake"
)

// TestWakesOnAnotherReplicasEnqueue: an idle dispatcher does not poll (its
// backstop here is an hour); a callout another replica enqueues into an
// empty queue wakes it through the store's pub/sub channel, and it is
// claimed and done.
func TestWakesOnAnotherReplicasEnqueue(t *testing.T) {
	redistest.ForEach(t, func(t *testing.T, b redistest.Backend) {
		up := proctest.NewUpstream(t, status(http.StatusOK))
		h := newHarness(t, b, newConfig(t, nil, ep{name: "e", url: up.URL}))
		other := h.newStore() // the replica that enqueues
		mine := h.newStore()
		ctx, cancel := context.WithCancel(context.Background())
		rec := &recStore{Store: mine}
		d := h.dispatcher(rec, dispatch.Options{Idle: time.Hour, Wakeups: wake.Subscribe(ctx, h.b.Client, nil)})
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		eventually(t, "the first, empty round", func() bool { return rec.claimsOf("e") == 1 })
		res, err := other.Enqueue(ctxT(t), policy.NewCallout{Endpoint: "e", Issuer: testIssuer,
			Method: http.MethodPost, Path: "/woken", Body: []byte(`{}`)}, policy.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the woken dispatcher to finish the callout", func() bool {
			return h.get(res.ID).State == policy.Succeeded
		})
		if got := up.Hits(); got != 1 {
			t.Fatalf("%d upstream requests, want 1", got)
		}
	})
}
