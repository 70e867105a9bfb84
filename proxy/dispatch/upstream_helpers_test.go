package dispatch_test

import (
	"io"
	"net/http"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// status answers code with a short body.
func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// sequence answers the n-th request of a path with codes[n-1], and the
// last code after that.
func sequence(codes ...int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := proctest.Received(r).PathN
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// held blocks every request in proctest.Hold (until the upstream is
// released), then answers code.
func held(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		proctest.Hold(r)
		w.WriteHeader(code)
	}
}
