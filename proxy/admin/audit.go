package admin

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/go-chi/chi/v5"
)

// requireRead wraps a read handler: a token of scope read (or write) is
// required (contract §9), and the answer is never cached.
func (s *server) requireRead(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authorize(w, r, auth.ScopeRead, nil); !ok {
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h(w, r)
	}
}

// writeOnID wraps a write on the resource the route's {id} names: a token
// of scope write is required (requireWrite: action, the id as attribute
// key), then do runs with the action's audit and a context from
// storeContext.
func (s *server) writeOnID(action, key string,
	do func(ctx context.Context, w http.ResponseWriter, au audit, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		au, ok := s.requireWrite(w, r, action, key, id)
		if !ok {
			return
		}
		ctx, cancel := storeContext(r)
		defer cancel()
		do(ctx, w, au, id)
	}
}

// requireWrite checks that the request carries a token of scope write and
// returns the audit of action under the token's name; when not, it
// audit-logs the refusal (action, with the attribute key=value) under the
// token's name when the token is valid for reading (an unknown token's as
// the login throttle collapses them: authorize), answers the problem and
// returns false.
func (s *server) requireWrite(w http.ResponseWriter, r *http.Request, action, key, value string) (audit, bool) {
	au := audit{s: s, r: r, action: action}
	token, ok := s.authorize(w, r, auth.ScopeWrite, &au, slog.String(key, value))
	au.token = token
	return au, ok
}

// authorize checks the request's admin token for need and returns its
// name. A missing or unknown token (401) is told to the login throttle
// (docs/limits.md, "Failed logins"): once its source or token prefix is
// throttled it is answered 429 login-throttled with Retry-After instead,
// and the audit line of a write (au, with attrs; reads, au nil, write
// none) only for the first failure of its source in the throttle's window —
// the throttle writes one line with the rest's count. A right token is
// never throttled. Any other refusal (403: scope read, write needed) is
// audit-logged under the token's name. On refusal it answers and returns
// false.
func (s *server) authorize(w http.ResponseWriter, r *http.Request, need auth.Scope, au *audit,
	attrs ...slog.Attr) (string, bool) {
	authz := r.Header.Get("Authorization")
	token, err := s.d.Tokens.Check(authz, need)
	if err == nil {
		s.throttle.Sweep(r.Context())
		return token, true
	}
	if pe := problem.From(err); pe.Code == problem.Unauthorized {
		v := s.throttle.Failure(r.Context(), r.RemoteAddr, authz, au != nil)
		if v.RetryAfter > 0 {
			err = loginThrottled(v)
		}
		if !v.Log {
			au = nil
		}
	} else if au != nil {
		au.token, _ = s.d.Tokens.Check(authz, auth.ScopeRead)
	}
	if au == nil {
		problem.Write(w, err)
		return "", false
	}
	au.refused(w, err, attrs...)
	return "", false
}

// loginThrottled is the 429 of a failed admin-token check whose source or
// token prefix is throttled (limits.admin_login_failures in
// limits.admin_login_window), with Retry-After the rest of the window.
func loginThrottled(v auth.Verdict) *problem.Error {
	return &problem.Error{Code: problem.LoginThrottled, RetryAfter: v.RetryAfterSeconds(),
		Detail: "too many failed admin-token checks from this address or with this token prefix " +
			"(limits.admin_login_failures in limits.admin_login_window); retry in " +
			strconv.Itoa(v.RetryAfterSeconds()) + " s"}
}

// audit writes the audit line of one admin write action (contract §9): msg
// "audit" with the token's name ("" when no valid token was presented),
// the action, the endpoint, the result ("ok", or the problem code as
// auth.AuditResult writes it: not_found) and the caller's address; never a
// body or a token.
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
// problem code (problem.From: the one table; auth.AuditResult) as its result, the detail and
// the cause, and answers with the problem.
func (a audit) refused(w http.ResponseWriter, err error, attrs ...slog.Attr) {
	pe := problem.From(err)
	attrs = append(attrs, slog.String("detail", pe.Detail))
	if pe.Err != nil {
		attrs = append(attrs, slog.String("cause", pe.Err.Error()))
	}
	a.log(slog.LevelWarn, auth.AuditResult(pe.Code), attrs...)
	problem.Write(w, pe)
}
