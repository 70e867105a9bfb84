package app

import (
	"errors"
	"fmt"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/calloutproxy/callout-proxy/salesforce"
)

// TestReprocessError: each replay refusal reaches the reprocess poller as
// the salesforce error that says how to answer the request, and keeps the
// replay error; other errors pass as they are.
func TestReprocessError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error // nil: passed through unchanged
	}{
		{"not a dead letter", replay.ErrNotDeadLetter, salesforce.ErrReplayNoCopy},
		{"already replayed", replay.ErrAlreadyReplayed, salesforce.ErrReplayInFlight},
		{"superseded", replay.ErrSuperseded, salesforce.ErrReplaySuperseded},
		{"endpoint disabled", replay.ErrEndpointDisabled, salesforce.ErrReplayRefused},
		{"endpoint not configured", replay.ErrUnknownEndpoint, salesforce.ErrReplayRefused},
		{"backlog full", replay.ErrBacklogFull, salesforce.ErrReplayBusy},
		{"store unavailable", policy.ErrUnavailable, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fmt.Errorf("%w: dead letter 00abc", tt.err)
			got := reprocessError(in)
			if !errors.Is(got, tt.err) {
				t.Errorf("%v lost the replay error", got)
			}
			if tt.want == nil {
				if got != in {
					t.Errorf("got %v, want it unchanged", got)
				}
				return
			}
			if !errors.Is(got, tt.want) {
				t.Errorf("got %v, want it to wrap %v", got, tt.want)
			}
		})
	}
	if reprocessError(nil) != nil {
		t.Error("nil became an error")
	}
}
