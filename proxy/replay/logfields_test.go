package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
)

// markFails is the dead-letter store with MarkReplayed failing.
type markFails struct{ deadLetterStore }

// deadLetterStore is DeadLetters under another name: embedded, its field
// would clash with the method DeadLetters.
type deadLetterStore = DeadLetters

func (markFails) MarkReplayed(context.Context, string, string) (bool, error) {
	return false, errors.New("redis: connection reset")
}

// jobStore is Jobs under another name: embedded, its field would clash
// with the method Jobs.
type jobStore = Jobs

// finishFails is the job store with FinishItem failing.
type finishFails struct{ jobStore }

func (finishFails) FinishItem(context.Context, string, policy.ReplayItem) (bool, error) {
	return false, errors.New("redis: connection reset")
}

// TestWarningsCarryTheCallersTrace: the replay warnings about one dead
// letter — its replay not noted on it, its job item not recorded — and the
// replay's audit line carry the dead letter's callout_id and its caller's
// trace_id, tracing off (contract §12 "log fields").
func TestWarningsCarryTheCallersTrace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	forEachBackend(t, func(t *testing.T, e *testEnv) {
		e.traceContext = "00-" + traceID + "-00f067aa0ba902b7-01"
		dl := e.seed(t, "pay-api", "k1", 503, policy.DeadLetterExhausted)
		logger, _ := logx.New(e.logs, logx.Options{})
		s := New(Options{Config: e.cfg, Store: e.store,
			DeadLetters: markFails{e.deadLetters()}, Jobs: finishFails{e.jobs}, Owner: "A",
			Logger: logger, Now: e.clk.Now, Sleep: e.clk.Sleep, PollEvery: 10 * time.Millisecond})
		j, err := s.CreateJob(ctxT(t), Spec{Rate: 100, IDs: []string{dl.ID}}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		s.RunJob(ctxT(t), j.ID)
		for _, msg := range []string{"replay: could not note the replay on its dead letter",
			"replay: recording an item failed", "audit"} {
			lines := e.logs.Records(msg)
			if len(lines) != 1 || lines[0]["trace_id"] != traceID {
				t.Errorf("%q lines = %v, want one with trace_id %s", msg, lines, traceID)
			}
			if msg != "audit" && (len(lines) != 1 || lines[0]["callout_id"] != dl.ID) {
				t.Errorf("%q lines = %v, want callout_id %s", msg, lines, dl.ID)
			}
		}
	})
}
