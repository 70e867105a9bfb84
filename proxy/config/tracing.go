package config

import (
	"net/url"
	"strings"
)

// Tracing configures OpenTelemetry tracing (docs/tracing.md):
// spans of each callout's admission, of every attempt and of every
// Salesforce write batch, exported over OTLP to a collector, with W3C Trace
// Context (https://www.w3.org/TR/trace-context/) read from the caller and
// sent to the upstream. With Endpoint empty, tracing is off: no span is
// made, no header is read or written, nothing is exported.
type Tracing struct {
	// Endpoint is the collector's OTLP URL: http://host:4318 or
	// https://host:4318 for http/protobuf (path /v1/traces when the URL has
	// none), http://host:4317 or https://host:4317 for grpc (no path).
	// http means no TLS. No user info, query or fragment: a collector's
	// credentials go in OTEL_EXPORTER_OTLP_HEADERS, which the exporter reads
	// from the environment. "" (the default): tracing off.
	Endpoint string `yaml:"endpoint"`
	// Protocol is the OTLP transport: "http/protobuf" (the default) or
	// "grpc" (the names of the OpenTelemetry specification's
	// OTEL_EXPORTER_OTLP_PROTOCOL).
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of traces recorded, 0 to 1, for callouts
	// that arrive without a sampled parent: a trace the caller marks
	// sampled (traceparent flags 01) is always recorded, one the proxy
	// starts or the caller marks not sampled (Apex's 00) is recorded when
	// its trace id falls in the ratio — the same decision on every replica
	// and every attempt, hours later too. Default 1; 0 records only
	// callers' sampled traces.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the resource attribute service.name. Default
	// "callout-proxy".
	ServiceName string `yaml:"service_name"`
	// Replica is the resource attribute service.instance.id, naming this
	// replica. Default: the host name (a Kubernetes pod's name).
	Replica string `yaml:"replica"`
}

// Tracing defaults and protocols (docs/tracing.md).
const (
	TracingHTTP               = "http/protobuf"
	TracingGRPC               = "grpc"
	DefaultTracingServiceName = "callout-proxy"
	DefaultTracingSampleRatio = 1.0
	// DefaultTracingHTTPPath is the OTLP/HTTP traces path (OTLP
	// specification, "OTLP/HTTP Request").
	DefaultTracingHTTPPath = "/v1/traces"
)

// Enabled reports whether tracing is on (Endpoint set).
func (t Tracing) Enabled() bool { return t.Endpoint != "" }

// applyDefaults fills the protocol and the service name; SampleRatio's
// default is set by Default (0 is a valid ratio).
func (t *Tracing) applyDefaults() {
	if t.Protocol == "" {
		t.Protocol = TracingHTTP
	}
	if t.ServiceName == "" {
		t.ServiceName = DefaultTracingServiceName
	}
}

// validate checks the tracing section after defaults.
func (t Tracing) validate(col *collector) {
	if t.Protocol != TracingHTTP && t.Protocol != TracingGRPC {
		col.add("tracing.protocol", "%q: one of http/protobuf, grpc", t.Protocol)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 || t.SampleRatio != t.SampleRatio {
		col.add("tracing.sample_ratio", "%v: a ratio from 0 to 1", t.SampleRatio)
	}
	if t.Endpoint == "" {
		return
	}
	u, err := url.Parse(t.Endpoint)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		col.add("tracing.endpoint", "not a URL such as http://otel-collector:4318")
	case u.Scheme != "http" && u.Scheme != "https":
		col.add("tracing.endpoint", "scheme %q: http (no TLS) or https", u.Scheme)
	case u.User != nil:
		col.add("tracing.endpoint", "no user info in the URL: put the collector's credentials in "+
			"OTEL_EXPORTER_OTLP_HEADERS")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(t.Endpoint, "?"):
		col.add("tracing.endpoint", "no query or fragment in the URL")
	case u.Port() == "":
		col.add("tracing.endpoint", "a port is needed, e.g. :4318 (http/protobuf) or :4317 (grpc)")
	case t.Protocol == TracingGRPC && u.Path != "" && u.Path != "/":
		col.add("tracing.endpoint", "path %q: a grpc endpoint has none", u.Path)
	}
}

// TracingPath is the URL path the http/protobuf exporter posts to: the
// endpoint's own path, or DefaultTracingHTTPPath when it has none.
func (t Tracing) TracingPath() string {
	u, err := url.Parse(t.Endpoint)
	if err != nil || u.Path == "" || u.Path == "/" {
		return DefaultTracingHTTPPath
	}
	return u.Path
}
