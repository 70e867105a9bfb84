package salesforce

import (
	"context"
	crand "crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/logx"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
	"github.com/calloutproxy/callout-proxy/proxy/redact"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/outbox"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// The store's outbox is the writer's Outbox and the reprocess poller's
// request claims.
var (
	_ Outbox            = (*outbox.Outbox)(nil)
	_ ReprocessRequests = (*outbox.Outbox)(nil)
)

// t0 is a round Unix-ms instant.
var t0 = time.UnixMilli(1_700_000_000_000).UTC()

const (
	owner  = "005000000000001AAA"
	owner2 = "005000000000002AAA"
	day    = 24 * time.Hour
)

// testKey is the connected app's key, generated once per test binary: RSA
// key generation would otherwise dominate the tests' time.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(crand.Reader, authtest.KeyBits)
	if err != nil {
		panic(err)
	}
	return k
})

// env is one proxy replica's Salesforce side against an emulator: a store
// with the outbox on (miniredis), a client and a writer.
type env struct {
	t       testing.TB
	clk     *clocktest.Clock
	mini    *miniredis.Miniredis
	rdb     redis.UniversalClient
	store   *redisstore.Store
	outbox  *outbox.Outbox
	emu     *sfemu.Server
	client  *sfapi.Client
	writer  *Writer
	cfg     *config.Config
	metrics *Metrics
	reg     *prometheus.Registry
	logs    *proctest.LogBuffer
}

// envOption changes the configuration before the writer is built.
type envOption func(*config.Config)

func withWebhook(url string) envOption {
	return func(c *config.Config) { c.Salesforce.WebhookURL = url }
}

// newEnv starts an emulator and builds a replica against it.
func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newEnvWith is newEnv with the emulator's options changed by emu (nil:
// none).
func newEnvWith(t testing.TB, emu func(*sfemu.Options), opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, clk: clocktest.New(t0), logs: &proctest.LogBuffer{}}
	key := testKey()
	eo := sfemu.Options{PublicKey: &key.PublicKey, ClientID: sfemu.ClientID, Username: sfemu.Username,
		Objects: schema(), Defaults: defaults(), Now: e.clk.Now}
	if emu != nil {
		emu(&eo)
	}
	e.emu = sfemu.New(t, eo)
	e.mini = miniredis.RunT(t)
	e.rdb = redis.NewClient(&redis.Options{Addr: e.mini.Addr(), DisableIdentity: true})
	t.Cleanup(func() { _ = e.rdb.Close() })
	e.cfg = testConfig(e.emu.URL)
	for _, o := range opts {
		o(e.cfg)
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], 42)
	e.store = redisstore.New(e.rdb, redisstore.Options{PinScriptTime: true, Now: e.clk.Now, Rand: rand.NewChaCha8(seed),
		DeadLetterRetention: e.cfg.Policy.DeadLetterRetention, Outbox: true})
	e.outbox = outbox.New(e.rdb, outbox.Options{Now: e.clk.Now, PinScriptTime: true, DeadLetterRetention: e.cfg.Policy.DeadLetterRetention})
	e.reg = prometheus.NewRegistry()
	var err error
	if e.metrics, err = NewMetrics(e.reg); err != nil {
		t.Fatal(err)
	}
	e.client, err = sfapi.NewClient(sfapi.Options{
		Credentials: sfapi.Credentials{LoginURL: e.emu.URL, ClientID: sfemu.ClientID, Username: sfemu.Username, Key: key},
		Transport:   e.emu.Client().Transport, Now: e.clk.Now, OnResult: e.metrics.Result,
		Logger: e.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.writer = e.newWriter()
	return e
}

// logger is a log into e.logs built as the composition root builds it
// (logx.New: a line logged with a callout's context gets its callout_id
// and trace_id).
func (e *env) logger() *slog.Logger {
	l, _ := logx.New(e.logs, logx.Options{})
	return l
}

// newWriter builds a writer (a replica) on the env's store and client.
func (e *env) newWriter() *Writer {
	e.t.Helper()
	w, err := NewWriter(WriterOptions{API: e.client, Store: e.store, Outbox: e.outbox, Salesforce: *e.cfg.Salesforce,
		Endpoints: endpointsOf(e.cfg), DeadLetterRetention: e.cfg.Policy.DeadLetterRetention,
		Metrics: e.metrics, Now: e.clk.Now, Rand: func() float64 { return 0.5 }, Owner: "replica-1",
		Logger: e.logger()})
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// endpointsOf is what the composition root hands the writer of the
// configured endpoints (cmd/callout-proxy sfEndpoints).
func endpointsOf(cfg *config.Config) map[string]Endpoint {
	out := map[string]Endpoint{}
	for name, ep := range cfg.Endpoints {
		injected := slices.Sorted(maps.Keys(ep.Headers))
		out[name] = Endpoint{Owner: ep.Owner, Redact: redact.New(ep.Redact, injected),
			CompletionEvents: ep.CompletionEvents}
	}
	return out
}

// schema declares the objects of apex-stubs/ to the emulator, with the
// field lengths of fields.go (what fields_apex_test.go checks against the
// metadata).
func schema() map[string]map[string]int {
	fields := func(fs []Field) map[string]int {
		m := map[string]int{}
		for _, f := range fs {
			m[f.Name] = 0
			if f.Type == Text || f.Type == LongTextArea {
				m[f.Name] = f.Length
			}
		}
		return m
	}
	return map[string]map[string]int{
		FailedCalloutObject:      fields(FailedCalloutFields),
		CalloutResultEvent:       fields(CalloutResultFields),
		"CustomNotificationType": {"Id": 0, "DeveloperName": 0},
	}
}

// defaults are the field defaults of apex-stubs/ the emulator applies to a
// new record: Status__c's picklist default, New (fields_apex_test.go
// checks it against the metadata).
func defaults() map[string]sfemu.Record {
	return map[string]sfemu.Record{FailedCalloutObject: {"Status__c": policy.RecordNew}}
}

func testConfig(loginURL string) *config.Config {
	p := policy.Defaults()
	return &config.Config{
		Policy: p,
		Endpoints: map[string]*config.Endpoint{
			"payments": {Name: "payments", Owner: owner,
				Headers: map[string]config.SecretRef{"X-Api-Key": {Env: "PAYMENTS_KEY"}},
				Redact:  config.Redact{Headers: []string{"X-Card-Token"}, Query: []string{"api_key"}, JSONFields: []string{"card.number"}}},
			"orders": {Name: "orders"},
			"ledger": {Name: "ledger", Owner: owner2},
		},
		Salesforce: &config.Salesforce{LoginURL: loginURL, ClientIDEnv: "SF_CLIENT_ID", Username: sfemu.Username,
			APIVersion: config.DefaultAPIVersion, OutboxInterval: config.DefaultOutboxInterval,
			PollInterval: config.DefaultPollInterval, APIUsageSlowdown: config.DefaultAPIUsageSlowdown,
			SlowdownInterval: config.DefaultSlowdownInterval, LimitPause: config.DefaultLimitPause,
			RequestTimeout: config.DefaultRequestTimeout, BatchLinger: config.DefaultBatchLinger,
			BatchMaxBytes: config.DefaultBatchMaxBytes},
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newCallout is a callout of endpoint as a caller sends it, with secrets to
// redact: a card number in the body, a card token header, an api_key in
// the query.
func newCallout(endpoint string) policy.NewCallout {
	return policy.NewCallout{
		Endpoint: endpoint, Issuer: "https://org.my.salesforce.com", Method: http.MethodPost,
		Path: "/v1/charges", Query: "api_key=s3cret&x=1",
		Header: http.Header{"Content-Type": {"application/json"}, "X-Card-Token": {"tok_123"}},
		Body:   []byte(`{"amount":5,"card":{"number":"4242424242424242"}}`), IdempotencyKey: "key-1",
		SourceRecord: "a01000000000001AAA",
	}
}

// failed503 is a completion of a retryable 503 that counts toward the
// breaker, ending as action.
func failed503(action policy.Action, reason policy.DeadLetterReason) policy.Completion {
	return policy.Completion{
		Action: action, Reason: reason, CountsTowardBreaker: true, NextAttemptAt: t0.Add(time.Hour),
		Attempt: &policy.Attempt{StartedAt: t0, Duration: time.Second, Status: 503, Outcome: policy.Retryable,
			Error: "status_5xx"},
		Response: &policy.Response{Status: 503, Header: http.Header{"Content-Type": {"application/json"}},
			Body: []byte(`{"error":"unavailable","card":{"number":"4242"}}`)},
		Error: "status_5xx", Lease: time.Minute,
	}
}

// deadLetters enqueues n callouts of endpoint, claims them as the
// dispatcher does and ends each as an exhausted dead letter, as one outage.
func (e *env) deadLetters(endpoint string, n int) []string {
	e.t.Helper()
	return e.scheduled(endpoint, n, func(nc *policy.NewCallout) {}, failed503(policy.ActionDeadLetter,
		policy.DeadLetterExhausted))
}

// scheduled enqueues n callouts (changed by edit), claims them and
// completes each with comp.
func (e *env) scheduled(endpoint string, n int, edit func(*policy.NewCallout), comp policy.Completion) []string {
	e.t.Helper()
	// Thousands of them (BenchmarkAPICost) take longer than ctxT allows.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+time.Duration(n)*10*time.Millisecond)
	defer cancel()
	for range n {
		nc := newCallout(endpoint)
		nc.IdempotencyKey = ""
		edit(&nc)
		if _, err := e.store.Enqueue(ctx, nc, policy.EnqueueOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	var ids []string
	for len(ids) < n {
		res, err := e.store.Claim(ctx, endpoint, redisstore.ClaimOptions{Batch: 1000, Lease: time.Minute})
		if err != nil || len(res.Claimed) == 0 {
			e.t.Fatalf("claim: %v (%d claimed of %d)", err, len(ids), n)
		}
		for _, cl := range res.Claimed {
			if _, err := e.store.Complete(ctx, cl, comp); err != nil {
				e.t.Fatal(err)
			}
			ids = append(ids, cl.ID)
		}
	}
	return ids
}

// round runs one writer round, failing t on an error.
func (e *env) round(t testing.TB) Report {
	t.Helper()
	rep, err := e.writer.Round(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// drain runs rounds until one claims nothing (at most 20).
func (e *env) drain() {
	e.t.Helper()
	for range 20 {
		if e.round(e.t).Claimed == 0 {
			return
		}
	}
	e.t.Fatal("the outbox never drained")
}

// statusChanged queues the write of status to id's record
// (Writer.StatusChanged, no replay id), failing the test on an error.
func (e *env) statusChanged(id, status string) {
	e.t.Helper()
	if err := e.writer.StatusChanged(ctxT(e.t), id, status, ""); err != nil {
		e.t.Fatal(err)
	}
}

// entry reads an outbox entry and fails when it is not queued.
func (e *env) entry(name string) outbox.Info {
	e.t.Helper()
	info, ok, err := e.outbox.Entry(ctxT(e.t), name)
	if err != nil || !ok {
		e.t.Fatalf("outbox entry %s: %v (queued %v)", name, err, ok)
	}
	return info
}

func (e *env) outboxLen() int64 {
	e.t.Helper()
	n, err := e.outbox.Len(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// record returns the emulator's Failed_Callout__c of id.
func (e *env) record(id string) sfemu.Record {
	e.t.Helper()
	r, ok := e.emu.Record(FailedCalloutObject, ExternalIDField, id)
	if !ok {
		e.t.Fatalf("no Failed_Callout__c for %s", id)
	}
	return r
}

// settledDeadLetters is deadLetters of endpoint "orders" with their
// record writes drained and the clock a minute on, so that a reprocess
// request made next is later than the records' last change.
func (e *env) settledDeadLetters(n int) []string {
	e.t.Helper()
	roots := e.deadLetters("orders", n)
	e.drain()
	e.clk.Advance(time.Minute)
	return roots
}

// wantReprocessing fails t unless the record of each root shows
// Reprocessing (its write queue drained first by the caller).
func (e *env) wantReprocessing(t *testing.T, roots []string) {
	t.Helper()
	for _, root := range roots {
		if st := e.record(root)["Status__c"]; st != policy.RecordReprocessing {
			t.Errorf("record %s is %v, want %s", root, st, policy.RecordReprocessing)
		}
	}
}
