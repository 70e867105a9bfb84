package proxy

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// The synchronous path (proxy/write.go) and the dispatcher make their
// attempts with one runner (proxy/attempt). These tests pin what the two
// copies it replaced did differently.

// blockedEndpoint is rig YAML for an endpoint "blocked" whose host resolves
// to a loopback address its allowed_networks do not list: the SSRF guard
// refuses every attempt before anything is sent (contract §2 "blocked
// address", §11).
const blockedEndpoint = "  blocked:\n    url: http://localhost:1/v1\n"

// newBlockedRig is a rig whose endpoint "api" answers 503 and whose
// endpoint "blocked" is refused by the SSRF guard.
func newBlockedRig(t *testing.T) *clockRig {
	t.Helper()
	rig := &clockRig{}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}, extra: blockedEndpoint})
	return rig
}

// TestRefusedSyncFirstAttemptIsReleased: a synchronous write whose first
// attempt the proxy refuses before sending is answered with the refusal
// and leaves nothing behind: no callout, and its Idempotency-Key is not the
// key's result (contract §5: a rejection before dispatch is never stored),
// so the same key sent again is refused again, not answered 409 or 202.
func TestRefusedSyncFirstAttemptIsReleased(t *testing.T) {
	rig := newBlockedRig(t)
	key := http.Header{"Idempotency-Key": {`"refused-1"`}}
	for i := range 2 {
		rec := rig.do(t, http.MethodPost, "/callout/blocked/charges", key, `{"amount":1}`)
		if rec.Code != http.StatusForbidden || rec.Header().Get("Callout-Outcome") != string(policy.Rejected) ||
			!strings.Contains(rec.Body.String(), string(problem.BlockedAddress)) {
			t.Fatalf("send %d: %d %s %s, want 403 blocked-address, rejected", i+1, rec.Code,
				rec.Header().Get("Callout-Outcome"), rec.Body)
		}
		if id := rec.Header().Get("Callout-Id"); id != "" {
			t.Errorf("send %d: Callout-Id %q, want none (nothing was recorded)", i+1, id)
		}
	}
	items, _, err := rig.store.Backlog(context.Background(), "blocked")
	if err != nil || items != 0 {
		t.Errorf("backlog of blocked = %d (%v), want 0: the refused callout was released", items, err)
	}
	if got := rig.counter(t, "callout_dead_letters_total"); len(got) != 0 {
		t.Errorf("dead letters = %v, want none", got)
	}
	if got := rig.counter(t, "callout_rejected_total")[`code="blocked-address",endpoint="blocked"`]; got != 2 {
		t.Errorf("callout_rejected_total{blocked, blocked-address} = %v, want 2", got)
	}
}

// TestRefusedDispatchedAttemptIsDeadLettered: a callout accepted with a
// 202 (Prefer: respond-async) whose dispatched attempt the proxy refuses
// before sending is not deleted — the caller holds its Callout-Id, and no
// accepted callout is lost (contract §1) — but ends as a dead letter,
// reason permanent (contract §2: rejected is never retried; §7), its
// attempt logged rejected with the problem code; the same key then gets
// 409 dead-lettered with that Callout-Id (contract §5).
func TestRefusedDispatchedAttemptIsDeadLettered(t *testing.T) {
	rig := newBlockedRig(t)
	hdr := http.Header{"Idempotency-Key": {`"refused-2"`}, "Prefer": {"respond-async"}}
	first := rig.do(t, http.MethodPost, "/callout/blocked/charges", hdr, `{"amount":2}`)
	id := first.Header().Get("Callout-Id")
	if first.Code != http.StatusAccepted || id == "" {
		t.Fatalf("respond-async: %d %s, want 202 with a Callout-Id", first.Code, first.Body)
	}
	if n := rig.disp.Round(context.Background()); n != 1 {
		t.Fatalf("dispatcher claimed %d, want 1", n)
	}
	rig.disp.Wait()
	c, err := rig.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("the accepted callout is gone: %v", err)
	}
	if c.State != policy.DeadLettered || c.DeadLetterReason != policy.DeadLetterPermanent ||
		c.LastError != string(problem.BlockedAddress) {
		t.Fatalf("state %s reason %q last error %q, want dead_lettered permanent blocked-address", c.State,
			c.DeadLetterReason, c.LastError)
	}
	if len(c.AttemptLog) != 1 || c.AttemptLog[0].Outcome != policy.Rejected {
		t.Errorf("attempt log = %+v, want the one refused attempt, outcome rejected", c.AttemptLog)
	}
	if got := rig.counter(t, "callout_dead_letters_total")[`endpoint="blocked",reason="permanent"`]; got != 1 {
		t.Errorf("callout_dead_letters_total{blocked, permanent} = %v, want 1", got)
	}
	again := rig.do(t, http.MethodPost, "/callout/blocked/charges", hdr, `{"amount":2}`)
	if again.Code != http.StatusConflict || again.Header().Get("Callout-Id") != id {
		t.Errorf("same key again: %d Callout-Id %q, want 409 dead-lettered with %q: %s", again.Code,
			again.Header().Get("Callout-Id"), id, again.Body)
	}
}

// TestRefusedInlineRetryIsDeadLettered: under Prefer: wait=N, a first
// attempt answered 503 reached the upstream; the inline retry after it is
// refused before sending (the endpoint's injected header can no longer be
// resolved). The callout is not released — an attempt of it went out — but
// ends as a dead letter, reason permanent, like a dispatched refusal; the
// caller gets the refusal with its Callout-Id.
func TestRefusedInlineRetryIsDeadLettered(t *testing.T) {
	rig := &clockRig{}
	var resolved atomic.Int32
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}, headerValues: func(*config.Endpoint) (http.Header, error) {
		if resolved.Add(1) > 1 {
			return nil, errors.New("the secret file is gone")
		}
		return http.Header{}, nil
	}})
	hdr := http.Header{"Idempotency-Key": {`"refused-3"`}, "Prefer": {"wait=10"}}
	rec := rig.do(t, http.MethodPost, "/callout/api/charges", hdr, `{"amount":3}`)
	id := rec.Header().Get("Callout-Id")
	if rec.Code != http.StatusInternalServerError || id == "" || !strings.Contains(rec.Body.String(), id) {
		t.Fatalf("answer %d Callout-Id %q %s, want 500 internal naming the callout", rec.Code, id, rec.Body)
	}
	if got := rig.hits.Load(); got != 1 {
		t.Errorf("upstream hits = %d, want 1 (the refused retry sent nothing)", got)
	}
	c, err := rig.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("the callout is gone: %v", err)
	}
	if c.State != policy.DeadLettered || c.DeadLetterReason != policy.DeadLetterPermanent || len(c.AttemptLog) != 2 {
		t.Fatalf("state %s reason %q, %d attempts; want dead_lettered permanent after 2", c.State,
			c.DeadLetterReason, len(c.AttemptLog))
	}
}

// TestRetryLabelSameOnBothPaths: callout_retries_scheduled_total is
// labelled by the failed attempt's reason as its completion recorded it,
// whichever path made the attempt: a synchronous 503 and the dispatcher's
// 503 an hour later count in the one series {api, status_5xx}, which is
// also the record's last error.
func TestRetryLabelSameOnBothPaths(t *testing.T) {
	rig := newClockRig(t, http.StatusServiceUnavailable)
	rec := rig.do(t, http.MethodPost, "/callout/api/charges", http.Header{"Idempotency-Key": {`"label-1"`}}, `{}`)
	id := rec.Header().Get("Callout-Id")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("sync: %d %s, want 202 scheduled", rec.Code, rec.Body)
	}
	want := map[string]float64{`endpoint="api",reason="status_5xx"`: 1}
	if got := rig.counter(t, "callout_retries_scheduled_total"); !maps.Equal(got, want) {
		t.Fatalf("after the synchronous attempt: %v, want %v", got, want)
	}
	rig.clock.Advance(time.Hour)
	if n := rig.disp.Round(context.Background()); n != 1 {
		t.Fatalf("dispatcher claimed %d, want 1", n)
	}
	rig.disp.Wait()
	want[`endpoint="api",reason="status_5xx"`] = 2
	if got := rig.counter(t, "callout_retries_scheduled_total"); !maps.Equal(got, want) {
		t.Errorf("after the dispatched attempt: %v, want %v (the same label)", got, want)
	}
	c, err := rig.store.Get(context.Background(), id)
	if err != nil || c.LastError != policy.ReasonStatus5xx || c.Attempts != 2 {
		t.Errorf("record: %+v, %v; want 2 attempts, last error status_5xx", c, err)
	}
}

// counter is every series of the counter family name, by its labels
// (`k="v",…` in name order), read from the rig's registry.
func (rig *clockRig) counter(t *testing.T, name string) map[string]float64 {
	t.Helper()
	mfs, err := rig.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			out[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}
