package replay

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/tracing"
	"github.com/calloutproxy/callout-proxy/proxy/tracing/tracingtest"
)

// The trace a dead letter was accepted under (its admission span's
// context, as the ingress stores it).
const (
	dlTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
	dlSpan    = "00f067aa0ba902b7"
	dlContext = "00-" + dlTrace + "-" + dlSpan + "-01,congo=t61rcWkgMzE"
)

// TestReplayJoinsTheOriginalTrace: a replay's span is a child of the dead
// letter's stored trace context, and the new chain is stored under the
// replay span's context — same trace id, the tracestate kept — so the
// chain's dispatched attempts join the trace that accepted the original
// callout. A second replay that finds the chain is recorded as
// already_replayed; with tracing off the chain keeps the dead letter's
// context as it is.
func TestReplayJoinsTheOriginalTrace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		tp, sr := tracingtest.Recorder(t, 1)
		s := New(Options{Config: e.cfg, Store: e.store, DeadLetters: e.deadLetters(), Jobs: e.jobs, Owner: "A", Now: e.clk.Now,
			Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
		ctx := ctxT(t)
		e.traceContext = dlContext // what seed stores: the dead letters were accepted under it
		dl := e.seed(t, "pay-api", "traced-1", 503, policy.DeadLetterExhausted).ID
		e.clk.Advance(time.Minute)
		chainID, err := s.ReplayOne(ctx, dl, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReplayOne(ctx, dl, "ops"); err == nil {
			t.Fatal("a second replay created another chain")
		}
		spans := sr.Ended()
		if len(spans) != 2 {
			t.Fatalf("%d spans, want 2 replay spans", len(spans))
		}
		r := spans[0]
		a := map[string]string{}
		for _, kv := range r.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		if r.Name() != tracing.SpanReplay || r.SpanContext().TraceID().String() != dlTrace ||
			r.Parent().SpanID().String() != dlSpan || a["callout.replay_of"] != dl || a["callout.id"] != chainID ||
			a["callout.replay.result"] != "replayed" {
			t.Errorf("replay span %s %v parent %v attributes %v", r.Name(), r.SpanContext(), r.Parent(), a)
		}
		if res := spans[1].Attributes(); len(res) == 0 || spans[1].Status().Code.String() != "Unset" {
			t.Errorf("second replay span: %v, status %v", res, spans[1].Status())
		}
		chain, err := e.store.Get(ctx, chainID)
		if err != nil {
			t.Fatal(err)
		}
		want := "00-" + dlTrace + "-" + r.SpanContext().SpanID().String() + "-01,congo=t61rcWkgMzE"
		if chain.TraceContext != want {
			t.Errorf("chain's trace context %q, want %q", chain.TraceContext, want)
		}

		off := New(Options{Config: e.cfg, Store: e.store, DeadLetters: e.deadLetters(), Jobs: e.jobs, Owner: "B", Now: e.clk.Now})
		dl2 := e.seed(t, "crm-api", "traced-2", 503, policy.DeadLetterExhausted).ID
		chain2, err := off.ReplayOne(ctx, dl2, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := e.store.Get(ctx, chain2); c.TraceContext != dlContext || strings.Contains(c.TraceContext, "\n") {
			t.Errorf("untraced replay's chain context %q, want the dead letter's %q", c.TraceContext, dlContext)
		}
	})
}
