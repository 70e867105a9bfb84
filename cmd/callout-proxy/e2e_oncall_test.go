package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// TestE2EHelpAndSubcommands: --help and help list every subcommand and
// exit 0; version prints the build, as JSON too.
func TestE2EHelpAndSubcommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var out, errb bytes.Buffer
		if err := run(ctx, args, func(string) string { return "" }, &out, &errb); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, sub := range []string{"token --config", "validate --config", "healthcheck", "version", "--config FILE"} {
			if !strings.Contains(out.String(), sub) {
				t.Fatalf("%v: usage lacks %q:\n%s", args, sub, out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"token", "--help"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatalf("token --help: %v", err)
	}
	out.Reset()
	if err := run(ctx, []string{"version", "--json"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var b api.BuildInfo
	if err := json.Unmarshal(out.Bytes(), &b); err != nil || b.Version == "" || !strings.HasPrefix(b.GoVersion, "go") {
		t.Fatalf("version --json = %s (%v)", out.String(), err)
	}
	err := run(ctx, []string{"frobnicate"}, func(string) string { return "" }, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "subcommands: validate, token, healthcheck, version") {
		t.Fatalf("unknown subcommand: %v", err)
	}
}

// TestE2EValidate: validate accepts a configuration that would start
// (and says what it found), names the key of a bad one and a missing
// secret (exit 2), and listens on nothing.
func TestE2EValidate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	good := writeConfig(t, devConfig(proctest.Endpoint("pay-api", "https://api.example.com")+proctest.Endpoint("crm-api", "https://crm.example.com")))
	env := testEnv()
	var out bytes.Buffer
	if err := run(ctx, []string{"validate", "--config", good}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configuration OK", "endpoints (2): crm-api, pay-api", "redis: embedded", "salesforce: off"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("validate printed:\n%s\nlacks %q", out.String(), want)
		}
	}
	bad := writeConfig(t, devConfig(proctest.Endpoint("Bad_Name", "https://api.example.com"))+"log:\n  level: loud\n")
	err := run(ctx, []string{"validate", "--config", bad}, func(k string) string { return env[k] }, io.Discard, io.Discard)
	if exitCode(err) != 2 || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "endpoints.Bad_Name") ||
		!strings.Contains(err.Error(), "log.level") {
		t.Fatalf("bad configuration: %v", err)
	}
	noSecret := map[string]string{"TEST_ADMIN_TOKEN": "admin-token-value", "TEST_VIEWER_TOKEN": "viewer-token-value"}
	err = run(ctx, []string{"validate", "--config", good}, func(k string) string { return noSecret[k] }, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "TEST_JWT_SECRET") {
		t.Fatalf("missing secret: %v", err)
	}
	if err := run(ctx, []string{"validate"}, func(string) string { return "" }, io.Discard, io.Discard); exitCode(err) != 2 {
		t.Fatalf("no --config: %v", err)
	}
}

// TestE2EHealthcheck: the healthcheck subcommand (the image's health
// check) passes against a running proxy, saying its build, and fails (exit
// 1) against a port nothing listens on; /healthz reports the build.
func TestE2EHealthcheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startProxy(t, devConfig(proctest.Endpoint("pay-api", "https://api.example.com")), testEnv())
	var out bytes.Buffer
	if err := run(ctx, []string{"healthcheck", "--url", p.URL + "/healthz"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ok: "+p.URL+"/healthz answers, callout-proxy ") {
		t.Fatalf("healthcheck printed %q", out.String())
	}
	_, body := get(t, p.URL+"/healthz")
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil || m["status"] != "ok" || m["version"] == "" || m["go_version"] == "" {
		t.Fatalf("/healthz = %s (%v)", body, err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(proctest.ClosedPort(t)) + "/healthz"
	err := run(ctx, []string{"healthcheck", "--url", url, "--timeout", "2s"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("against a closed port: %v", err)
	}
	// A configuration with port 0 cannot name its own address.
	err = run(ctx, []string{"healthcheck", "--config", writeConfig(t, devConfig(proctest.Endpoint("a", "https://a.example.com")))},
		func(k string) string { return testEnv()[k] }, io.Discard, io.Discard)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "pass --url") {
		t.Fatalf("port 0: %v", err)
	}
}

// TestE2EAttemptLogsAlike: the synchronous first attempt and the
// dispatcher's retries are logged at the same level with the same fields;
// the dead-letter line names the last status and error; notify_owner is
// false with nobody to notify (no salesforce section). The startup line
// names the store and the build; callout_build_info is exported; every
// endpoint's dead-letter series exists at 0 before its first dead letter.
func TestE2EAttemptLogsAlike(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, statusHandler)
	p := startProxy(t, withPolicy(devConfig(proctest.Endpoint("flaky-api", up.URL, loopbackNets, "owner: 005000000000001AAA")+
		proctest.Endpoint("quiet-api", up.URL, loopbackNets)), "max_attempts: 3", "base_delay: 1ms", "max_delay: 2ms"), testEnv())

	for _, reason := range []string{"exhausted", "permanent", "ambiguous", "endpoint_disabled"} {
		line := metricLine(metricsText(t, p), "callout_dead_letters_total", `endpoint="quiet-api"`, `reason="`+reason+`"`)
		if !strings.HasSuffix(line, " 0") {
			t.Fatalf("quiet-api's %s series before any dead letter: %q", reason, line)
		}
	}
	if line := metricLine(metricsText(t, p), "callout_build_info", `goversion="go`); !strings.HasSuffix(line, " 1") {
		t.Fatalf("callout_build_info: %q", line)
	}
	start := p.logs.Records("listening")[0]
	if start["redis"] != "embedded" || start["redis_embedded"] != true || start["version"] == "" {
		t.Fatalf("startup line: %v", start)
	}

	resp, body := p.call(t, http.MethodPost, "/callout/flaky-api/status/503", strings.NewReader(`{"a":1}`), keyed("flaky-1", false))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first attempt: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("Callout-Id")
	p.logs.WaitFor(t, `"msg":"dead letter"`, 30*time.Second)
	var mine []map[string]any
	for _, a := range p.logs.Records("attempt") {
		if a["callout_id"] == id {
			mine = append(mine, a)
		}
	}
	if len(mine) != 3 {
		t.Fatalf("%d attempt lines for %s, want 3:\n%s", len(mine), id, p.logs)
	}
	fields := []string{"time", "level", "msg", "endpoint", "callout_id", "attempt", "kind", "status", "outcome",
		"reason", "duration_ms", "error"}
	for i, a := range mine {
		if len(a) != len(fields) {
			t.Fatalf("attempt %d has fields %v, want exactly %v", i+1, a, fields)
		}
		for _, f := range fields {
			if _, ok := a[f]; !ok {
				t.Fatalf("attempt %d lacks %s: %v", i+1, f, a)
			}
		}
		wantKind := "retry"
		if i == 0 {
			wantKind = "first" // synchronous, by the ingress
		}
		if a["level"] != "INFO" || a["attempt"] != float64(i+1) || a["kind"] != wantKind || a["status"] != float64(503) ||
			a["outcome"] != "retryable" || a["reason"] != policy.ReasonStatus5xx {
			t.Fatalf("attempt %d = %v", i+1, a)
		}
	}
	dl := p.logs.Records("dead letter")[0]
	if dl["callout_id"] != id || dl["dead_letter_reason"] != "exhausted" || dl["last_status"] != float64(503) ||
		dl["last_error"] != policy.ReasonStatus5xx || dl["attempts"] != float64(3) || dl["notify_owner"] != false {
		t.Fatalf("dead-letter line: %v", dl)
	}
}

// TestE2EDeferredAndEnableCounted: a retry the dispatcher puts back
// behind a 429's pause counts in callout_deferred_total (not only
// front-door refusals); re-enabling a disabled endpoint counts
// callout_breaker_transitions_total{to="closed"}, callout_breaker_state's
// next state (there is no "enabled" state).
func TestE2EDeferredAndEnableCounted(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, statusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("busy-api", up.URL, loopbackNets)), testEnv())
	ep := `endpoint="busy-api"`
	if v := metricValue(t, p, "callout_deferred_total", ep, `reason="paused"`); v != 0 {
		t.Fatalf("deferred before = %v", v)
	}
	resp, body := p.call(t, http.MethodPost, "/callout/busy-api/status/429", strings.NewReader(`{}`), keyed("busy-1", true))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("respond-async: %d %s", resp.StatusCode, body)
	}
	pollUntil(t, 30*time.Second, "the dispatcher's retry held behind the pause", func() bool {
		return metricValue(t, p, "callout_deferred_total", ep, `reason="paused"`) == 1
	})
	if doc := endpointDoc(t, p.AdminURL, "busy-api"); doc.Gate != "paused" || doc.BacklogItems != 1 {
		t.Fatalf("endpoint = %+v", doc)
	}
	admin(t, p.AdminURL, http.MethodPost, "/admin/v1/endpoints/busy-api/disable", opsToken, nil)
	admin(t, p.AdminURL, http.MethodPost, "/admin/v1/endpoints/busy-api/enable", opsToken, nil)
	for to, want := range map[string]float64{"disabled": 1, "closed": 1, "enabled": 0} {
		if v := metricValue(t, p, "callout_breaker_transitions_total", ep, `to="`+to+`"`); v != want {
			t.Fatalf("transitions to %s = %v, want %v", to, v, want)
		}
	}
}

// metricsText is the admin listener's /metrics.
func metricsText(t *testing.T, p *proxyUnderTest) string {
	t.Helper()
	_, body := get(t, p.AdminURL+"/metrics")
	return string(body)
}

// TestE2ETextLogFormat: log.format text writes key=value lines (the
// listening line among them); log.level warn leaves out the info lines.
func TestE2ETextLogFormat(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, devConfig(proctest.Endpoint("pay-api", "https://api.example.com"))+"log:\n  format: text\n  level: warn\n")
	env := testEnv()
	ctx, cancel := context.WithCancel(context.Background())
	var logs proctest.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--config", path}, func(k string) string { return env[k] }, io.Discard, &logs)
	}()
	logs.WaitFor(t, "level=WARN msg=\"NO REDIS CONFIGURED", 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := logs.String(); strings.Contains(s, "msg=listening") || strings.Contains(s, `{"`) {
		t.Fatalf("warn-level text logs:\n%s", s)
	}
}

// TestE2EClockOffsetExported: every replica exports how far its clock is
// from Redis's (contract §1); an unskewed process on the embedded store
// reads within a second of it once the first measurement is in.
func TestE2EClockOffsetExported(t *testing.T) {
	t.Parallel()
	up := proctest.NewUpstream(t, statusHandler)
	p := startProxy(t, devConfig(proctest.Endpoint("api", up.URL, loopbackNets)), testEnv())
	deadline := time.Now().Add(10 * time.Second)
	for {
		line := metricLines(metricsText(t, p), "callout_clock_offset_seconds ")
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("callout_clock_offset_seconds: %q", line)
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v > 1 || v < -1 {
			t.Fatalf("callout_clock_offset_seconds = %q (%v), want within 1 s", f[1], err)
		}
		// The gauge starts at 0; a measurement of a real offset is never
		// exactly 0 (the round trip's midpoint is in nanoseconds).
		if v != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("callout_clock_offset_seconds never measured (still exactly 0)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHealthcheckFingerprint: `healthcheck --config FILE` passes against
// the proxy running FILE, and fails (exit 1) against another program
// answering a healthy-looking /healthz on FILE's port, and against a
// proxy running another configuration on it.
func TestHealthcheckFingerprint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := func(k string) string { return testEnv()[k] }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	yaml := strings.Replace(devConfig(proctest.Endpoint("pay-api", "https://api.example.com")),
		"listen: 127.0.0.1:0\n", "listen: "+addr+"\n", 1)
	path := writeConfig(t, yaml)

	// A foreign process on the port, answering as a proxy's /healthz would.
	foreign := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok","version":"v1.0.0","go_version":"go1.26"}`)
	})}
	go func() { _ = foreign.Serve(l) }()
	err = run(ctx, []string{"healthcheck", "--config", path}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "another proxy holds this port") {
		t.Fatalf("against a foreign process: %v", err)
	}
	_ = foreign.Close()

	// This configuration's proxy: ok, naming the fingerprint.
	p := startProxy(t, yaml, testEnv())
	var out bytes.Buffer
	if err := run(ctx, []string{"healthcheck", "--config", path}, env, &out, io.Discard); err != nil {
		t.Fatalf("against its own proxy: %v\nlogs:\n%s", err, p.logs)
	}
	if !strings.Contains(out.String(), "configuration ") {
		t.Fatalf("healthcheck printed %q", out.String())
	}
	// Another configuration of the same address: not this proxy's.
	other := writeConfig(t, yaml+"  crm-api:\n    url: https://crm.example.com\n")
	err = run(ctx, []string{"healthcheck", "--config", other}, env, io.Discard, io.Discard)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "configuration fingerprint") {
		t.Fatalf("against a proxy of another configuration: %v", err)
	}
}
