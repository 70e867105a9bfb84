package console

import (
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// endpointAction is one admin action on an endpoint, as the console names
// it in its URLs, and the admin API route that does it.
type endpointAction struct {
	Name, Verb, APIPath, Consequence string
}

// endpointActionOf returns the action named in a console URL: enable,
// disable or reset; false for anything else. The consequences are what
// the admin API documents for each (contract §6).
func endpointActionOf(name string) (endpointAction, bool) {
	switch name {
	case "enable":
		return endpointAction{Name: name, Verb: "Enable", APIPath: "enable",
			Consequence: "The endpoint is enabled with a fresh breaker: the failure count, pause and outage are cleared and held callouts are released."}, true
	case "disable":
		return endpointAction{Name: name, Verb: "Disable", APIPath: "disable",
			Consequence: "Callers get 503 until an admin enables it again, and every pending callout becomes a dead letter (reason endpoint_disabled), replayable once it is enabled."}, true
	case "reset":
		return endpointAction{Name: name, Verb: "Reset the breaker of", APIPath: "breaker/reset",
			Consequence: "The breaker closes and a pause is lifted; held callouts are released. A disabled endpoint stays disabled."}, true
	}
	return endpointAction{}, false
}

// endpointsData is the endpoints page's data: the API's list with each
// endpoint's dead letters awaiting action, and the notice of an action
// just done (from the redirect's query).
type endpointsData struct {
	Endpoints []endpointRow
	Notice    *actionNotice
}

// endpointRow is one endpoint's row: its document and how many of its
// dead letters await action (not replayed: a replay that failed again is a
// dead letter of its own), counted
// afresh on every read, so a replay shows at once.
type endpointRow struct {
	api.EndpointDoc
	Awaiting       int
	AwaitingCapped bool
}

// actionNotice says what an action just did.
type actionNotice struct {
	Action       endpointAction
	Endpoint     string
	Changed      bool
	DeadLettered int
}

// handleEndpoints serves GET /console/endpoints: one row per endpoint
// (GET /admin/v1/endpoints).
func (c *console) handleEndpoints(w http.ResponseWriter, r *http.Request, s *session) {
	var list api.EndpointList
	err := c.get(r, s, "/admin/v1/endpoints", &list)
	if err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	d := endpointsData{}
	for _, e := range list.Endpoints {
		row := endpointRow{EndpointDoc: e}
		if e.DeadLetters > 0 {
			if row.Awaiting, row.AwaitingCapped, err = c.awaiting(r, s, e.Name); err != nil {
				c.renderAPIError(w, r, s, err)
				return
			}
		}
		d.Endpoints = append(d.Endpoints, row)
	}
	q := r.URL.Query()
	if a, ok := endpointActionOf(q.Get("done")); ok && listed(d.Endpoints, q.Get("endpoint")) {
		n, _ := strconv.Atoi(q.Get("dead_lettered"))
		d.Notice = &actionNotice{Action: a, Endpoint: q.Get("endpoint"), Changed: q.Get("changed") == "1",
			DeadLettered: n}
	}
	c.render(w, r, s, http.StatusOK, "endpoints", "Endpoints", d)
}

// awaiting counts endpoint's dead letters awaiting action (GET
// /admin/v1/search?replay=none&limit=0: its total only); capped when
// more than api.MaxSearchTotal do. A count is reused for countTTL by every
// session of this replica, and forgotten after any form the console
// handles (requireSession), so an action's effect shows on the next read.
func (c *console) awaiting(r *http.Request, s *session, endpoint string) (int, bool, error) {
	now := c.d.Now()
	if n, ok := c.counts.get(endpoint, now); ok {
		return n.total, n.capped, nil
	}
	var res api.SearchDoc
	q := url.Values{"endpoint": {endpoint}, "replay": {"none"}, "limit": {"0"}}
	if err := c.get(r, s, "/admin/v1/search?"+q.Encode(), &res); err != nil {
		return 0, false, err
	}
	c.counts.put(endpoint, count{total: res.Total, capped: res.TotalCapped, at: now})
	return res.Total, res.TotalCapped, nil
}

// countTTL is how long a count of an endpoint's dead letters not replayed
// is reused: the endpoints page re-reads itself every 3 s in every open
// tab, and a count reads up to 50,000 dead-letter summaries.
const countTTL = 15 * time.Second

// count is one endpoint's count of dead letters not replayed, made at at.
type count struct {
	total  int
	capped bool
	at     time.Time
}

// counts are the counts this replica's console made, by endpoint.
type counts struct {
	mu sync.Mutex
	by map[string]count
}

// get returns endpoint's count when it is younger than countTTL at now.
func (cs *counts) get(endpoint string, now time.Time) (count, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n, ok := cs.by[endpoint]
	return n, ok && now.Sub(n.at) < countTTL && !now.Before(n.at)
}

// put keeps endpoint's count.
func (cs *counts) put(endpoint string, n count) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.by == nil {
		cs.by = map[string]count{}
	}
	cs.by[endpoint] = n
}

// forget drops every count: an action may have changed any of them.
func (cs *counts) forget() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	clear(cs.by)
}

// listed reports whether name is one of eps: a notice names only a
// configured endpoint.
func listed(eps []endpointRow, name string) bool {
	for _, e := range eps {
		if e.Name == name {
			return true
		}
	}
	return false
}

// confirmData is the confirmation page of an endpoint action.
type confirmData struct {
	Action   endpointAction
	Endpoint api.EndpointDoc
}

// handleEndpointConfirm serves GET /console/endpoints/{name}/{action}: the
// endpoint's state and what the action will do, with the form that does
// it (write scope only).
func (c *console) handleEndpointConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	a, ok := endpointActionOf(chi.URLParam(r, "action"))
	if !ok {
		c.renderError(w, r, s, http.StatusNotFound, "Not found", "There is no such endpoint action.")
		return
	}
	var ep api.EndpointDoc
	if err := c.get(r, s, "/admin/v1/endpoints/"+url.PathEscape(chi.URLParam(r, "name")), &ep); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "endpoint_confirm", a.Verb+" "+ep.Name, confirmData{Action: a, Endpoint: ep})
}

// handleEndpointAction serves POST /console/endpoints/{name}/{action}
// (form: csrf, reason): POST /admin/v1/endpoints/{name}/{enable, disable,
// breaker/reset} with {"reason": …}, which checks the write scope and
// audit-logs the action with the token's name. Then back to the endpoints
// page with a notice.
func (c *console) handleEndpointAction(w http.ResponseWriter, r *http.Request, s *session) {
	a, ok := endpointActionOf(chi.URLParam(r, "action"))
	if !ok {
		c.renderError(w, r, s, http.StatusNotFound, "Not found", "There is no such endpoint action.")
		return
	}
	name := chi.URLParam(r, "name")
	var res api.EndpointActionResult
	body := map[string]string{"reason": r.PostForm.Get("reason")}
	if _, err := c.call(r.Context(), r, s, http.MethodPost,
		"/admin/v1/endpoints/"+url.PathEscape(name)+"/"+a.APIPath, body, &res); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	q := url.Values{"done": {a.Name}, "endpoint": {name}, "dead_lettered": {strconv.Itoa(len(res.DeadLettered))}}
	if res.Changed {
		q.Set("changed", "1")
	}
	http.Redirect(w, r, Base+"/endpoints?"+q.Encode(), http.StatusSeeOther)
}
