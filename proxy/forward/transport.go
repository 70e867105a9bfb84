package forward

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/forward/credentials"
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
	// defaultMaxIdleConnsPerHost is Options.MaxIdleConnsPerHost's default:
	// above the callers' connections a replica serves at once (64–128 in
	// docs/performance.md's runs), so a burst's upstream connections go back
	// to the pool instead of being closed and dialled again on the next one
	// (at 32, every burst past 32 callers churned connections). Idle ones
	// still close after idleConnTimeout.
	defaultMaxIdleConnsPerHost = 256
)

// endpointClient is the cached HTTP client of one endpoint, with the
// settings it was built from.
type endpointClient struct {
	key    string
	client *http.Client
	tr     *http.Transport
}

// limits are an endpoint's effective per-attempt limits (contract §3): the
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

// clientKey is everything a transport is built from — the scheme, host,
// networks and limits, then tag and id naming the TLS material — so a
// reloaded endpoint whose key changed gets a new transport. It is built
// on every attempt, into one buffer (fmt.Sprint cost seven allocations).
func clientKey(base *url.URL, networks []netip.Prefix, l limits, tag, id string) string {
	var b strings.Builder
	b.Grow(len(base.Scheme) + len(base.Host) + 44*len(networks) + 48 + len(tag) + len(id))
	b.WriteString(base.Scheme)
	b.WriteString(" ")
	b.WriteString(base.Host)
	b.WriteString(" [")
	var scratch [64]byte
	for i, p := range networks {
		if i > 0 {
			b.WriteString(" ")
		}
		b.Write(p.AppendTo(scratch[:0]))
	}
	b.WriteString("] ")
	b.Write(strconv.AppendInt(scratch[:0], int64(l.connect), 10))
	b.WriteString(" ")
	b.Write(strconv.AppendInt(scratch[:0], int64(l.header), 10))
	b.WriteString(" ")
	b.WriteString(tag)
	b.WriteString(" ")
	b.WriteString(id)
	return b.String()
}

// client returns the endpoint's HTTP client, building it on first use and
// again when the endpoint's URL host, networks or limits changed, or its
// client certificate or CA bundle was rotated (a new transport, so the next
// connection uses the new files; the old one's idle connections close).
func (f *Forwarder) client(ep *config.Endpoint, creds *credentials.Set) (*http.Client, error) {
	if ep.BaseURL == nil {
		return nil, errors.New("endpoint has no parsed base URL")
	}
	mat, err := creds.TLS()
	if err != nil {
		return nil, err
	}
	l := limitsOf(ep)
	key := clientKey(ep.BaseURL, ep.Networks, l, "tls", mat.ID)
	return f.cached(f.clients, ep.Name, key, func() (*endpointClient, error) {
		tlsConf := f.baseTLS()
		if mat.RootCAs != nil {
			tlsConf.RootCAs = mat.RootCAs
		}
		if cert := mat.Certificate; cert != nil {
			// Always present it, whatever CAs the server's request names:
			// the upstream decides (crypto/tls would send none on a mismatch).
			tlsConf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cert, nil
			}
		}
		return newClient(ep.BaseURL, ep.Networks, l, tlsConf, f.maxIdlePerHost, key)
	})
}

// tokenClient is credentials.Options.TokenClient: the HTTP client of ep's
// token endpoint. It follows the endpoint's own rules — the SSRF guard
// with the token URL's port and the endpoint's allowed_networks (metadata
// addresses never), no proxy from the environment, no redirects, the
// endpoint's connect and header limits — and trusts roots when set (the
// endpoint's oauth2.ca_file).
func (f *Forwarder) tokenClient(ep *config.Endpoint, roots *x509.CertPool, rootsID uint64) (*http.Client, error) {
	if ep.OAuth2 == nil {
		return nil, errors.New("endpoint has no oauth2 block")
	}
	tu, err := url.Parse(ep.OAuth2.TokenURL)
	if err != nil || tu.Scheme == "" || tu.Host == "" {
		return nil, errors.New("oauth2 token_url is not an absolute URL")
	}
	l := limitsOf(ep)
	key := clientKey(tu, ep.Networks, l, "roots", strconv.FormatUint(rootsID, 10))
	return f.cached(f.tokenClients, ep.Name, key, func() (*endpointClient, error) {
		tlsConf := f.baseTLS()
		if roots != nil {
			tlsConf.RootCAs = roots
		}
		return newClient(tu, ep.Networks, l, tlsConf, 2, key)
	})
}

// cached returns m[name]'s client when it was built for key, else builds
// one, stores it and closes the idle connections of the one it replaces.
func (f *Forwarder) cached(m map[string]*endpointClient, name, key string,
	build func() (*endpointClient, error)) (*http.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := m[name]
	if ok && old.key == key {
		return old.client, nil
	}
	c, err := build()
	if err != nil {
		return nil, err
	}
	if ok {
		old.tr.CloseIdleConnections()
	}
	m[name] = c
	return c.client, nil
}

// baseTLS is a copy of Options.TLSClientConfig, or TLS 1.2 at least with
// the system roots.
func (f *Forwarder) baseTLS() *tls.Config {
	if f.tlsConfig != nil {
		return f.tlsConfig.Clone()
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// newClient builds a client for base: no proxy from the environment, no
// transparent gzip (the caller gets the upstream's bytes and
// Content-Encoding as they are), the SSRF guard (base's port, networks) on
// every dial, the connect limit on TCP and TLS, the header limit after the
// request is written, and redirects never followed (a 3xx goes back to the
// caller as is, contract §2).
func newClient(base *url.URL, networks []netip.Prefix, l limits, tlsConf *tls.Config,
	maxIdle int, key string) (*endpointClient, error) {
	g, err := newGuard(base, networks)
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: l.connect, KeepAlive: keepAlive, Control: g.control}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        tlsConf,
		TLSHandshakeTimeout:    l.connect,
		ForceAttemptHTTP2:      base.Scheme == "https",
		DisableCompression:     true,
		ResponseHeaderTimeout:  l.header,
		MaxIdleConnsPerHost:    maxIdle,
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
