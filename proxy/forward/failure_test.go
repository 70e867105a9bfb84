package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// hangUp answers nothing: it reads the whole request, then closes the
// connection.
func hangUp(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestDoFailures(t *testing.T) {
	tests := []struct {
		name    string
		answer  http.HandlerFunc // nil: no server at all (closed port)
		limits  func(ep *config.Endpoint)
		req     *Request
		reason  string // policy.Classify's reason
		limit   string // the *policy.TimeoutError's Limit, if one
		sent    bool
		outcome policy.Outcome
	}{
		{
			name: "connect refused", reason: policy.ReasonConnectRefused,
			sent: false, outcome: policy.Retryable,
		},
		{
			name:   "header timeout",
			answer: blockUntilDone(nil),
			limits: func(ep *config.Endpoint) { ep.HeaderTimeout = 50 * time.Millisecond },
			reason: policy.ReasonHeaderTimeout, limit: "header", sent: true, outcome: policy.Retryable,
		},
		{
			name: "body trickles past the attempt limit",
			answer: blockUntilDone(func(w http.ResponseWriter) {
				w.Header().Set("Content-Length", "60")
				_, _ = io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
			}),
			limits: func(ep *config.Endpoint) { ep.AttemptTimeout = 100 * time.Millisecond },
			reason: policy.ReasonAttemptTimeout, limit: "attempt", sent: true, outcome: policy.Retryable,
		},
		{
			name:   "no headers before the attempt limit",
			answer: blockUntilDone(nil),
			limits: func(ep *config.Endpoint) { ep.AttemptTimeout = 50 * time.Millisecond },
			reason: policy.ReasonAttemptTimeout, limit: "attempt", sent: true, outcome: policy.Retryable,
		},
		{
			name:   "request read, then the upstream hung up",
			answer: hangUp,
			req: &Request{Method: http.MethodPost, Path: "/x", Body: []byte(`{"a":1}`),
				Header: http.Header{"Idempotency-Key": {"k"}}},
			reason: policy.ReasonEOF, sent: true, outcome: policy.Retryable,
		},
		{
			name: "response over the limit",
			answer: func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, strings.Repeat("x", 65))
			},
			reason: policy.ReasonResponseTooLarge, sent: true, outcome: policy.Permanent,
		},
	}
	f := newForwarder(t, Options{MaxResponseBytes: 64})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", proctest.ClosedPort(t))
			if tt.answer != nil {
				srv, _ := newBackend(t, tt.answer)
				addr = srv.Listener.Addr().String()
			}
			ep := newEndpoint(t, fmt.Sprintf("fail-%d", i), "http://"+addr)
			if tt.limits != nil {
				tt.limits(ep)
			}
			req := tt.req
			if req == nil {
				req = get("/x")
			}
			a := do(f, ep, req)
			if a.Response != nil || a.Err == nil {
				t.Fatalf("attempt = %+v, want no response and an error", a)
			}
			if c := policy.Classify(0, a.Err); c.Reason != tt.reason || c.Outcome != tt.outcome {
				t.Errorf("Classify(%v) = %+v, want %s %s", a.Err, c, tt.outcome, tt.reason)
			}
			te, ok := errors.AsType[*policy.TimeoutError](a.Err)
			if tt.limit != "" && (!ok || te.Limit != tt.limit) {
				t.Errorf("Err = %v, want a *policy.TimeoutError with Limit %q", a.Err, tt.limit)
			}
			if a.Sent != tt.sent {
				t.Errorf("Sent = %v, want %v", a.Sent, tt.sent)
			}
			if strings.Contains(a.Err.Error(), "http://") {
				t.Errorf("Err %q carries the upstream URL", a.Err)
			}
		})
	}
}

func TestDoResponseLimitBoundary(t *testing.T) {
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("x", 64))
	})
	f := newForwarder(t, Options{MaxResponseBytes: 64})
	a := do(f, newEndpoint(t, "limit", srv.URL), get("/"))
	if a.Err != nil || a.Response == nil || len(a.Response.Body) != 64 {
		t.Fatalf("a body of exactly max_response_bytes: attempt = %+v", a)
	}
	if !errors.Is(do(New(Options{MaxResponseBytes: 63}), newEndpoint(t, "limit", srv.URL), get("/")).Err,
		policy.ErrResponseTooLarge) {
		t.Errorf("one byte over: want ErrResponseTooLarge")
	}
}

func TestDoCanceledByCaller(t *testing.T) {
	arrived := make(chan struct{})
	srv, _ := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	f := newForwarder(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	a := f.Do(ctx, newEndpoint(t, "cancel", srv.URL), get("/"))
	if !errors.Is(a.Err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", a.Err)
	}
	if c := policy.Classify(0, a.Err); c.Reason != policy.ReasonCanceled {
		t.Errorf("Classify = %+v, want canceled", c)
	}
	if !a.Sent {
		t.Errorf("Sent = false, the request had arrived")
	}
}

func TestDoRefusesBeforeDispatch(t *testing.T) {
	srv, rc := newBackend(t, nil)
	secretFile := t.TempDir() + "/missing"
	tests := []struct {
		name    string
		req     *Request
		headers map[string]config.SecretRef
		code    problem.Code
	}{
		{"path escape", get("/../admin"), nil, problem.PathEscape},
		{"bad query", &Request{Method: http.MethodGet, Path: "/", RawQuery: "a b"}, nil, problem.InvalidRequest},
		{"unset secret", get("/"), map[string]config.SecretRef{"Authorization": {Env: "UNSET_VAR"}}, problem.Internal},
		{"missing secret file", get("/"), map[string]config.SecretRef{"Authorization": {File: secretFile}},
			problem.Internal},
		{"secret with a newline inside", get("/"), map[string]config.SecretRef{"X-Key": {Env: "CRLF"}},
			problem.Internal},
		{"invalid method", &Request{Method: "BAD METHOD", Path: "/"}, nil, problem.InvalidRequest},
	}
	f := newForwarder(t, Options{Getenv: env(map[string]string{"CRLF": "a\r\nInjected: 1"})})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, fmt.Sprintf("refuse-%d", i), srv.URL)
			ep.Headers = tt.headers
			a := do(f, ep, tt.req)
			pe, ok := errors.AsType[*problem.Error](a.Err)
			if !ok || pe.Code != tt.code {
				t.Fatalf("Err = %v, want problem %q", a.Err, tt.code)
			}
			if a.Sent || a.Response != nil {
				t.Errorf("attempt = %+v, want nothing sent", a)
			}
			if strings.Contains(a.Err.Error(), "Injected") {
				t.Errorf("Err %q carries the secret's value", a.Err)
			}
		})
	}
	if n := len(rc.all()); n != 0 {
		t.Errorf("backend saw %d requests, want 0", n)
	}
}

func TestDoClock(t *testing.T) {
	srv, _ := newBackend(t, nil)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ticks := []time.Time{t0, t0.Add(1500 * time.Millisecond)}
	f := newForwarder(t, Options{Now: func() time.Time {
		now := ticks[0]
		ticks = ticks[1:]
		return now
	}})
	a := do(f, newEndpoint(t, "clock", srv.URL), get("/"))
	if !a.Started.Equal(t0) || a.Duration != 1500*time.Millisecond {
		t.Errorf("Started, Duration = %v, %v; want %v, 1.5s", a.Started, a.Duration, t0)
	}
}
