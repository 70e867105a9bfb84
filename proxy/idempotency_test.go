package proxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// holding is an upstream of a clockRig that answers the calls before
// its held-th 503, holds the held-th (closing entered) until release is
// closed, and answers that one and every later one 201 {"id":"ch_1"};
// calls counts them.
type holding struct {
	calls            atomic.Int32
	entered, release chan struct{}
}

// buildHolding builds rig with a holding upstream.
func buildHolding(t *testing.T, rig *clockRig, held int32) *holding {
	t.Helper()
	up := &holding{entered: make(chan struct{}), release: make(chan struct{})}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch n := up.calls.Add(1); {
		case n < held:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case n == held:
			close(up.entered)
			<-up.release
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_1"}`)
	}})
	return up
}

// TestDuplicateWhileDispatchedRetryInFlight is contract §5's "in flight on a
// dispatcher: 202, same Callout-Id": a keyed write scheduled by a 503, its
// retry claimed by the dispatcher and still running upstream, then the same
// request sent again with the same key. The answer is 202 with the same
// Callout-Id (not the 409 of a synchronous first attempt still running),
// and the upstream sees no extra call.
func TestDuplicateWhileDispatchedRetryInFlight(t *testing.T) {
	rig := &clockRig{}
	up := buildHolding(t, rig, 2) // the first attempt 503, the dispatched retry held
	key := http.Header{"Idempotency-Key": {`"retry-in-flight-1"`}}
	first := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	if first.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s, want 202", first.Code, first.Body)
	}
	id := first.Header().Get("Callout-Id")

	rig.clock.Advance(7 * time.Hour) // past any first backoff (at most 6 h)
	if n := rig.disp.Round(context.Background()); n != 1 {
		t.Fatalf("dispatcher claimed %d callouts, want the 1 due retry", n)
	}
	<-up.entered
	again := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	close(up.release)
	rig.disp.Wait()
	if again.Code != http.StatusAccepted || again.Header().Get("Callout-Id") != id {
		t.Fatalf("duplicate while the retry runs: %d Callout-Id %q %s, want 202 and %q",
			again.Code, again.Header().Get("Callout-Id"), again.Body, id)
	}
	if got := again.Header().Get("Callout-Outcome"); got != "retryable" {
		t.Errorf("Callout-Outcome %q, want retryable (the work continues asynchronously)", got)
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("upstream called %d times, want 2 (first attempt and the one retry)", n)
	}
	if n := rig.idempotencyCount(t, "replayed"); n != 1 {
		t.Errorf("callout_idempotency_total{result=replayed} = %v, want 1", n)
	}
}

// TestDuplicateWhileFirstAttemptRuns is contract §5's "the synchronous first
// attempt still running → 409": a keyed write held upstream on its first
// attempt, and the same request sent again meanwhile. The duplicate gets
// 409 in-flight, class rejected, Retry-After: 1 and the first request's
// Callout-Id, and the upstream is not called for it; sent again once the
// first attempt answered, it gets that answer, replayed.
func TestDuplicateWhileFirstAttemptRuns(t *testing.T) {
	rig := &clockRig{}
	up := buildHolding(t, rig, 1) // the first attempt held
	key := http.Header{"Idempotency-Key": {`"first-in-flight-1"`}}
	firstDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { firstDone <- rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`) }()
	<-up.entered
	dup := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	close(up.release)
	first := <-firstDone
	id := first.Header().Get("Callout-Id")
	if first.Code != http.StatusCreated || id == "" {
		t.Fatalf("first: %d %s, want 201 with a Callout-Id", first.Code, first.Body)
	}
	h := dup.Header()
	if dup.Code != http.StatusConflict || h.Get("Callout-Problem") != "in-flight" ||
		h.Get("Callout-Outcome") != "rejected" || h.Get("Retry-After") != "1" || h.Get("Callout-Id") != id {
		t.Errorf("duplicate: %d %v %s, want 409 in-flight, rejected, Retry-After 1, Callout-Id %q",
			dup.Code, h, dup.Body, id)
	}
	if !strings.Contains(dup.Body.String(), `"type":"urn:callout-proxy:problem:in-flight"`) {
		t.Errorf("duplicate body %s, want problem type in-flight", dup.Body)
	}
	again := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
	if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" ||
		again.Body.String() != `{"id":"ch_1"}` {
		t.Errorf("after the first attempt: %d %v %s, want its 201, replayed", again.Code, again.Header(), again.Body)
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("upstream called %d times, want once", n)
	}
	if n := rig.idempotencyCount(t, "conflict"); n != 1 {
		t.Errorf("callout_idempotency_total{result=conflict} = %v, want 1", n)
	}
}

// TestDuplicateBeforeAnyAttempt is contract §5's "scheduled or held → 202
// with the same Callout-Id" for a callout no attempt has been made for: one
// accepted with Prefer: respond-async (scheduled), and one held by an open
// breaker. Its duplicate is answered 202 with its Callout-Id, not the 409
// in-flight of a synchronous first attempt (which has no attempt yet
// either), and the upstream is not called for it.
func TestDuplicateBeforeAnyAttempt(t *testing.T) {
	for _, tt := range []struct {
		name, extra, state string
		prefer             string
	}{
		{"respond-async", "", "scheduled", "respond-async"},
		{"held by the breaker", "    breaker: {partition: endpoint}\n    breaker_failures: 1\n", "held", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := &clockRig{}
			var calls atomic.Int32
			rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
			}, extra: tt.extra})
			if tt.prefer == "" { // one failed read opens the breaker
				rig.do(t, http.MethodGet, "/callout/api/v1/status", nil, "")
			}
			before := calls.Load()
			key := http.Header{"Idempotency-Key": {`"no-attempt-1"`}}
			if tt.prefer != "" {
				key.Set("Prefer", tt.prefer)
			}
			first := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
			id := first.Header().Get("Callout-Id")
			if first.Code != http.StatusAccepted || id == "" || !strings.Contains(first.Body.String(), `"state":"`+tt.state+`"`) {
				t.Fatalf("first: %d %s, want 202, state %s", first.Code, first.Body, tt.state)
			}
			key.Del("Prefer")
			again := rig.do(t, http.MethodPost, "/callout/api/v1/charges", key, `{"amount":100}`)
			if again.Code != http.StatusAccepted || again.Header().Get("Callout-Id") != id {
				t.Errorf("duplicate: %d Callout-Id %q %s, want 202 and %q", again.Code,
					again.Header().Get("Callout-Id"), again.Body, id)
			}
			if n := calls.Load() - before; n != 0 {
				t.Errorf("upstream called %d times for the write, want none", n)
			}
		})
	}
}
