package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// calloutsData is the callouts page: the three lookups' forms, and what
// the one asked for found.
type calloutsData struct {
	Endpoints []string
	// ID, Endpoint, Key and State are the forms' values.
	ID, Endpoint, Key, State string
	// Holders are the callouts holding Key on Endpoint (several only when
	// several organisations used it).
	Holders []api.KeyHolderDoc
	// Listed is set when a list was asked for: Pending is its page, and
	// Totals the endpoint's pending callouts (of every page).
	Listed     bool
	Pending    []api.CalloutSummaryDoc
	Totals     *pendingTotals
	NextCursor string
	Problem    string
}

// pendingTotals are an endpoint's pending callouts: Waiting (held or
// scheduled: one queue, held while the gate is shut) and InFlight.
type pendingTotals struct{ Waiting, InFlight int64 }

// handleCallouts serves GET /console/callouts: with id, that callout's
// page; with endpoint and key, the callouts holding that Idempotency-Key
// (GET /admin/v1/idempotency-keys), opened at once when there is one;
// with endpoint and state, one page of that endpoint's callouts in that
// state (GET /admin/v1/callouts).
func (c *console) handleCallouts(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := calloutsData{ID: strings.TrimSpace(q.Get("id")), Endpoint: q.Get("endpoint"),
		Key: strings.TrimSpace(q.Get("key")), State: q.Get("state")}
	if d.ID != "" {
		http.Redirect(w, r, Base+"/callouts/"+url.PathEscape(d.ID), http.StatusSeeOther)
		return
	}
	var eps api.EndpointList
	if err := c.get(r, s, "/admin/v1/endpoints", &eps); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	for _, e := range eps.Endpoints {
		d.Endpoints = append(d.Endpoints, e.Name)
	}
	status := http.StatusOK
	switch {
	case d.Endpoint != "" && d.Key != "":
		var doc api.IdempotencyKeyDoc
		err := c.get(r, s, "/admin/v1/idempotency-keys?"+url.Values{"endpoint": {d.Endpoint}, "key": {d.Key}}.Encode(), &doc)
		if err == nil && len(doc.Holders) == 1 {
			http.Redirect(w, r, Base+"/callouts/"+url.PathEscape(doc.Holders[0].CalloutID), http.StatusSeeOther)
			return
		}
		d.Holders = doc.Holders
		status, d.Problem = problemOf(err, status)
	case d.Endpoint != "" && d.State != "":
		d.Listed = true
		var list api.CalloutList
		lq := url.Values{"endpoint": {d.Endpoint}, "state": {d.State}, "limit": {"100"}}
		if cur := q.Get("cursor"); cur != "" {
			lq.Set("cursor", cur)
		}
		err := c.get(r, s, "/admin/v1/callouts?"+lq.Encode(), &list)
		d.Pending, d.NextCursor = list.Items, list.NextCursor
		for _, e := range eps.Endpoints {
			if e.Name == d.Endpoint {
				d.Totals = &pendingTotals{Waiting: e.BacklogItems - e.InFlight, InFlight: e.InFlight}
			}
		}
		status, d.Problem = problemOf(err, status)
	}
	if d.State == "" {
		d.State = "held"
	}
	c.render(w, r, s, status, "callouts", "Callouts", d)
}

// problemOf is the status and text a page shows for an API error (the
// API's own status and detail); err nil keeps status.
func problemOf(err error, status int) (int, string) {
	if err == nil {
		return status, ""
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Problem.Status, ae.Problem.Detail
	}
	return http.StatusBadGateway, "the admin API's answer could not be read"
}
