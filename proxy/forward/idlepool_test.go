package forward

import (
	"net/http"
	"testing"
)

// TestKeepAlivePoolPerEndpoint: an endpoint's transport keeps up to 256
// idle connections (Options.MaxIdleConnsPerHost's default), so 64–128
// callers' attempts reuse their upstream connections instead of closing
// all but 32 after every burst; the option still sets it.
func TestKeepAlivePoolPerEndpoint(t *testing.T) {
	for _, tt := range []struct {
		opt, want int
	}{{0, 256}, {8, 8}} {
		f := newForwarder(t, Options{MaxIdleConnsPerHost: tt.opt})
		ep := newEndpoint(t, "orders", "http://127.0.0.1:1/api")
		c, err := f.client(ep, f.credentials(ep))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Transport.(*http.Transport).MaxIdleConnsPerHost; got != tt.want {
			t.Errorf("MaxIdleConnsPerHost option %d: transport keeps %d idle, want %d", tt.opt, got, tt.want)
		}
	}
}
