package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestExhaustedSyncWaitAnswersDeadLettered: a synchronous write under
// Prefer: wait=N whose inline retries use every attempt (max_attempts 2,
// an upstream answering 503) is a dead letter when the wait ends. It is
// answered as a finished callout is — as the same key sent again is — with
// 409 dead-lettered, Callout-Outcome rejected (Apex does not send it again),
// Callout-State dead_lettered and Callout-Dead-Letter-Reason exhausted, the
// same in the problem body, and the last attempt's class (retryable) apart
// in last_outcome (contract §4, §5, §12); never the upstream's 503 marked
// retryable.
func TestExhaustedSyncWaitAnswersDeadLettered(t *testing.T) {
	rig, logs := &clockRig{}, &proctest.LogBuffer{}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}, extra: "policy:\n  max_attempts: 2\n", logs: logs})
	hdr := http.Header{"Idempotency-Key": {`"exhaust-1"`}, "Prefer": {"wait=10"}}
	first := rig.do(t, http.MethodPost, "/callout/api/charges", hdr, `{"amount":1}`)
	if got := rig.hits.Load(); got != 2 {
		t.Fatalf("upstream hits = %d, want 2 (both attempts inline)", got)
	}
	again := rig.do(t, http.MethodPost, "/callout/api/charges", hdr, `{"amount":1}`)
	for name, rec := range map[string]*http.Response{"exhausted wait": first.Result(), "same key again": again.Result()} {
		var pb api.Problem
		if err := json.NewDecoder(rec.Body).Decode(&pb); err != nil {
			t.Fatalf("%s: body: %v", name, err)
		}
		id := rec.Header.Get("Callout-Id")
		if rec.StatusCode != http.StatusConflict || rec.Header.Get("Callout-Outcome") != string(policy.Rejected) ||
			rec.Header.Get("Callout-Problem") != string(problem.DeadLettered) ||
			rec.Header.Get("Callout-State") != string(policy.DeadLettered) ||
			rec.Header.Get("Callout-Dead-Letter-Reason") != string(policy.DeadLetterExhausted) || id == "" {
			t.Errorf("%s: %d, headers %v, want 409 dead-lettered rejected, state dead_lettered, reason exhausted",
				name, rec.StatusCode, rec.Header)
		}
		if pb.Type != problem.TypeBase+string(problem.DeadLettered) || pb.Outcome != policy.Rejected ||
			pb.State != policy.DeadLettered || pb.DeadLetterReason != policy.DeadLetterExhausted ||
			pb.LastOutcome != policy.Retryable || pb.CalloutID != id {
			t.Errorf("%s: problem %+v, want dead-lettered, rejected, dead_lettered, exhausted, last retryable, %s",
				name, pb, id)
		}
	}
	if got := rig.hits.Load(); got != 2 {
		t.Errorf("upstream hits after the repeat = %d, want 2", got)
	}
	vocabularyOfAnExhaustedCallout(t, rig, logs, first.Header().Get("Callout-Id"))
}

// vocabularyOfAnExhaustedCallout: every surface names callout id — a dead
// letter after two 503s — in the words of contract §12: reason exhausted,
// last class retryable, never permanent: its status document (and the
// Callout-Outcome of its GET), its attempt and dead-letter log lines, and
// the labels of callout_attempts_total and callout_dead_letters_total.
func vocabularyOfAnExhaustedCallout(t *testing.T, rig *clockRig, logs *proctest.LogBuffer, id string) {
	t.Helper()
	got := rig.do(t, http.MethodGet, "/v1/callouts/"+id, nil, "")
	var doc api.StatusDocument
	if err := json.Unmarshal(got.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got.Code != http.StatusOK || doc.State != policy.DeadLettered || doc.DeadLetterReason != "exhausted" ||
		doc.Outcome != policy.Retryable || doc.LastOutcome != policy.Retryable ||
		got.Header().Get("Callout-Outcome") != string(policy.Retryable) {
		t.Errorf("status document: %d %s (Callout-Outcome %s), want dead_lettered, reason exhausted, outcome and "+
			"last_outcome retryable", got.Code, got.Body, got.Header().Get("Callout-Outcome"))
	}
	for _, a := range doc.Attempts {
		if a.Outcome != policy.Retryable {
			t.Errorf("attempt %+v: outcome %s, want retryable", a, a.Outcome)
		}
	}
	var attempts, dead int
	for _, l := range logs.Lines(t) {
		if l["callout_id"] != id {
			continue
		}
		switch l["msg"] {
		case "attempt":
			attempts++
			if l["outcome"] != "retryable" {
				t.Errorf("attempt line %v: outcome, want retryable", l)
			}
		case "dead letter":
			dead++
			if l["dead_letter_reason"] != "exhausted" || l["state"] != "dead_lettered" || l["last_outcome"] != "retryable" {
				t.Errorf("dead letter line %v: want state dead_lettered, reason exhausted, last_outcome retryable", l)
			}
		}
		if strings.Contains(fmt.Sprint(l), "permanent") {
			t.Errorf("a line about the exhausted callout says permanent: %v", l)
		}
	}
	if attempts != 2 || dead != 1 {
		t.Errorf("%d attempt and %d dead letter lines, want 2 and 1:\n%s", attempts, dead, logs.String())
	}
	if got := rig.counter(t, "callout_attempts_total")[`endpoint="api",kind="retry",outcome="retryable"`]; got != 1 {
		t.Errorf("callout_attempts_total{api, retry, retryable} = %v, want 1: %v", got,
			rig.counter(t, "callout_attempts_total"))
	}
	if got := rig.counter(t, "callout_dead_letters_total")[`endpoint="api",reason="exhausted"`]; got != 1 {
		t.Errorf("callout_dead_letters_total{api, exhausted} = %v, want 1", got)
	}
}

// TestAmbiguousSyncWriteAnswersDeadLettered: a synchronous write to an
// `idempotency: ignored` upstream that closes the connection without an
// answer becomes a dead letter at once, reason ambiguous (contract §3); it
// is answered as every dead letter is (contract §4): 409 dead-lettered,
// class rejected, its reason in a header and the body, the last attempt's
// class (retryable: no answer) apart, a detail that says to check the
// upstream first.
func TestAmbiguousSyncWriteAnswersDeadLettered(t *testing.T) {
	rig := &clockRig{}
	rig.build(t, rigSpec{upstream: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.hits.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}, extra: "    idempotency: ignored\n"})
	rec := rig.do(t, http.MethodPost, "/callout/api/charges", http.Header{"Idempotency-Key": {`"amb-1"`}}, `{}`)
	var pb api.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &pb); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusConflict || rec.Header().Get("Callout-Outcome") != string(policy.Rejected) ||
		rec.Header().Get("Callout-Dead-Letter-Reason") != string(policy.DeadLetterAmbiguous) ||
		pb.DeadLetterReason != policy.DeadLetterAmbiguous || pb.LastOutcome != policy.Retryable ||
		!strings.Contains(pb.Detail, "check the upstream before replaying it") {
		t.Fatalf("answer %d %v %s, want 409 dead-lettered, rejected, reason ambiguous, last retryable",
			rec.Code, rec.Header(), rec.Body)
	}
	if got := rig.hits.Load(); got != 1 {
		t.Errorf("upstream hits = %d, want 1 (never retried)", got)
	}
}
