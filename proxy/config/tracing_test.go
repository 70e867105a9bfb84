package config_test

import (
	"testing"

	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// TestTracingDefaults: no tracing section means tracing off with the
// defaults of docs/tracing.md; sample_ratio 0 is kept as written (not
// replaced by the default), and the http/protobuf path defaults to
// /v1/traces.
func TestTracingDefaults(t *testing.T) {
	dir := keyFiles(t)
	cfg := mustParse(t, doc(nil, dir), baseEnv().get)
	want := config.Tracing{Protocol: "http/protobuf", SampleRatio: 1, ServiceName: "callout-proxy"}
	if cfg.Tracing != want || cfg.Tracing.Enabled() {
		t.Errorf("defaults = %+v (enabled %v), want %+v, off", cfg.Tracing, cfg.Tracing.Enabled(), want)
	}
	cfg = mustParse(t, doc(map[string]string{"extra": "tracing:\n  endpoint: http://otel-collector:4318\n" +
		"  sample_ratio: 0\n  replica: pod-7\n"}, dir), baseEnv().get)
	want.Endpoint, want.SampleRatio, want.Replica = "http://otel-collector:4318", 0, "pod-7"
	if cfg.Tracing != want || !cfg.Tracing.Enabled() {
		t.Errorf("tracing = %+v, want %+v, on", cfg.Tracing, want)
	}
	if p := cfg.Tracing.TracingPath(); p != "/v1/traces" {
		t.Errorf("path = %q, want /v1/traces", p)
	}
	cfg = mustParse(t, doc(map[string]string{"extra": "tracing:\n  endpoint: https://collector.example.com:443/otlp/v1/traces\n" +
		"  sample_ratio: 0.25\n  service_name: payments-proxy\n"}, dir), baseEnv().get)
	if p := cfg.Tracing.TracingPath(); p != "/otlp/v1/traces" || cfg.Tracing.SampleRatio != 0.25 ||
		cfg.Tracing.ServiceName != "payments-proxy" {
		t.Errorf("tracing = %+v, path %q", cfg.Tracing, p)
	}
	cfg = mustParse(t, doc(map[string]string{"extra": "tracing:\n  endpoint: http://127.0.0.1:4317\n  protocol: grpc\n"},
		dir), baseEnv().get)
	if cfg.Tracing.Protocol != config.TracingGRPC {
		t.Errorf("protocol = %q, want grpc", cfg.Tracing.Protocol)
	}
}

func TestValidateTracing(t *testing.T) {
	runInvalid(t, []invalidCase{
		{"protocol", map[string]string{"extra": "tracing:\n  protocol: http/json\n"},
			[]string{`tracing.protocol: "http/json": one of http/protobuf, grpc`}},
		{"ratio above 1", map[string]string{"extra": "tracing:\n  sample_ratio: 1.5\n"},
			[]string{"tracing.sample_ratio: 1.5: a ratio from 0 to 1"}},
		{"negative ratio", map[string]string{"extra": "tracing:\n  sample_ratio: -0.1\n"},
			[]string{"tracing.sample_ratio: -0.1: a ratio from 0 to 1"}},
		{"not a URL", map[string]string{"extra": "tracing:\n  endpoint: otel-collector:4318\n"},
			[]string{"tracing.endpoint: not a URL"}},
		{"scheme", map[string]string{"extra": "tracing:\n  endpoint: grpc://otel-collector:4317\n"},
			[]string{`tracing.endpoint: scheme "grpc": http (no TLS) or https`}},
		{"user info", map[string]string{"extra": "tracing:\n  endpoint: https://user:pw@collector:4318\n"},
			[]string{"tracing.endpoint: no user info in the URL"}},
		{"query", map[string]string{"extra": "tracing:\n  endpoint: https://collector:4318/v1/traces?key=x\n"},
			[]string{"tracing.endpoint: no query or fragment"}},
		{"no port", map[string]string{"extra": "tracing:\n  endpoint: https://collector\n"},
			[]string{"tracing.endpoint: a port is needed"}},
		{"grpc path", map[string]string{"extra": "tracing:\n  endpoint: http://collector:4317/v1/traces\n  protocol: grpc\n"},
			[]string{`tracing.endpoint: path "/v1/traces": a grpc endpoint has none`}},
		{"unknown key", map[string]string{"extra": "tracing:\n  url: http://collector:4318\n"},
			[]string{"tracing.url: unknown key"}},
	})
}
