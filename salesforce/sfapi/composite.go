package sfapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Composite limits ("Send Multiple Requests Using Composite"): up to 25
// subrequests in one call, of which up to 5 are sObject Collections or
// query operations. The whole call counts as one API call.
const (
	MaxSubrequests = 25
	MaxCollections = 5
)

// Subrequest is one subrequest of a Composite request.
type Subrequest struct {
	// Method is the HTTP method: GET, POST, PATCH, DELETE.
	Method string
	// Path is the resource below /services/data/vNN.0/, e.g.
	// "composite/sobjects/Failed_Callout__c/Callout_Id__c" or
	// "query?q=…" (the query escaped).
	Path string
	// Body is sent as the subrequest's JSON body (nil: none). A
	// json.RawMessage is sent as it is.
	Body any
	// ReferenceID names the subrequest: letters, digits and underscores,
	// unique in the call.
	ReferenceID string
}

// collection reports whether s counts toward MaxCollections.
func (s Subrequest) collection() bool {
	return strings.HasPrefix(s.Path, "composite/sobjects") || strings.HasPrefix(s.Path, "query")
}

// SubResult is one Composite Subrequest Result ("Composite Response
// Body"): the subrequest's HTTP status and body.
type SubResult struct {
	Status int
	Body   json.RawMessage
}

// compositeRequest is the Composite request body ("Composite Request
// Body").
type compositeRequest struct {
	AllOrNone          bool           `json:"allOrNone"`
	CollateSubrequests bool           `json:"collateSubrequests"`
	CompositeRequest   []compositeSub `json:"compositeRequest"`
}

type compositeSub struct {
	Method      string `json:"method"`
	URL         string `json:"url"`
	ReferenceID string `json:"referenceId"`
	Body        any    `json:"body,omitempty"`
}

type compositeAnswer struct {
	CompositeResponse []struct {
		Body           json.RawMessage `json:"body"`
		HTTPStatusCode int             `json:"httpStatusCode"`
		ReferenceID    string          `json:"referenceId"`
	} `json:"compositeResponse"`
}

// CompositeBody returns the JSON body Composite sends for subs; its length
// is what salesforce.batch_max_bytes bounds.
func (c *Client) CompositeBody(subs []Subrequest) ([]byte, error) {
	req := compositeRequest{CompositeRequest: make([]compositeSub, len(subs))}
	for i, s := range subs {
		req.CompositeRequest[i] = compositeSub{Method: s.Method, URL: "/" + c.dataPath(s.Path),
			ReferenceID: s.ReferenceID, Body: s.Body}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Composite sends subs in one Composite request (POST
// /services/data/vNN.0/composite; "Send Multiple Requests Using
// Composite") — one API call — with allOrNone false (a failed subrequest
// does not undo the others; none of ours depends on another) and
// collateSubrequests false (they run in order). It returns each
// subrequest's status and body, in the order of subs. Errors: more than
// MaxSubrequests subrequests or MaxCollections collections and queries; a
// failed call (an *Error, ClassOf says what to do), or an answer that does
// not hold every subrequest's result (Retry).
func (c *Client) Composite(ctx context.Context, subs []Subrequest) ([]SubResult, error) {
	const op = "composite"
	n := 0
	for _, s := range subs {
		if s.collection() {
			n++
		}
	}
	if len(subs) == 0 || len(subs) > MaxSubrequests || n > MaxCollections {
		return nil, fmt.Errorf("salesforce: composite: %d subrequests (%d collections or queries); "+
			"1 to %d, at most %d collections or queries", len(subs), n, MaxSubrequests, MaxCollections)
	}
	body, err := c.CompositeBody(subs)
	if err != nil {
		return nil, fmt.Errorf("salesforce: composite: %w", err)
	}
	answer, err := c.do(ctx, op, apex(http.MethodPost, c.dataPath("composite"), body))
	if err != nil {
		return nil, err
	}
	var a compositeAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, &Error{Op: op, Class: Retry, Message: "answer is not a composite response"}
	}
	byRef := map[string]int{}
	for i, s := range subs {
		byRef[s.ReferenceID] = i
	}
	out := make([]SubResult, len(subs))
	got := 0
	for _, r := range a.CompositeResponse {
		i, ok := byRef[r.ReferenceID]
		if !ok || out[i].Status != 0 {
			continue
		}
		out[i], got = SubResult{Status: r.HTTPStatusCode, Body: r.Body}, got+1
	}
	if got != len(subs) {
		return nil, &Error{Op: op, Class: Retry, Message: fmt.Sprintf("answer holds %d of %d subrequest results",
			got, len(subs))}
	}
	return out, nil
}

// UpsertSubrequest is the sObject Collections upsert of up to
// MaxCollection records of object on extField, as a Composite subrequest
// (PATCH composite/sobjects/{object}/{extField}, allOrNone false; "Upsert
// Records Using sObject Collections"). Each record must carry extField.
func UpsertSubrequest(ref, object, extField string, records []Record) Subrequest {
	return Subrequest{Method: http.MethodPatch, Path: "composite/sobjects/" + object + "/" + extField,
		Body: collectionBody{Records: typed(object, records)}, ReferenceID: ref}
}

// CreateSubrequest is the sObject Collections create of up to
// MaxCollection records of object (POST composite/sobjects, allOrNone
// false); for a platform event it publishes the events ("Publish Event
// Messages with Salesforce APIs").
func CreateSubrequest(ref, object string, records []Record) Subrequest {
	return Subrequest{Method: http.MethodPost, Path: "composite/sobjects",
		Body: collectionBody{Records: typed(object, records)}, ReferenceID: ref}
}

// QuerySubrequest runs a SOQL statement as a Composite subrequest (GET
// query?q=…). Its result is one page (at most 2,000 records).
func QuerySubrequest(ref, statement string) Subrequest {
	return Subrequest{Method: http.MethodGet, Path: "query?q=" + url.QueryEscape(statement), ReferenceID: ref}
}

// CollectionResults reads an sObject Collections subrequest's result: one
// error per record, in order (nil when that record was saved), or, when
// the subrequest as a whole failed, a call error (an *Error: a 400
// INVALID_FIELD or INVALID_TYPE refuses every record at once). A success
// with an OPERATION_ENQUEUED entry in errors — an event published
// asynchronously — is a success.
func CollectionResults(op string, r SubResult, n int) ([]error, error) {
	if r.Status < 200 || r.Status > 299 {
		e := parseError(op, r.Status, r.Body)
		e.body = r.Body
		return nil, e
	}
	var results []saveResult
	if err := json.Unmarshal(r.Body, &results); err != nil || len(results) != n {
		return nil, &Error{Op: op, Class: Retry, Message: fmt.Sprintf("answer is not %d save results", n)}
	}
	out := make([]error, n)
	for i, res := range results {
		if !res.Success {
			out[i] = recordError(op, res.Errors)
		}
	}
	return out, nil
}

// QueryResults reads a query subrequest's result: its records. Errors: a
// failed subrequest (an *Error), or a page that is not done (Retry: the
// statements this package sends ask for far fewer than a page).
func QueryResults(r SubResult) ([]Record, error) {
	if r.Status < 200 || r.Status > 299 {
		return nil, parseError("query", r.Status, r.Body)
	}
	var page queryPage
	if err := json.Unmarshal(r.Body, &page); err != nil || !page.Done {
		return nil, &Error{Op: "query", Class: Retry, Message: "answer is not one whole query result"}
	}
	return page.Records, nil
}

// CollectionIDs returns the record Ids of an sObject Collections answer, in
// order ("" for a record not saved): each SaveResult/UpsertResult carries
// its record's id ("Upsert Records Using sObject Collections").
func CollectionIDs(r SubResult, n int) []string {
	var results []saveResult
	out := make([]string, n)
	if json.Unmarshal(r.Body, &results) != nil || len(results) != n {
		return out
	}
	for i, res := range results {
		if res.Success {
			out[i] = res.ID
		}
	}
	return out
}
