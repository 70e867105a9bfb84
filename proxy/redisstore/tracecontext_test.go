package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/keyspace"
)

// testTrace is a stored trace context: a traceparent and a tracestate.
const testTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,congo=t61rcWkgMzE"

// TestTraceContextStored: the trace context a callout was accepted under
// is written by Begin and Enqueue and comes back on the claim (the
// dispatcher's attempts join the trace on any replica), on Get, and on
// the dead letter (a replay joins it too); its bytes count in the
// endpoint's backlog bytes like every other stored field.
func TestTraceContextStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		s := e.store()
		ctx := ctxT(t)
		nc := req("trace-api", "trace-key", "{}")
		nc.TraceContext = testTrace
		b, err := s.Begin(ctx, nc, policy.BeginOptions{Lease: testLease})
		if err != nil || b.Claimed == nil {
			t.Fatalf("begin = %+v, %v", b, err)
		}
		if b.Claimed.TraceContext != testTrace {
			t.Errorf("begin's claim carries %q", b.Claimed.TraceContext)
		}
		mustComplete(t, s, b.Claimed, failure(e.clk.Now()))
		c := mustClaim(t, s, "trace-api", claimOpts).Claimed
		if len(c) != 1 || c[0].TraceContext != testTrace {
			t.Fatalf("claimed = %+v, want the trace context", c)
		}
		mustDeadLetter(t, s, c[0], policy.DeadLetterExhausted)
		if got := mustGet(t, s, b.Claimed.ID); got.State != policy.DeadLettered || got.TraceContext != testTrace {
			t.Errorf("dead letter = %s with trace context %q", got.State, got.TraceContext)
		}

		// Enqueue writes it too; without one nothing is stored.
		bytes := func() int {
			n, _ := strconv.Atoi(e.b.Client.HGet(ctx, keyspace.HomeQueue("trace-bytes").EndpointHash, eBytes).Val())
			return n
		}
		plain := req("trace-bytes", "", "{}")
		r, err := s.Enqueue(ctx, plain, enqOpts)
		if err != nil {
			t.Fatal(err)
		}
		without := bytes()
		if got := mustGet(t, s, r.ID); got.TraceContext != "" {
			t.Errorf("a callout without a trace context has %q", got.TraceContext)
		}
		traced := plain
		traced.TraceContext = testTrace
		r, err = s.Enqueue(ctx, traced, enqOpts)
		if err != nil {
			t.Fatal(err)
		}
		// Charged as stored: the record packs the traceparent (packTrace), so
		// the traced callout costs the untraced one's bytes plus at least
		// the packed trace context and less than it written out (with its
		// length prefix).
		// A version-00 traceparent (55 bytes) packs into 1 + 16 + 8 + 1 bytes,
		// its tracestate as it is (record's packTrace).
		packedTrace := 26 + len(testTrace) - 55
		if got := bytes() - without; got < without+packedTrace || got > without+1+len(testTrace) {
			t.Errorf("the traced callout charged %d bytes, want the untraced one's %d + %d to %d for its trace context",
				got, without, packedTrace, 1+len(testTrace))
		}
		e.clk.Advance(time.Second)
		got := mustClaim(t, s, "trace-bytes", claimOpts).Claimed
		if len(got) != 2 || got[0].TraceContext == got[1].TraceContext {
			t.Errorf("claimed %d, want one with and one without the trace context", len(got))
		}
	})
}
