package admin

import (
	"log/slog"
	"net/http"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// requireRead wraps a read handler: a token of scope read (or write) is
// required (contract §9), and the answer is never cached.
func (s *server) requireRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.d.Tokens.Check(r.Header.Get("Authorization"), auth.ScopeRead); err != nil {
			problem.Write(w, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// requireWrite checks that the request carries a token of scope write and
// returns its name; when not, it audit-logs the refusal (action, with the
// attribute key=value) under the token's name when the token is valid for
// reading, answers the problem and returns false.
func (s *server) requireWrite(w http.ResponseWriter, r *http.Request, action, key, value string) (string, bool) {
	token, err := s.d.Tokens.Check(r.Header.Get("Authorization"), auth.ScopeWrite)
	if err == nil {
		return token, true
	}
	au := audit{s: s, r: r, action: action}
	au.token, _ = s.d.Tokens.Check(r.Header.Get("Authorization"), auth.ScopeRead)
	au.refused(w, err, slog.String(key, value))
	return "", false
}

// audit writes the audit line of one admin write action (contract §9): msg
// "audit" with the token's name ("" when no valid token was presented),
// the action, the endpoint, the result ("ok" or the problem code) and the
// caller's address; never a body or a token.
type audit struct {
	s        *server
	r        *http.Request
	token    string
	action   string
	endpoint string
}

// log writes the audit line.
func (a audit) log(level slog.Level, result string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("token", a.token), slog.String("action", a.action),
		slog.String("endpoint", a.endpoint), slog.String("result", result),
		slog.String("remote_addr", a.r.RemoteAddr)}, attrs...)
	a.s.d.Logger.LogAttrs(a.r.Context(), level, "audit", attrs...)
}

// refused audit-logs a refused or failed action at level WARN, with the
// problem code (problem.From: the one table) as its result, the detail and
// the cause, and answers with the problem.
func (a audit) refused(w http.ResponseWriter, err error, attrs ...slog.Attr) {
	pe := problem.From(err)
	attrs = append(attrs, slog.String("detail", pe.Detail))
	if pe.Err != nil {
		attrs = append(attrs, slog.String("cause", pe.Err.Error()))
	}
	a.log(slog.LevelWarn, string(pe.Code), attrs...)
	problem.Write(w, pe)
}
