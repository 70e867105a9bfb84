package problem

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
)

// TestDomainErrors drives every row of the table with the error as its
// producer wraps it, and an error of nobody's through From and FromStore.
func TestDomainErrors(t *testing.T) {
	redisDown := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	tests := []struct {
		name       string
		err        error
		code       Code
		status     int
		detail     string
		keepsCause bool
	}{
		{"replay invalid", &policy.Error{Code: policy.ErrReplayInvalid, Field: "filters[0]", Detail: `"Bad" is not an endpoint name`},
			InvalidRequest, 400, `filters[0]: "Bad" is not an endpoint name`, false},
		{"not a dead letter", &policy.Error{Code: policy.ErrReplayNotDeadLetter, ID: "abc", State: policy.Scheduled},
			NotFound, 404, "no such dead letter: callout abc is scheduled", false},
		{"no such callout", fmt.Errorf("redisstore: get: %w", policy.ErrNotFound), NotFound, 404, "no such callout", false},
		{"no such replay job", policy.ErrJobNotFound, NotFound, 404, "no such replay job", false},
		{"endpoint gone", &policy.Error{Code: policy.ErrReplayUnknownEndpoint, ID: "x", Endpoint: "pay-api"}, UnknownEndpoint, 404,
			"the dead letter's endpoint is no longer configured: pay-api", false},
		{"no such endpoint", &policy.Error{Code: policy.ErrReplayNoSuchEndpoint, Endpoint: "nosuch"}, UnknownEndpoint, 404,
			"no such endpoint: nosuch (not configured, and the store has never seen it)", false},
		{"replay to a disabled endpoint", &policy.Error{Code: policy.ErrReplayEndpointDisabled, Endpoint: "pay-api", Detail: "re-enable it"},
			EndpointDisabled, 503, "the endpoint is disabled; replays are refused until it is re-enabled", false},
		{"replay backlog full", &policy.Error{Code: policy.ErrReplayBacklogFull, Endpoint: "pay-api"}, BacklogFull, 503,
			"the endpoint's backlog is full; replay later or at a lower rate", false},
		{"superseded", &policy.Error{Code: policy.ErrReplaySuperseded, ID: "y", Other: "x"}, DeadLettered, 409,
			"its Idempotency-Key now belongs to a newer dead letter, x; replay that one", false},
		{"callout to a disabled endpoint", fmt.Errorf("redisstore: begin: %w", policy.ErrDisabled),
			EndpointDisabled, 503, "the endpoint is disabled; an admin must re-enable it", false},
		{"callout backlog full", fmt.Errorf("redisstore: begin: %w", policy.ErrBacklogFull), BacklogFull, 503,
			"the endpoint's backlog of pending callouts is full; try again later", false},
		{"organisation's share full", fmt.Errorf("redisstore: begin: %w", policy.ErrIssuerBacklogFull), BacklogFull, 503,
			"your organisation's share of the endpoint's backlog is full (pending callouts or their stored bytes); try again later", false},
		{"not confirmed durable", fmt.Errorf("redisstore: acknowledge: %w: %w", policy.ErrNotDurable, redisDown),
			StoreUnavailable, 503, notDurableDetail, true},
		{"store unavailable", fmt.Errorf("redisstore: get: %w: %w", policy.ErrUnavailable, redisDown),
			StoreUnavailable, 503, "the callout store (Redis) is unreachable", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, fn := range map[string]func(error) *Error{"From": From, "FromStore": FromStore} {
				pe := fn(tt.err)
				if pe.Code != tt.code || pe.Code.Status() != tt.status || pe.Detail != tt.detail {
					t.Errorf("%s = %s %d %q, want %s %d %q", name, pe.Code, pe.Code.Status(), pe.Detail,
						tt.code, tt.status, tt.detail)
				}
				// Every store refusal is rejected (contract §2), a write
				// not confirmed durable too.
				if pe.Outcome != "" && pe.Outcome != policy.Rejected {
					t.Errorf("%s outcome = %q, want rejected", name, pe.Outcome)
				}
				if (pe.Err != nil) != tt.keepsCause || (tt.keepsCause && !errors.Is(pe, redisDown)) {
					t.Errorf("%s cause = %v, want kept: %v", name, pe.Err, tt.keepsCause)
				}
			}
		})
	}
	// A typed error wrapped further keeps its fields.
	wrapped := fmt.Errorf("admin: %w", &policy.Error{Code: policy.ErrReplayNotDeadLetter, ID: "abc"})
	if pe := From(wrapped); pe.Code != NotFound || pe.Detail != "no such dead letter: abc" {
		t.Errorf("From(wrapped typed error) = %s %q, want not-found naming abc", pe.Code, pe.Detail)
	}
	// Every row is exercised above.
	if len(tests) != len(domainErrors) {
		t.Fatalf("%d cases for %d rows of the table", len(tests), len(domainErrors))
	}
}

func TestFromUnknownAndOwnErrors(t *testing.T) {
	odd := errors.New("ERR unexpected reply")
	if pe := From(odd); pe.Code != Internal || pe.Detail != "internal error" || !errors.Is(pe, odd) {
		t.Errorf("From(unknown) = %+v, want internal with the cause", pe)
	}
	if pe := FromStore(odd); pe.Code != StoreUnavailable || pe.Detail != "the callout store (Redis) is unreachable" ||
		!errors.Is(pe, odd) {
		t.Errorf("FromStore(unknown) = %+v, want store-unavailable with the cause", pe)
	}
	own := &Error{Code: Forbidden, Detail: "scope write needed"}
	wrapped := fmt.Errorf("admin: %w", own)
	for name, fn := range map[string]func(error) *Error{"From": From, "FromStore": FromStore} {
		if pe := fn(wrapped); pe != own {
			t.Errorf("%s(wrapped *Error) = %+v, want the *Error itself", name, pe)
		}
	}
}

func TestFromGate(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name   string
		gate   policy.Gate
		code   Code
		retry  int
		detail string
	}{
		{"disabled", policy.Gate{State: policy.GateDisabled}, EndpointDisabled, 0,
			"the endpoint is disabled; an admin must re-enable it"},
		{"paused 2.5 s rounds up", policy.Gate{State: policy.GatePaused, Until: now.Add(2500 * time.Millisecond)},
			EndpointPaused, 3, "the upstream asked for a pause (429 Retry-After); it ends in 3 s"},
		{"paused an hour (retry_after_cap): the whole pause", policy.Gate{State: policy.GatePaused, Until: now.Add(time.Hour)},
			EndpointPaused, 3600, "the upstream asked for a pause (429 Retry-After); it ends in 3600 s"},
		{"breaker open", policy.Gate{State: policy.GateBreakerOpen, Until: now.Add(20 * time.Second)}, BreakerOpen, 20,
			"the endpoint's circuit breaker is open; the next probe is in 20 s"},
		{"probe 5 minutes away: the seconds until it", policy.Gate{State: policy.GateBreakerOpen, Until: now.Add(5 * time.Minute)},
			BreakerOpen, 300, "the endpoint's circuit breaker is open; the next probe is in 300 s"},
		{"probe 199.2 s away rounds up", policy.Gate{State: policy.GateBreakerOpen, Until: now.Add(199200 * time.Millisecond)},
			BreakerOpen, 200, "the endpoint's circuit breaker is open; the next probe is in 200 s"},
		{"the caller's own partition", policy.Gate{State: policy.GateBreakerOpen, Until: now.Add(20 * time.Second), Partition: "https://a.my.salesforce.com"},
			BreakerOpen, 20, "your organisation's breaker partition of this endpoint is open (its own failures hold only its own callouts); the next probe is in 20 s"},
		{"probe out, due now: at least 1 s", policy.Gate{State: policy.GateProbing, Until: now}, BreakerOpen, 1,
			"the endpoint's circuit breaker is open; the next probe is in 1 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := FromGate(tt.gate, now)
			if pe.Code != tt.code || pe.RetryAfter != tt.retry || pe.Detail != tt.detail || pe.Code.Status() != 503 {
				t.Errorf("FromGate = %+v, want %s, Retry-After %d, %q", pe, tt.code, tt.retry, tt.detail)
			}
		})
	}
}
