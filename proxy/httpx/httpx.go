// Package httpx holds what the proxy's two listeners, the callout listener
// (proxy) and the admin listener (proxy/admin), do alike around their
// routes: the guard that refuses what neither ever serves (contract §4:
// TRACE, CONNECT, absolute-form targets), the problem+json answers of a
// router that found no route or no method, and JSON answers.
package httpx

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// AllowedMethods are the methods of contract §4's request-flow table, the only
// ones the proxy serves: reads, then writes; the Allow value of a 405.
const AllowedMethods = "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"

// IsAllowedMethod reports whether method is one of AllowedMethods. Methods
// are case-sensitive (RFC 9110 §9.1): "trace" or "TRACK" is not served.
func IsAllowedMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions,
		http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Guard refuses TRACE, CONNECT and every method outside AllowedMethods
// (405 method-not-allowed with Allow, RFC 9110 §15.5.6) and absolute-form
// or authority-form request targets (400 absolute-form) before any
// routing (contract §4); everything else goes to next.
func Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !IsAllowedMethod(r.Method):
			w.Header().Set("Allow", AllowedMethods)
			problem.Write(w, problem.Errorf(problem.MethodNotAllowed, r.Method+" is never forwarded"))
		case !strings.HasPrefix(r.RequestURI, "/"):
			problem.Write(w, problem.Errorf(problem.AbsoluteForm,
				"the request target must be origin-form (a path), not absolute-form"))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// NotFound is a router's answer to a path it has no route for: 404
// not-found.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	problem.Write(w, problem.Errorf(problem.NotFound, "no such route"))
}

// MethodNotAllowed is a router's answer to a method its route does not
// take: 405 method-not-allowed.
func MethodNotAllowed(w http.ResponseWriter, _ *http.Request) {
	problem.Write(w, problem.Errorf(problem.MethodNotAllowed, "method not allowed on this route"))
}

// WriteJSON sends v as application/json with status, followed by a
// newline; a v that cannot be encoded is a bare 500.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// Its length, so that an answer flushed before its handler ends (a
	// write cut for the connection share, answered while its attempt goes
	// on) is whole, not a chunked body ended by the connection's close.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
