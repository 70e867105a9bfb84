package console

import (
	"bytes"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

// view is what the layout template renders around a page: the page's
// title and navigation entry, the session's user (nil when logged out),
// its CSRF token for the forms, the live-update interval (seconds, 0
// none), the clock's now for relative times, and the page's own data.
type view struct {
	Title   string
	Nav     string
	User    *userView
	CSRF    string
	Refresh int
	Now     time.Time
	Data    any
}

// userView is the logged-in token as pages show it.
type userView struct {
	Name     string
	Scope    string
	CanWrite bool
}

// navOf is the navigation entry of page name.
func navOf(name string) string {
	switch name {
	case "endpoints", "endpoint_confirm", "endpoint":
		return "endpoints"
	case "deadletters", "callout", "replay_new", "bulk":
		return "dead-letters"
	case "replayjobs", "replayjob":
		return "replay-jobs"
	case "callouts":
		return "callouts"
	}
	return ""
}

// refreshOf is page name's live-update interval in seconds: the script
// re-reads a page that has one and swaps its live parts; without
// JavaScript the page is read as it was served. 0: none.
func refreshOf(name string) int {
	switch name {
	case "replayjob":
		return 2
	case "endpoints", "replayjobs":
		return 3
	case "callouts", "callout":
		return 5
	case "deadletters", "endpoint":
		return 10
	}
	return 0
}

// pages are the parsed templates: each page's file over the layout.
type pages struct {
	byName map[string]*template.Template
}

// mustParsePages parses the embedded templates; it panics on an error
// (they are compiled in: a test runs every one).
func mustParsePages() *pages {
	base := template.Must(template.New("layout.html").Funcs(funcs()).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
		p.byName[name] = t
	}
	return p
}

// finalizer is page data that says the page will not change any more (a
// replay job that ended): no live updates then.
type finalizer interface{ Final() bool }

// render renders page name with data as status. s is the session, nil on
// the login page; title is the page's title.
func (c *console) render(w http.ResponseWriter, r *http.Request, s *session, status int, name, title string, data any) {
	t, ok := c.pages.byName[name]
	if !ok {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Nav: navOf(name), Refresh: refreshOf(name), Now: c.d.Now(), Data: data}
	if f, ok := data.(finalizer); ok && f.Final() {
		v.Refresh = 0
	}
	if s != nil {
		v.User = &userView{Name: s.name, Scope: string(s.scope), CanWrite: s.canWrite()}
		v.CSRF = s.csrf
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		c.d.Logger.Error("console: render", slog.String("page", name), slog.Any("error", err))
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorData is the error page's data.
type errorData struct {
	Status        int
	Title, Detail string
	CalloutID     string
}

// renderError renders the error page with status; s may be nil (the
// request's session, if any, is then used for the navigation).
func (c *console) renderError(w http.ResponseWriter, r *http.Request, s *session, status int, title, detail string) {
	if s == nil {
		s, _ = c.session(r)
	}
	c.render(w, r, s, status, "error", title, errorData{Status: status, Title: title, Detail: detail})
}

// renderAPIError renders what the admin API refused or failed with: its
// problem's status, title and detail (a read-scope token's 403 among
// them); any other error is a 502.
func (c *console) renderAPIError(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		c.render(w, r, s, ae.Problem.Status, "error", ae.Problem.Title, errorData{Status: ae.Problem.Status,
			Title: ae.Problem.Title, Detail: ae.Problem.Detail, CalloutID: ae.Problem.CalloutID})
		return
	}
	c.d.Logger.Error("console: admin API call failed", slog.String("path", r.URL.Path), slog.Any("error", err))
	c.renderError(w, r, s, http.StatusBadGateway, "Admin API failed", "The admin API's answer could not be read.")
}
