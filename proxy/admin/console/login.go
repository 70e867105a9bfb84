package console

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Cookie names. Both are HttpOnly, SameSite=Strict, Path Base, and Secure
// when the request came over TLS.
const (
	// sessionCookie carries the session's random value.
	sessionCookie = "callout_console"
	// loginCookie carries the login form's own CSRF value (a double
	// submit: no session exists yet), for loginFormLifetime.
	loginCookie = "callout_console_login"
)

// loginFormLifetime is how long a login form may be posted after it was
// shown, in seconds.
const loginFormLifetime = 600

// maxFormBytes bounds a console form's body, in bytes.
const maxFormBytes = 64 << 10

// sessionHandler is a console page or action of a logged-in session.
type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// requireSession runs h for a request with a live session. A GET without
// one is sent to the login form (303, next = this page); a POST without
// one is a 401. A POST must carry the session's CSRF token in its form
// field csrf: else 403, audit-logged with the session's token name.
func (c *console) requireSession(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.session(r)
		if !ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, Base+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.renderError(w, r, nil, http.StatusUnauthorized, "Not logged in",
				"Your session has ended or was never started: log in again.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				c.renderError(w, r, s, http.StatusBadRequest, "Unreadable form", "The form could not be read.")
				return
			}
			if !sameToken(r.PostForm.Get("csrf"), s.csrf) {
				c.audit(r, slog.LevelWarn, s.name, "console.post", "csrf", slog.String("path", r.URL.Path))
				c.renderError(w, r, s, http.StatusForbidden, "Form refused",
					"The form's CSRF token is missing or not this session's. Reload the page and try again.")
				return
			}
			// Whatever the form did, the next page counts afresh.
			defer c.counts.forget()
		}
		h(w, r, s)
	}
}

// session returns the request's live session.
func (c *console) session(r *http.Request) (*session, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	return c.d.Sessions.lookup(ck.Value, c.d.Now(), c.d.Tokens)
}

// tokenName is the token name of the request's session, "" without one.
func (c *console) tokenName(r *http.Request) string {
	if s, ok := c.session(r); ok {
		return s.name
	}
	return ""
}

// audit writes an audit line of the console itself (login, logout, a
// refused form) in the API's shape: token name, action, result, caller's
// address; never a token or a body.
func (c *console) audit(r *http.Request, level slog.Level, token, action, result string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("token", token), slog.String("action", action),
		slog.String("result", result), slog.String("remote_addr", r.RemoteAddr)}, attrs...)
	c.d.Logger.LogAttrs(r.Context(), level, "audit", attrs...)
}

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, Path Base,
// Secure over TLS; maxAge in seconds, negative to delete it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Base, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// loginData is the login page's data.
type loginData struct {
	Next, Nonce, Problem string
}

// handleLoginForm serves GET /console/login: the token form, with a fresh
// login CSRF value in a cookie and the form. A live session goes on to
// its page.
func (c *console) handleLoginForm(w http.ResponseWriter, r *http.Request) {
	next := localNext(r.URL.Query().Get("next"))
	if _, ok := c.session(r); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, next, "")
}

// renderLogin renders the login form with status and an optional problem.
func (c *console) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, prob string) {
	nonce, err := randomValue(c.d.Rand)
	if err != nil {
		c.renderError(w, r, nil, http.StatusInternalServerError, "No randomness", "Could not start a login.")
		return
	}
	setCookie(w, r, loginCookie, nonce, loginFormLifetime)
	c.render(w, r, nil, status, "login", "Log in", loginData{Next: next, Nonce: nonce, Problem: prob})
}

// handleLogin serves POST /console/login: form fields token (an admin
// token's value), nonce (the login form's CSRF value) and next. A token
// that Tokens knows starts a session of its name and scope; every try is
// audit-logged (action console.login), failed ones as the login throttle
// collapses them (loginFailed).
func (c *console) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, nil, http.StatusBadRequest, "Unreadable form", "The login form could not be read.")
		return
	}
	next := localNext(r.PostForm.Get("next"))
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostForm.Get("nonce"), ck.Value) {
		c.audit(r, slog.LevelWarn, "", "console.login", "csrf")
		c.renderLogin(w, r, http.StatusForbidden, next, "The login form expired or came from another page: try again.")
		return
	}
	value := strings.TrimSpace(r.PostForm.Get("token"))
	bearer := "Bearer " + value
	name, err := c.d.Tokens.Check(bearer, auth.ScopeRead)
	if err != nil {
		c.loginFailed(w, r, next, bearer, err)
		return
	}
	c.d.Throttle.Sweep(r.Context())
	scope := auth.ScopeRead
	if _, err := c.d.Tokens.Check(bearer, auth.ScopeWrite); err == nil {
		scope = auth.ScopeWrite
	} else if pe := (*problem.Error)(nil); !errors.As(err, &pe) || pe.Code != problem.Forbidden {
		c.renderError(w, r, nil, http.StatusInternalServerError, "Login failed", "The token's scope could not be read.")
		return
	}
	cookie, _, err := c.d.Sessions.create(c.d.Rand, c.d.Tokens, value, name, scope, c.d.Now())
	if err != nil {
		c.renderError(w, r, nil, http.StatusInternalServerError, "No randomness", "Could not start a session.")
		return
	}
	setCookie(w, r, loginCookie, "", -1)
	setCookie(w, r, sessionCookie, cookie, int(c.d.Sessions.lifetime.Seconds()))
	c.audit(r, slog.LevelInfo, name, "console.login", "ok", slog.String("scope", string(scope)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// loginFailed answers a login whose token Tokens refused with err: a 401
// is told to the login throttle (docs/limits.md, "Failed logins"), which
// turns it into a 429 with Retry-After once the source or the token's
// prefix is throttled and says whether this failure writes its audit line
// (the first of its source in the window; the throttle writes one with the
// rest's count). A right token is never throttled: it never gets here.
func (c *console) loginFailed(w http.ResponseWriter, r *http.Request, next, bearer string, err error) {
	pe := problem.From(err)
	status, result, msg := pe.Code.Status(), auth.AuditResult(pe.Code), pe.Detail
	if pe.Code == problem.Unauthorized {
		v := c.d.Throttle.Failure(r.Context(), r.RemoteAddr, bearer, true)
		if v.RetryAfter > 0 {
			secs := v.RetryAfterSeconds()
			status, result = http.StatusTooManyRequests, auth.AuditResult(problem.LoginThrottled)
			msg = "Too many failed logins from this address or with this token: try again in " + strconv.Itoa(secs) + " s."
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
		if !v.Log {
			c.renderLogin(w, r, status, next, msg)
			return
		}
	}
	c.audit(r, slog.LevelWarn, "", "console.login", result)
	c.renderLogin(w, r, status, next, msg)
}

// handleLogout serves POST /console/logout: the session ends here and in
// the browser.
func (c *console) handleLogout(w http.ResponseWriter, r *http.Request, s *session) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.d.Sessions.end(ck.Value)
	}
	setCookie(w, r, sessionCookie, "", -1)
	c.audit(r, slog.LevelInfo, s.name, "console.logout", "ok")
	http.Redirect(w, r, Base+"/login", http.StatusSeeOther)
}

// localNext is next when it is a console page of this host, else the
// endpoints page: a login never redirects off the console.
func localNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(next, Base+"/") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, Base+"/login") {
		return Base + "/endpoints"
	}
	return next
}
