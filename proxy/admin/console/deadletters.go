package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// deadLetterPageSize is the number of dead letters one console page asks
// the API for.
const deadLetterPageSize = 50

// filterForm is the dead-letter filter as the console's forms carry it:
// the search's parameters (GET /admin/v1/search): endpoint, reason,
// status, since, until, the replay outcome, the search text q and the
// sort.
type filterForm struct {
	Endpoint, Reason, Status, Since, Until, Replay, Q, Sort string
}

// filterFormOf reads the filter from a query or form. The replay outcome
// "unresolved" of older links reads as none (not replayed: a replay that
// failed again is a dead letter of its own, not replayed).
func filterFormOf(q url.Values) filterForm {
	f := filterForm{Endpoint: strings.TrimSpace(q.Get("endpoint")), Reason: q.Get("reason"),
		Status: strings.TrimSpace(q.Get("status")), Since: strings.TrimSpace(q.Get("since")),
		Until: strings.TrimSpace(q.Get("until")), Replay: q.Get("replay"), Q: strings.TrimSpace(q.Get("q")),
		Sort: q.Get("sort")}
	if f.Replay == "unresolved" {
		f.Replay = "none"
	}
	return f
}

// formTime parses a time field: RFC 3339, or a datetime-local value
// (2006-01-02T15:04, seconds optional) or a date, read as UTC; "" is the
// zero time.
func formTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New(field + " must be a time such as 2025-01-31T14:00 (UTC) or RFC 3339")
}

// apiQuery is the filter as the API's parameters (a replay job's filter
// takes endpoint, reason, status, since and until; the search all of
// them); the times in RFC 3339. Errors: a time that does not parse.
func (f filterForm) apiQuery() (url.Values, error) {
	q := url.Values{}
	for k, v := range map[string]string{"endpoint": f.Endpoint, "reason": f.Reason, "status": f.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for _, p := range []struct{ k, v string }{{"since", f.Since}, {"until", f.Until}} {
		t, err := formTime(p.k, p.v)
		if err != nil {
			return nil, err
		}
		if !t.IsZero() {
			q.Set(p.k, t.Format(time.RFC3339Nano))
		}
	}
	return q, nil
}

// searchQuery is apiQuery with the search's own parameters.
func (f filterForm) searchQuery() (url.Values, error) {
	q, err := f.apiQuery()
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"replay": f.Replay, "q": f.Q, "sort": f.Sort} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q, nil
}

// query is the filter as console query parameters, for links.
func (f filterForm) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"endpoint": f.Endpoint, "reason": f.Reason, "status": f.Status,
		"since": f.Since, "until": f.Until, "replay": f.Replay, "q": f.Q, "sort": f.Sort} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Href is the console page at path with the filter, and an offset when
// not "", as its query: a whole link, which html/template keeps as one
// URL (a query string spliced after a "?" would be escaped as data).
func (f filterForm) Href(path, offset string) string {
	q := f.query()
	if offset != "" && offset != "0" {
		q.Set("offset", offset)
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// JobHref is the replay form of the filter, unsorted; the form takes the
// parts a replay job has (endpoint, reason, status, since, until) and says
// that the search text and replay outcome are not among them.
func (f filterForm) JobHref() string {
	f.Sort = ""
	return f.Href(Base+"/replay", "")
}

// SortHref is the dead-letter list sorted by field: ascending, or
// descending when it is sorted ascending by field already.
func (f filterForm) SortHref(field string) string {
	g := f
	g.Sort = field
	if f.Sort == field || (f.Sort == "" && field == "dead_lettered_at") {
		g.Sort = "-" + field
	}
	return g.Href(Base+"/dead-letters", "")
}

// SortMark is the arrow of a column header: ▲ sorted ascending by field,
// ▼ descending, "" otherwise.
func (f filterForm) SortMark(field string) string {
	switch f.Sort {
	case field:
		return "▲"
	case "-" + field:
		return "▼"
	case "":
		if field == "dead_lettered_at" {
			return "▲"
		}
	}
	return ""
}

// replayOutcome is what became of a dead letter's latest replay, read from
// the state of the chain the API names in replayed_by.
type replayOutcome struct {
	// Key is none, pending, succeeded, failed_again or gone; Label its text.
	Key, Label string
}

// outcomeOf names the outcome of a replay chain in state st (found false:
// the chain's record is gone).
func outcomeOf(st policy.State, found bool) replayOutcome {
	switch {
	case !found:
		return replayOutcome{"gone", "replayed (record expired)"}
	case st == policy.Succeeded:
		return replayOutcome{"succeeded", "replayed: succeeded"}
	case st == policy.Failed || st == policy.DeadLettered:
		return replayOutcome{"failed_again", "replayed: failed again"}
	}
	return replayOutcome{"pending", "replayed: pending (" + string(st) + ")"}
}

// deadLetterRow is one row of the list.
type deadLetterRow struct {
	api.DeadLetterSummaryDoc
	Replay replayOutcome
}

// deadLettersData is the dead-letter list page.
type deadLettersData struct {
	Filter    filterForm
	Endpoints []string
	Rows      []deadLetterRow
	// Total is how many dead letters match (at most api.MaxSearchTotal;
	// Capped when more do); Offset the first row's place among them.
	Total      int
	Capped     bool
	Offset     int
	NextOffset int
	// KeyHolders are the callouts holding Filter.Q as an Idempotency-Key.
	KeyHolders []api.SearchKeyHolderDoc
	Problem    string
	// Bulk is the most ids a bulk action takes.
	Bulk int
}

// First and Last are the row numbers shown, 1-based.
func (d deadLettersData) First() int { return d.Offset + 1 }
func (d deadLettersData) Last() int  { return d.Offset + len(d.Rows) }

// PrevOffset is the offset of the previous page, -1 on the first.
func (d deadLettersData) PrevOffset() int {
	if d.Offset == 0 {
		return -1
	}
	return max(0, d.Offset-deadLetterPageSize)
}

// handleDeadLetters serves GET /console/dead-letters: the search form and
// one page of GET /admin/v1/search (dead letters across endpoints, with
// their total, sorted; the callouts holding the search text as an
// Idempotency-Key), each row with its replay outcome (GET
// /admin/v1/callouts/{replayed_by}) and a checkbox for the bulk actions.
func (c *console) handleDeadLetters(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	d := deadLettersData{Filter: filterFormOf(q), Bulk: maxBulk}
	var eps api.EndpointList
	if err := c.get(r, s, "/admin/v1/endpoints", &eps); err == nil {
		for _, e := range eps.Endpoints {
			d.Endpoints = append(d.Endpoints, e.Name)
		}
	}
	aq, err := d.Filter.searchQuery()
	if err != nil {
		d.Problem = err.Error()
		c.render(w, r, s, http.StatusBadRequest, "deadletters", "Dead letters", d)
		return
	}
	aq.Set("limit", strconv.Itoa(deadLetterPageSize))
	if o := q.Get("offset"); o != "" {
		aq.Set("offset", o)
	}
	var res api.SearchDoc
	if err := c.get(r, s, "/admin/v1/search?"+aq.Encode(), &res); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Problem.Status == http.StatusBadRequest {
			d.Problem = ae.Problem.Detail
			c.render(w, r, s, http.StatusBadRequest, "deadletters", "Dead letters", d)
			return
		}
		c.renderAPIError(w, r, s, err)
		return
	}
	d.Total, d.Capped, d.Offset, d.NextOffset, d.KeyHolders = res.Total, res.TotalCapped, res.Offset, res.NextOffset, res.KeyHolders
	for _, it := range res.DeadLetters {
		d.Rows = append(d.Rows, deadLetterRow{DeadLetterSummaryDoc: it, Replay: c.replayOutcome(r, s, it.ReplayedBy)})
	}
	c.render(w, r, s, http.StatusOK, "deadletters", "Dead letters", d)
}

// replayOutcome reads the state of replay chain id ("" : never replayed).
func (c *console) replayOutcome(r *http.Request, s *session, id string) replayOutcome {
	if id == "" {
		return replayOutcome{"none", "not replayed"}
	}
	var doc api.CalloutDoc
	err := c.get(r, s, "/admin/v1/callouts/"+url.PathEscape(id), &doc)
	var ae *apiError
	if errors.As(err, &ae) && ae.Problem.Status == http.StatusNotFound {
		return outcomeOf("", false)
	}
	if err != nil {
		return replayOutcome{"unknown", "replayed (state unreadable)"}
	}
	return outcomeOf(doc.State, true)
}

// calloutData is the detail page of one callout or dead letter.
type calloutData struct {
	Doc api.CalloutDoc
	// Replay is the outcome of the dead letter's latest replay.
	Replay replayOutcome
	// Notice is "replayed" (a new chain was made) or "already" (a chain
	// already held the key) after a replay.
	Notice string
	// SourceLink is the Salesforce record of the source record, if any.
	SourceLink string
}

// handleDeadLetter serves GET /console/dead-letters/{id}: GET
// /admin/v1/dead-letters/{id}, rendered by the callout page.
func (c *console) handleDeadLetter(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderCallout(w, r, s, "/admin/v1/dead-letters/"+url.PathEscape(chi.URLParam(r, "id")))
}

// handleCallout serves GET /console/callouts/{id}: GET
// /admin/v1/callouts/{id}.
func (c *console) handleCallout(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderCallout(w, r, s, "/admin/v1/callouts/"+url.PathEscape(chi.URLParam(r, "id")))
}

// renderCallout renders the callout document the API serves at path.
func (c *console) renderCallout(w http.ResponseWriter, r *http.Request, s *session, path string) {
	var doc api.CalloutDoc
	if err := c.get(r, s, path, &doc); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	d := calloutData{Doc: doc, SourceLink: salesforceLink(doc.Issuer, doc.SourceRecord)}
	if doc.State == policy.DeadLettered {
		d.Replay = c.replayOutcome(r, s, doc.ReplayedBy)
	}
	if n := r.URL.Query().Get("replayed"); n == "new" || n == "existing" {
		d.Notice = n
	}
	title := "Callout " + doc.ID
	if doc.State == policy.DeadLettered {
		title = "Dead letter " + doc.ID
	}
	c.render(w, r, s, http.StatusOK, "callout", title, d)
}

// handleReplayOne serves POST /console/dead-letters/{id}/replay: POST
// /admin/v1/dead-letters/{id}/replay (write scope, audit-logged by the
// replay service), then the replay chain's page.
func (c *console) handleReplayOne(w http.ResponseWriter, r *http.Request, s *session) {
	var res api.ReplayResultDoc
	_, err := c.call(r.Context(), r, s, http.MethodPost,
		"/admin/v1/dead-letters/"+url.PathEscape(chi.URLParam(r, "id"))+"/replay", nil, &res)
	if err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	how := "existing"
	if res.Created {
		how = "new"
	}
	http.Redirect(w, r, Base+"/callouts/"+url.PathEscape(res.ReplayID)+"?replayed="+how, http.StatusSeeOther)
}
