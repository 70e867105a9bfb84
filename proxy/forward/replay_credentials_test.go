package forward_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/dispatch"
	"github.com/calloutproxy/callout-proxy/proxy/forward"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials/credtest"
	"github.com/calloutproxy/callout-proxy/proxy/internal/redistest"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
)

const (
	replayIssuer = "https://org.my.salesforce.com"
	oldSecret    = "replay-secret-OLD-0123456789"
	newSecret    = "replay-secret-NEW-9876543210"
)

// TestReplayAfterSecretRotation is the "done" case at the store and
// dispatcher level: a callout of an OAuth2 endpoint is dead-lettered; the
// client secret file is rotated and the token server accepts only the new
// secret (revoking the tokens the old one minted); the dead letter is
// replayed from the stored request (which never held a credential) and
// reaches the upstream with a token minted with the new secret — no
// restart, and no credential in the store or the logs.
func TestReplayAfterSecretRotation(t *testing.T) {
	redistest.ForEach(t, replayAfterRotation)
}

func replayAfterRotation(t *testing.T, b redistest.Backend) {
	r := newReplayRig(t, b)
	id := r.enqueue(policy.NewCallout{
		Endpoint: "pay", Issuer: replayIssuer, Method: http.MethodPost, Path: "/charges",
		Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {`"charge-42"`}},
		Body:   []byte(`{"amount":42}`), IdempotencyKey: "charge-42",
	})
	r.round()
	dead, err := r.store.Get(r.ctx, id)
	if err != nil || dead.State != policy.DeadLettered {
		t.Fatalf("after the failing attempt: %+v, %v; want a dead letter", dead, err)
	}

	// Rotate: the file gets the new secret; the token server accepts only
	// it and revokes every token the old secret minted.
	credtest.WriteFile(t, r.dir, "client-secret", []byte(newSecret+"\n"))
	r.ts.SetSecrets(newSecret)
	r.status.Store(http.StatusCreated)
	r.clock.Advance(10 * time.Minute)

	rep := r.enqueue(policy.NewCallout{
		Endpoint: dead.Endpoint, Issuer: dead.Issuer, Method: dead.Method, Path: dead.Path, Query: dead.Query,
		Header: dead.Header, Body: dead.Body, IdempotencyKey: dead.IdempotencyKey, SourceRecord: dead.SourceRecord,
		ReplayOf: dead.ID,
	})
	r.round()
	done, err := r.store.Get(r.ctx, rep)
	if err != nil || done.State != policy.Succeeded || done.ReplayOf != dead.ID {
		t.Fatalf("replay: %+v, %v; want succeeded, replay_of %s", done, err, dead.ID)
	}

	last := r.lastSeen()
	tok := strings.TrimPrefix(last.Get("Authorization"), "Bearer ")
	if r.ts.SecretOf(tok) != newSecret || !r.ts.Valid(last.Get("Authorization")) {
		t.Errorf("the replay reached the upstream with a token not minted with the new secret")
	}
	if last.Get("Idempotency-Key") != `"charge-42"` {
		t.Errorf("Idempotency-Key = %q, want the original", last.Get("Idempotency-Key"))
	}
	reqs := r.ts.Requests()
	if n := len(reqs); n != 2 || reqs[1].Secret != newSecret {
		t.Errorf("token requests = %d, want 2, the second with the new secret", n)
	}
	for _, c := range []*policy.Callout{dead, done} {
		if _, ok := c.Header["Authorization"]; ok {
			t.Errorf("stored callout %s keeps an Authorization header", c.ID)
		}
	}
	needles := []string{oldSecret, newSecret}
	for _, q := range reqs {
		needles = append(needles, q.Token)
	}
	for _, needle := range needles {
		if needle != "" && strings.Contains(r.logs.String(), needle) {
			t.Errorf("logs carry a credential (%.12s…)", needle)
		}
	}
}

// replayRig is a store, a forwarder and a dispatcher on one injected clock,
// with an OAuth2 endpoint "pay" whose upstream answers status to requests
// with a valid token (401 otherwise) and records every request's header.
type replayRig struct {
	t      *testing.T
	ctx    context.Context
	ts     *credtest.TokenServer
	status atomic.Int32
	dir    string
	clock  *clocktest.Clock
	logs   *proctest.LogBuffer
	ep     *config.Endpoint
	store  *redisstore.Store
	d      *dispatch.Dispatcher

	mu   sync.Mutex
	seen []http.Header
}

func newReplayRig(t *testing.T, b redistest.Backend) *replayRig {
	r := &replayRig{t: t, dir: t.TempDir(), logs: &proctest.LogBuffer{},
		clock: clocktest.New(time.UnixMilli(1_700_000_000_000))}
	r.ts = credtest.NewTokenServer(t, "replay-client", oldSecret)
	r.status.Store(http.StatusServiceUnavailable)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		r.ts.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(int(r.status.Load()))
		})).ServeHTTP(w, req)
	}))
	t.Cleanup(up.Close)
	secretFile := credtest.WriteFile(t, r.dir, "client-secret", []byte(oldSecret+"\n"))
	cfg := replayConfig(t, up.URL, r.ts, secretFile)
	r.ep, _ = cfg.Endpoint("pay")
	logger := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], 7)
	r.store = redisstore.New(b.Client, redisstore.Options{PinScriptTime: true, Now: r.clock.Now, Rand: rand.NewChaCha8(seed),
		IdempotencyRetention: 24 * time.Hour, DeadLetterRetention: 720 * time.Hour, Logger: logger})
	fwd := forward.New(forward.Options{Now: r.clock.Now, Logger: logger,
		Getenv: func(k string) string { return map[string]string{"CLIENT_ID": "replay-client"}[k] }})
	t.Cleanup(fwd.CloseIdleConnections)
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.d = dispatch.New(dispatch.Options{Config: cfg, Store: r.store, Upstream: fwd, Metrics: m, Logger: logger,
		Now: r.clock.Now, Rand: func() float64 { return 0.5 }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	r.ctx = ctx
	return r
}

// enqueue records nc due now, as the ingress (respond-async) or a replay does.
func (r *replayRig) enqueue(nc policy.NewCallout) string {
	r.t.Helper()
	res, err := r.store.Enqueue(r.ctx, nc, policy.EnqueueOptions{
		Limits: policy.BacklogLimits{MaxItems: r.ep.MaxBacklogItems, MaxBytes: r.ep.MaxBacklogBytes}})
	if err != nil || res.ID == "" {
		r.t.Fatalf("enqueue: %+v, %v", res, err)
	}
	return res.ID
}

// round runs one dispatcher round and waits for its attempts.
func (r *replayRig) round() {
	r.d.Round(r.ctx)
	r.d.Wait()
}

// lastSeen is the header of the last request the upstream received.
func (r *replayRig) lastSeen() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

// replayConfig is a loaded configuration with one OAuth2 endpoint "pay"
// whose callouts are dead-lettered after one attempt.
func replayConfig(t *testing.T, upstream string, ts *credtest.TokenServer, secretFile string) *config.Config {
	t.Helper()
	yaml := `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth:
  issuers: [` + replayIssuer + `]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: JWT
policy:
  max_attempts: 1
endpoints:
  pay:
    url: ` + upstream + `
    allowed_networks: [127.0.0.0/8]
    oauth2:
      token_url: ` + ts.URL + `
      client_id: {env: CLIENT_ID}
      client_secret: {file: ` + filepath.Base(secretFile) + `}
      ca_file: ` + ts.CAFile + `
`
	path := credtest.WriteFile(t, filepath.Dir(secretFile), "config.yaml", []byte(yaml))
	cfg, err := config.Load(path, func(k string) string {
		return map[string]string{"JWT": "replay-test-hs256-secret-0123456789abcdef", "CLIENT_ID": "replay-client"}[k]
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}
