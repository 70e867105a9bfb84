package policy_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestErrorIsItsCode: a typed domain error matches its sentinel with
// errors.Is, wrapped or not, and no other; its text names its fields.
func TestErrorIsItsCode(t *testing.T) {
	e := &policy.Error{Code: policy.ErrReplaySuperseded, ID: "a", Other: "b"}
	if !errors.Is(e, policy.ErrReplaySuperseded) || !errors.Is(fmt.Errorf("x: %w", e), policy.ErrReplaySuperseded) {
		t.Error("errors.Is(typed error, its code) = false")
	}
	if errors.Is(e, policy.ErrReplayNotDeadLetter) {
		t.Error("errors.Is(typed error, another code) = true")
	}
	want := "replay: idempotency key belongs to a newer dead letter: callout a: other callout b"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	inv := &policy.Error{Code: policy.ErrReplayInvalid, Field: "filters[1]", Detail: "bad reason"}
	if got := inv.Error(); got != "replay: invalid request: filters[1]: bad reason" {
		t.Errorf("Error() = %q", got)
	}
}
