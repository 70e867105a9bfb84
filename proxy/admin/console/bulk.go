package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// maxBulk bounds the dead letters one bulk action takes: twice a page of
// the list, so a form from one page always fits.
const maxBulk = 2 * deadLetterPageSize

// bulkAction is a bulk action on selected dead letters.
type bulkAction struct {
	Name, Verb, Consequence string
}

// bulkActionOf returns the bulk action called name: replay or discard.
func bulkActionOf(name string) (bulkAction, bool) {
	switch name {
	case "replay":
		return bulkAction{Name: name, Verb: "Replay",
			Consequence: "Each dead letter is replayed at once as a new chain with its original request and Idempotency-Key (contract §8); one whose key a chain already holds sends nothing. The dead letters are kept, with their history."}, true
	case "discard":
		return bulkAction{Name: name, Verb: "Discard",
			Consequence: "Each dead letter is deleted from the proxy, with its history and its Idempotency-Key reservation: it can no longer be replayed. Its Salesforce record, if any, stays."}, true
	}
	return bulkAction{}, false
}

// bulkResult is what a bulk action did to one dead letter.
type bulkResult struct {
	ID string
	// Done is true when the action was carried out; Text says what
	// happened, the API's problem detail when it was refused.
	Done bool
	Text string
	// ReplayID is the replay chain of a replay.
	ReplayID string
}

// bulkData is the bulk confirmation and result page.
type bulkData struct {
	Action  bulkAction
	IDs     []string
	Results []bulkResult
	// Back is the dead-letter list the selection came from.
	Back string
	Done int
}

// handleBulk serves POST /console/dead-letters/bulk (form: csrf, action
// replay or discard, id repeated, back, and confirm once confirmed):
// without confirm, a page listing the selection and what the action will
// do; with it, the action on each selected dead letter through the admin
// API (POST /admin/v1/dead-letters/{id}/replay or DELETE
// /admin/v1/dead-letters/{id}: write scope, each audit-logged with the
// token's name), then a page of what happened to each.
//
// A token without scope write is refused as a whole, 403, as a single
// replay is: its confirmation page says so with that status, and once
// confirmed the API's refusal of the first dead letter (audit-logged,
// nothing done: the admin API's only 403 is a token's scope) is the answer
// for all of them.
func (c *console) handleBulk(w http.ResponseWriter, r *http.Request, s *session) {
	a, ok := bulkActionOf(r.PostForm.Get("action"))
	if !ok {
		c.renderError(w, r, s, http.StatusBadRequest, "No such bulk action", "A bulk action is replay or discard.")
		return
	}
	ids := slices.Compact(slices.Sorted(slices.Values(r.PostForm["id"])))
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	switch {
	case len(ids) == 0:
		c.renderError(w, r, s, http.StatusBadRequest, "Nothing selected", "Tick the dead letters to "+a.Name+" first.")
		return
	case len(ids) > maxBulk:
		c.renderError(w, r, s, http.StatusBadRequest, "Too many selected",
			"A bulk action takes at most "+strconv.Itoa(maxBulk)+" dead letters; for more, replay a filter (a replay job).")
		return
	}
	d := bulkData{Action: a, IDs: ids, Back: localDeadLetters(r.PostForm.Get("back"))}
	if r.PostForm.Get("confirm") != "1" {
		status := http.StatusOK
		if !s.canWrite() {
			status = http.StatusForbidden
		}
		c.render(w, r, s, status, "bulk", a.Verb+" "+strconv.Itoa(len(ids))+" "+plural(len(ids), "dead letter", "dead letters"), d)
		return
	}
	for i, id := range ids {
		res, err := c.bulkOne(r, s, a, id)
		if ae := (*apiError)(nil); i == 0 && errors.As(err, &ae) && ae.Problem.Status == http.StatusForbidden {
			c.renderAPIError(w, r, s, err)
			return
		}
		if res.Done {
			d.Done++
		}
		d.Results = append(d.Results, res)
	}
	c.render(w, r, s, http.StatusOK, "bulk", a.Verb+": "+strconv.Itoa(d.Done)+" of "+strconv.Itoa(len(ids))+" done", d)
}

// bulkOne does a to dead letter id through the admin API; a refusal is
// in the result's Text and is the error too.
func (c *console) bulkOne(r *http.Request, s *session, a bulkAction, id string) (bulkResult, error) {
	path := "/admin/v1/dead-letters/" + url.PathEscape(id)
	var err error
	res := bulkResult{ID: id}
	if a.Name == "replay" {
		var doc api.ReplayResultDoc
		_, err = c.call(r.Context(), r, s, http.MethodPost, path+"/replay", nil, &doc)
		res.ReplayID = doc.ReplayID
		res.Text = "replayed"
		if err == nil && !doc.Created {
			res.Text = "nothing sent: a chain already holds its Idempotency-Key"
		}
	} else {
		_, err = c.call(r.Context(), r, s, http.MethodDelete, path, nil, nil)
		res.Text = "discarded"
	}
	if err != nil {
		var ae *apiError
		res.Text = "the admin API's answer could not be read"
		if errors.As(err, &ae) {
			res.Text, res.ReplayID = ae.Problem.Detail, ae.Problem.CalloutID
		}
		return res, err
	}
	res.Done = true
	return res, nil
}

// localDeadLetters is back when it is a dead-letter list of this console,
// else the plain list: a form field must not send the browser elsewhere.
func localDeadLetters(back string) string {
	u, err := url.Parse(back)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path != Base+"/dead-letters" {
		return Base + "/dead-letters"
	}
	return u.RequestURI()
}
