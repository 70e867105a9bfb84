package forward

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Transport constants shared by every endpoint.
const (
	// idleConnTimeout is how long an idle keep-alive connection is kept.
	idleConnTimeout = 90 * time.Second
	// keepAlive is the TCP keep-alive probe interval.
	keepAlive = 30 * time.Second
	// maxResponseHeaderBytes bounds an upstream's response header block
	// (1 MiB); the body is bounded by MaxResponseBytes.
	maxResponseHeaderBytes = 1 << 20
	// defaultMaxIdleConnsPerHost is Options.MaxIdleConnsPerHost's default.
	defaultMaxIdleConnsPerHost = 32
)

// endpointClient is the cached HTTP client of one endpoint, with the
// settings it was built from.
type endpointClient struct {
	key    string
	client *http.Client
	tr     *http.Transport
}

// limits are an endpoint's effective per-attempt limits (SPEC.md §3): the
// endpoint's values, or the policy defaults where one is zero or negative.
type limits struct {
	connect, header, attempt time.Duration
}

func limitsOf(ep *config.Endpoint) limits {
	d := policy.Defaults()
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return limits{
		connect: pick(ep.ConnectTimeout, d.ConnectTimeout),
		header:  pick(ep.HeaderTimeout, d.HeaderTimeout),
		attempt: pick(ep.AttemptTimeout, d.AttemptTimeout),
	}
}

// clientKey is everything a transport is built from; a reloaded endpoint
// whose key changed gets a new transport.
func clientKey(ep *config.Endpoint) string {
	l := limitsOf(ep)
	return fmt.Sprint(ep.BaseURL.Scheme, " ", ep.BaseURL.Host, " ", ep.Networks, " ", l.connect, " ", l.header)
}

// client returns the endpoint's HTTP client, building it on first use and
// again when the endpoint's URL host, networks or limits changed.
func (f *Forwarder) client(ep *config.Endpoint) (*http.Client, error) {
	if ep.BaseURL == nil {
		return nil, errors.New("endpoint has no parsed base URL")
	}
	key := clientKey(ep)
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.clients[ep.Name]
	if ok && old.key == key {
		return old.client, nil
	}
	c, err := f.newClient(ep, key)
	if err != nil {
		return nil, err
	}
	if ok {
		old.tr.CloseIdleConnections()
	}
	f.clients[ep.Name] = c
	return c.client, nil
}

// newClient builds an endpoint's client: no proxy from the environment, no
// transparent gzip (the caller gets the upstream's bytes and
// Content-Encoding as they are), the SSRF guard on every dial, the connect
// limit on TCP and TLS, the header limit after the request is written, and
// redirects never followed (a 3xx goes back to the caller as is, SPEC.md §2).
func (f *Forwarder) newClient(ep *config.Endpoint, key string) (*endpointClient, error) {
	g, err := newGuard(ep.BaseURL, ep.Networks)
	if err != nil {
		return nil, err
	}
	l := limitsOf(ep)
	dialer := &net.Dialer{Timeout: l.connect, KeepAlive: keepAlive, Control: g.control}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.tlsConfig != nil {
		tlsConf = f.tlsConfig.Clone()
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        tlsConf,
		TLSHandshakeTimeout:    l.connect,
		ForceAttemptHTTP2:      ep.BaseURL.Scheme == "https",
		DisableCompression:     true,
		ResponseHeaderTimeout:  l.header,
		MaxIdleConnsPerHost:    f.maxIdlePerHost,
		IdleConnTimeout:        idleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return &endpointClient{key: key, tr: tr, client: &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}, nil
}
