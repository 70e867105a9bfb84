package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// newFakeEnv is the dead-letter and replay-job routes over fakes (nil: not
// mounted), with the tokens ops (write) and viewer (read).
func newFakeEnv(t *testing.T, dl *fakeDeadLetters, jobs *fakeReplayJobs) *dltEnv {
	t.Helper()
	tokens := testTokens(t, dltWrite, dltRead)
	e := &dltEnv{logs: &proctest.LogBuffer{}}
	e.logs.CheckAuditResults(t)
	logger := slog.New(slog.NewJSONHandler(e.logs, nil))
	d := Deps{Config: dltConfig(), Tokens: tokens, Logger: logger}
	if dl != nil { // a nil *fake in the interface would mount the routes
		d.DeadLetters = dl
	}
	if jobs != nil {
		d.ReplayJobs = jobs
	}
	e.h = New(d)
	return e
}

// TestRoutesAnswerDomainErrors: every dead-letter and replay-job route
// answers the errors its service returns through the one table
// (problem.From): the code, and for a refused write an audit line with it
// as result; an error the table does not know is a 500.
func TestRoutesAnswerDomainErrors(t *testing.T) {
	errs := []struct {
		name string
		err  error
		code problem.Code
	}{
		{"invalid", fmt.Errorf("%w: malformed cursor %q", replay.ErrInvalid, "zz"), problem.InvalidRequest},
		{"not a dead letter", fmt.Errorf("%w: x", replay.ErrNotDeadLetter), problem.NotFound},
		{"no such callout", policy.ErrNotFound, problem.NotFound},
		{"no such job", policy.ErrJobNotFound, problem.NotFound},
		{"endpoint gone", fmt.Errorf("%w: pay-api", replay.ErrUnknownEndpoint), problem.UnknownEndpoint},
		{"endpoint disabled", fmt.Errorf("%w: pay-api", replay.ErrEndpointDisabled), problem.EndpointDisabled},
		{"backlog full", fmt.Errorf("%w: pay-api", replay.ErrBacklogFull), problem.BacklogFull},
		{"superseded", fmt.Errorf("%w: y holds the key of x", replay.ErrSuperseded), problem.DeadLettered},
		{"store down", fmt.Errorf("redisstore: get: %w: %w", policy.ErrUnavailable, errors.New("EOF")),
			problem.StoreUnavailable},
		{"nobody's", errors.New("ERR unexpected reply"), problem.Internal},
	}
	routes := []struct {
		method, path, token, body string
		action                    string // the audit line's action; "" for a read
	}{
		{"GET", "/admin/v1/dead-letters", dltRead, "", ""},
		{"GET", "/admin/v1/dead-letters/x", dltRead, "", ""},
		{"GET", "/admin/v1/callouts/x", dltRead, "", ""},
		{"DELETE", "/admin/v1/dead-letters/x", dltWrite, "", "discard"},
		{"POST", "/admin/v1/replay-jobs", dltWrite, `{"ids":["x"]}`, "replay_job.create"},
		{"GET", "/admin/v1/replay-jobs", dltRead, "", ""},
		{"GET", "/admin/v1/replay-jobs/j", dltRead, "", ""},
		{"GET", "/admin/v1/replay-jobs/j/items", dltRead, "", ""},
		{"POST", "/admin/v1/replay-jobs/j/cancel", dltWrite, "", "replay_job.cancel"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			two := func(context.Context, string) (*policy.Callout, policy.ReplayMark, error) {
				return nil, policy.ReplayMark{}, tt.err
			}
			job := func(context.Context, string) (policy.ReplayJob, error) { return policy.ReplayJob{}, tt.err }
			e := newFakeEnv(t, &fakeDeadLetters{
				DeadLettersFn: func(context.Context, replay.Query) (replay.Page, error) { return replay.Page{}, tt.err },
				DeadLetterFn:  two, CalloutFn: two,
				DiscardFn: func(context.Context, string) error { return tt.err },
			}, &fakeReplayJobs{
				CreateJobFn: func(context.Context, replay.Spec, string) (policy.ReplayJob, error) {
					return policy.ReplayJob{}, tt.err
				},
				JobFn:  job,
				JobsFn: func(context.Context, int) ([]policy.ReplayJob, error) { return nil, tt.err },
				JobItemsFn: func(context.Context, string, int, int) (replay.ItemPage, error) {
					return replay.ItemPage{}, tt.err
				},
				CancelJobFn: func(context.Context, string, string) (policy.ReplayJob, error) {
					return policy.ReplayJob{}, tt.err
				},
			})
			for _, rt := range routes {
				before := len(e.audits(t))
				wantProblem(t, e.do(t, rt.method, rt.path, rt.token, rt.body), tt.code)
				a := e.audits(t)[before:]
				switch {
				case rt.action == "" && len(a) != 0:
					t.Errorf("%s %s: a read was audit-logged: %v", rt.method, rt.path, a)
				case rt.action != "" && (len(a) != 1 || a[0]["action"] != rt.action || a[0]["token"] != "ops" ||
					a[0]["result"] != auth.AuditResult(tt.code)):
					t.Errorf("%s %s: audit = %v, want one %s line by ops, %s", rt.method, rt.path, a, rt.action, tt.code)
				}
			}
		})
	}
}

// TestReplaySuperseded: a dead letter whose key a newer dead letter holds
// is a 409 dead-lettered naming the newer one (Callout-Id, callout_id), to
// be replayed instead.
func TestReplaySuperseded(t *testing.T) {
	e := newFakeEnv(t, &fakeDeadLetters{
		ReplayFn: func(_ context.Context, id, by, jobID string) (replay.Result, error) {
			if id != "old" || by != "ops" || jobID != "" {
				t.Errorf("Replay(%q, %q, %q), want old by ops alone", id, by, jobID)
			}
			return replay.Result{DeadLetterID: id, ReplayID: "newer", State: policy.DeadLettered},
				fmt.Errorf("%w: newer holds the key of old", replay.ErrSuperseded)
		},
	}, nil)
	w := e.do(t, "POST", "/admin/v1/dead-letters/old/replay", dltWrite, "")
	pb := wantProblem(t, w, problem.DeadLettered)
	if pb.CalloutID != "newer" || w.Header().Get("Callout-Id") != "newer" {
		t.Fatalf("problem %+v, Callout-Id %q; want the newer dead letter named", pb, w.Header().Get("Callout-Id"))
	}
	// Without ReplayJobs its routes are not mounted.
	wantProblem(t, e.do(t, "GET", "/admin/v1/replay-jobs", dltRead, ""), problem.NotFound)
	if w := e.do(t, "GET", "/metrics", "", ""); w.Code != http.StatusNotFound {
		t.Fatalf("/metrics without a Gatherer = %d, want 404", w.Code)
	}
}
