package admin

import (
	"context"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

var (
	_ EndpointStore = (*fakeEndpointStore)(nil)
	_ DeadLetters   = (*fakeDeadLetters)(nil)
	_ ReplayJobs    = (*fakeReplayJobs)(nil)
)

// fakeEndpointStore is an EndpointStore whose methods are its Fn fields;
// an unset one panics, so a test sets exactly what its routes call.
type fakeEndpointStore struct {
	EndpointStateFn func(ctx context.Context, endpoint string) (policy.EndpointState, error)
	EnableFn        func(ctx context.Context, endpoint string) error
	DisableFn       func(ctx context.Context, endpoint, reason string) (policy.DisableResult, error)
	ResetBreakerFn  func(ctx context.Context, endpoint string) error
}

func (f *fakeEndpointStore) EndpointState(ctx context.Context, endpoint string) (policy.EndpointState, error) {
	return f.EndpointStateFn(ctx, endpoint)
}
func (f *fakeEndpointStore) Enable(ctx context.Context, endpoint string) error {
	return f.EnableFn(ctx, endpoint)
}
func (f *fakeEndpointStore) Disable(ctx context.Context, endpoint, reason string) (policy.DisableResult, error) {
	return f.DisableFn(ctx, endpoint, reason)
}
func (f *fakeEndpointStore) ResetBreaker(ctx context.Context, endpoint string) error {
	return f.ResetBreakerFn(ctx, endpoint)
}

// fakeDeadLetters is a DeadLetters whose methods are its Fn fields.
type fakeDeadLetters struct {
	DeadLettersFn func(ctx context.Context, q replay.Query) (replay.Page, error)
	DeadLetterFn  func(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	CalloutFn     func(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error)
	ReplayFn      func(ctx context.Context, id, by, jobID string) (replay.Result, error)
	DiscardFn     func(ctx context.Context, id string) error
}

func (f *fakeDeadLetters) DeadLetters(ctx context.Context, q replay.Query) (replay.Page, error) {
	return f.DeadLettersFn(ctx, q)
}
func (f *fakeDeadLetters) DeadLetter(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error) {
	return f.DeadLetterFn(ctx, id)
}
func (f *fakeDeadLetters) Callout(ctx context.Context, id string) (*policy.Callout, policy.ReplayMark, error) {
	return f.CalloutFn(ctx, id)
}
func (f *fakeDeadLetters) Replay(ctx context.Context, id, by, jobID string) (replay.Result, error) {
	return f.ReplayFn(ctx, id, by, jobID)
}
func (f *fakeDeadLetters) Discard(ctx context.Context, id string) error { return f.DiscardFn(ctx, id) }

// fakeReplayJobs is a ReplayJobs whose methods are its Fn fields.
type fakeReplayJobs struct {
	CreateJobFn func(ctx context.Context, sp replay.Spec, by string) (policy.ReplayJob, error)
	JobFn       func(ctx context.Context, id string) (policy.ReplayJob, error)
	JobsFn      func(ctx context.Context, limit int) ([]policy.ReplayJob, error)
	JobItemsFn  func(ctx context.Context, id string, offset, limit int) (replay.ItemPage, error)
	CancelJobFn func(ctx context.Context, id, by string) (policy.ReplayJob, error)
}

func (f *fakeReplayJobs) CreateJob(ctx context.Context, sp replay.Spec, by string) (policy.ReplayJob, error) {
	return f.CreateJobFn(ctx, sp, by)
}
func (f *fakeReplayJobs) Job(ctx context.Context, id string) (policy.ReplayJob, error) {
	return f.JobFn(ctx, id)
}
func (f *fakeReplayJobs) Jobs(ctx context.Context, limit int) ([]policy.ReplayJob, error) {
	return f.JobsFn(ctx, limit)
}
func (f *fakeReplayJobs) JobItems(ctx context.Context, id string, offset, limit int) (replay.ItemPage, error) {
	return f.JobItemsFn(ctx, id, offset, limit)
}
func (f *fakeReplayJobs) CancelJob(ctx context.Context, id, by string) (policy.ReplayJob, error) {
	return f.CancelJobFn(ctx, id, by)
}
