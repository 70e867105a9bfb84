package forward

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"code.dny.dev/ssrf"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

func TestGuardControl(t *testing.T) {
	networks := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("64:ff9b::/96"),
		netip.MustParsePrefix("::ffff:172.16.0.0/108"),
	}
	type guardCase struct {
		name, base, network, addr string
		want                      error // nil: allowed
	}
	tests := []guardCase{
		{"public v4 on the endpoint port", "https://api.example.com:8443", "tcp4", "93.184.216.34:8443", nil},
		{"public v6 on the endpoint port", "https://api.example.com:8443", "tcp6", "[2606:4700::1]:8443", nil},
		{"another port", "https://api.example.com:8443", "tcp4", "93.184.216.34:22", ssrf.ErrProhibitedPort},
		{"default https port", "https://api.example.com", "tcp4", "93.184.216.34:443", nil},
		{"port 80 for https", "https://api.example.com", "tcp4", "93.184.216.34:80", ssrf.ErrProhibitedPort},
		{"default http port", "http://api.example.com", "tcp4", "93.184.216.34:80", nil},
		{"loopback", "https://api.example.com:8443", "tcp4", "127.0.0.1:8443", ssrf.ErrProhibitedIP},
		{"loopback v6", "https://api.example.com:8443", "tcp6", "[::1]:8443", ssrf.ErrProhibitedIP},
		{"private not allowed", "https://api.example.com:8443", "tcp4", "192.168.1.10:8443", ssrf.ErrProhibitedIP},
		{"private allowed", "https://api.example.com:8443", "tcp4", "10.20.30.40:8443", nil},
		{"v4 from a mapped allowed prefix", "https://api.example.com:8443", "tcp4", "172.16.1.1:8443", nil},
		{"link-local allowed", "https://api.example.com:8443", "tcp4", "169.254.1.1:8443", nil},
		{"ULA allowed", "https://api.example.com:8443", "tcp6", "[fd12::1]:8443", nil},
		{"udp", "https://api.example.com:8443", "udp4", "93.184.216.34:8443", ssrf.ErrProhibitedNetwork},
	}
	// A cloud metadata address is blocked whatever the port, and though
	// most of these lie in the allowed networks above.
	for _, m := range []struct{ name, network, addr string }{
		{"AWS/GCP/Azure metadata", "tcp4", "169.254.169.254:8443"},
		{"ECS task metadata", "tcp4", "169.254.170.2:8443"},
		{"Alibaba metadata", "tcp4", "100.100.100.200:8443"},
		{"Azure WireServer", "tcp4", "168.63.129.16:8443"},
		{"AWS IPv6 metadata", "tcp6", "[fd00:ec2::254]:8443"},
		{"GCP IPv6 metadata", "tcp6", "[fd20:ce::254]:8443"},
		{"mapped metadata", "tcp6", "[::ffff:169.254.169.254]:8443"},
		{"NAT64 metadata", "tcp6", "[64:ff9b::a9fe:a9fe]:8443"},
		{"metadata on another port", "tcp4", "169.254.169.254:80"},
	} {
		tests = append(tests, guardCase{m.name, "https://api.example.com:8443", m.network, m.addr, errMetadata})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := newGuard(mustURL(t, tt.base), networks)
			if err != nil {
				t.Fatal(err)
			}
			err = g.control(tt.network, tt.addr, nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("control(%s, %s) = %v, want allowed", tt.network, tt.addr, err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrBlockedAddress) {
				t.Fatalf("control(%s, %s) = %v, want %v and ErrBlockedAddress", tt.network, tt.addr, err, tt.want)
			}
		})
	}
}

func TestGuardWithoutNetworks(t *testing.T) {
	g, err := newGuard(mustURL(t, "https://api.example.com"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"10.0.0.1:443", "172.16.0.1:443", "192.168.0.1:443", "127.0.0.1:443",
		"169.254.1.1:443", "100.64.0.1:443", "0.0.0.0:443"} {
		if err := g.control("tcp4", addr, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("control(%s) = %v, want blocked", addr, err)
		}
	}
}

func TestNewGuardRejectsBadPort(t *testing.T) {
	for _, base := range []string{"http://h:0", "ftp://h"} {
		if _, err := newGuard(mustURL(t, base), nil); err == nil {
			t.Errorf("newGuard(%s) = nil error", base)
		}
	}
}

// TestDoSSRF dials through the real guard: the backend listens on
// 127.0.0.1, which only an endpoint with allowed_networks may reach.
func TestDoSSRF(t *testing.T) {
	srv, rc := newBackend(t, nil)
	port := mustURL(t, srv.URL).Port()
	tests := []struct {
		name     string
		url      string
		networks []netip.Prefix
		blocked  bool
	}{
		{"loopback without allowed_networks", srv.URL, nil, true},
		{"loopback with 127.0.0.0/8", srv.URL, loopback, false},
		{"localhost resolves to loopback", "http://localhost:" + port, nil, true},
		{"localhost with 127.0.0.0/8 and ::1", "http://localhost:" + port,
			append([]netip.Prefix{netip.MustParsePrefix("::1/128")}, loopback...), false},
		{"metadata even with 169.254.0.0/16", "http://169.254.169.254/latest/meta-data/",
			[]netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}, true},
		{"ECS metadata even with 169.254.170.0/24", "http://169.254.170.2/v2/credentials",
			[]netip.Prefix{netip.MustParsePrefix("169.254.170.0/24")}, true},
	}
	f := newForwarder(t, Options{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := newEndpoint(t, "ssrf-"+string(rune('a'+i)), tt.url)
			ep.Networks = tt.networks
			before := len(rc.all())
			a := do(f, ep, get("/x"))
			if !tt.blocked {
				if a.Err != nil || a.Response == nil || a.Response.Status != http.StatusOK {
					t.Fatalf("attempt = %+v, want 200", a)
				}
				return
			}
			pe, ok := errors.AsType[*problem.Error](a.Err)
			if !ok || pe.Code != problem.BlockedAddress || !errors.Is(a.Err, ErrBlockedAddress) {
				t.Fatalf("Err = %v, want problem %q matching ErrBlockedAddress", a.Err, problem.BlockedAddress)
			}
			if pe.Code.Status() != http.StatusForbidden {
				t.Errorf("status of %q = %d, want 403", pe.Code, pe.Code.Status())
			}
			if strings.Contains(pe.Detail, "127.0.0.1") || strings.Contains(pe.Detail, "169.254") {
				t.Errorf("detail %q names the address; it goes to the caller", pe.Detail)
			}
			if a.Response != nil || a.Sent {
				t.Errorf("Response = %v, Sent = %v; want nil, false", a.Response, a.Sent)
			}
			if n := len(rc.all()); n != before {
				t.Errorf("backend saw %d new requests, want 0", n-before)
			}
		})
	}
}

func TestDoRebuildsTransportWhenEndpointChanges(t *testing.T) {
	srv, _ := newBackend(t, nil)
	f := newForwarder(t, Options{})
	ep := newEndpoint(t, "reload", srv.URL)
	if a := do(f, ep, get("/")); a.Err != nil {
		t.Fatalf("first attempt: %v", a.Err)
	}
	changed := *ep
	changed.Networks = nil // a reloaded config that no longer allows loopback
	if a := do(f, &changed, get("/")); !errors.Is(a.Err, ErrBlockedAddress) {
		t.Fatalf("after the change Err = %v, want blocked (a stale transport was reused)", a.Err)
	}
}
