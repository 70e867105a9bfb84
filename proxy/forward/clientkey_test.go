package forward

import (
	"net/netip"
	"net/url"
	"testing"
	"time"
)

// TestClientKeyNamesEverythingOnce: the key of an endpoint's transport
// changes with each thing the transport is built from, and building it —
// on every attempt — costs one allocation.
func TestClientKeyNamesEverythingOnce(t *testing.T) {
	base := &url.URL{Scheme: "https", Host: "api.example.com:8443"}
	nets := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	l := limits{connect: 2 * time.Second, header: 5 * time.Second, attempt: 10 * time.Second}
	key := clientKey(base, nets, l, "tls", "abc")
	if want := "https api.example.com:8443 [10.0.0.0/8 2001:db8::/32] 2000000000 5000000000 tls abc"; key != want {
		t.Errorf("key %q, want %q", key, want)
	}
	other := map[string]string{
		"scheme":   clientKey(&url.URL{Scheme: "http", Host: base.Host}, nets, l, "tls", "abc"),
		"host":     clientKey(&url.URL{Scheme: "https", Host: "api.example.com"}, nets, l, "tls", "abc"),
		"networks": clientKey(base, nets[:1], l, "tls", "abc"),
		"connect":  clientKey(base, nets, limits{connect: time.Second, header: l.header}, "tls", "abc"),
		"header":   clientKey(base, nets, limits{connect: l.connect, header: time.Second}, "tls", "abc"),
		"tag":      clientKey(base, nets, l, "roots", "abc"),
		"id":       clientKey(base, nets, l, "tls", "abd"),
	}
	for what, k := range other {
		if k == key {
			t.Errorf("a different %s gives the same key %q", what, k)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = clientKey(base, nets, l, "tls", "abc") }); n > 1 {
		t.Errorf("clientKey allocates %v times, want 1", n)
	}
}
