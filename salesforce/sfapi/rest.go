package sfapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Record is one sObject's fields by API name, as sent or as a query
// returns it. Values are JSON values: string, float64, bool or nil.
type Record map[string]any

// collectionBody is the request of sObject Collections create and upsert.
type collectionBody struct {
	AllOrNone bool     `json:"allOrNone"`
	Records   []Record `json:"records"`
}

// saveResult is one element of a collection's answer (SaveResult,
// UpsertResult).
type saveResult struct {
	ID      string     `json:"id"`
	Success bool       `json:"success"`
	Created bool       `json:"created"`
	Errors  []apiError `json:"errors"`
}

// UpsertCollection upserts up to MaxCollection records of object on the
// external id field extField in one call
// (PATCH /services/data/vNN.0/composite/sobjects/{object}/{extField},
// allOrNone false; "Upsert Records Using sObject Collections"). Each record
// must carry extField. It returns one error per record, in order (nil when
// that record was saved; an *Error classed by its statusCode otherwise),
// or a call error (an *Error) when the call as a whole failed.
func (c *Client) UpsertCollection(ctx context.Context, object, extField string, records []Record) ([]error, error) {
	if len(records) == 0 || len(records) > MaxCollection {
		return nil, fmt.Errorf("salesforce: upsert %s: %d records; 1 to %d per call", object, len(records), MaxCollection)
	}
	path := c.dataPath("composite/sobjects/" + object + "/" + extField)
	return c.collection(ctx, "upsert "+object, http.MethodPatch, path, typed(object, records))
}

// CreateCollection creates up to MaxCollection records of object in one
// call (POST /services/data/vNN.0/composite/sobjects, allOrNone false). For
// a platform event such as Callout_Result__e this publishes the events
// ("Publish Event Messages with Salesforce APIs"). Results as
// UpsertCollection.
func (c *Client) CreateCollection(ctx context.Context, object string, records []Record) ([]error, error) {
	if len(records) == 0 || len(records) > MaxCollection {
		return nil, fmt.Errorf("salesforce: create %s: %d records; 1 to %d per call", object, len(records), MaxCollection)
	}
	return c.collection(ctx, "create "+object, http.MethodPost, c.dataPath("composite/sobjects"),
		typed(object, records))
}

// typed copies records with attributes.type set, as collections require.
func typed(object string, records []Record) []Record {
	out := make([]Record, len(records))
	for i, r := range records {
		t := make(Record, len(r)+1)
		for k, v := range r {
			t[k] = v
		}
		t["attributes"] = map[string]string{"type": object}
		out[i] = t
	}
	return out
}

func (c *Client) collection(ctx context.Context, op, method, path string, records []Record) ([]error, error) {
	body, err := json.Marshal(collectionBody{Records: records})
	if err != nil {
		return nil, fmt.Errorf("salesforce: %s: %w", op, err)
	}
	answer, err := c.do(ctx, op, apex(method, path, body))
	if err != nil {
		return nil, err
	}
	var results []saveResult
	if err := json.Unmarshal(answer, &results); err != nil || len(results) != len(records) {
		return nil, &Error{Op: op, Class: Retry, Message: fmt.Sprintf(
			"answer is not %d save results", len(records))}
	}
	out := make([]error, len(results))
	for i, r := range results {
		if !r.Success {
			out[i] = recordError(op, r.Errors)
		}
	}
	return out, nil
}

// Upsert upserts one record of object on extField = extID
// (PATCH /services/data/vNN.0/sobjects/{object}/{extField}/{escaped id}):
// 201 created, 200 or 204 updated. It reports whether it created the
// record. The record must not carry extField (the URL does). Errors: an
// *Error; 300 (several records match) is Rejected.
func (c *Client) Upsert(ctx context.Context, object, extField, extID string, rec Record) (bool, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("salesforce: upsert %s: %w", object, err)
	}
	op := "upsert " + object
	path := c.dataPath("sobjects/" + object + "/" + extField + "/" + url.PathEscape(extID))
	answer, err := c.do(ctx, op, apex(http.MethodPatch, path, body))
	if err != nil {
		return false, err
	}
	var r saveResult
	_ = json.Unmarshal(answer, &r) // 204 has no body: updated
	return r.Created, nil
}

// queryPage is one page of a SOQL answer.
type queryPage struct {
	TotalSize      int      `json:"totalSize"`
	Done           bool     `json:"done"`
	NextRecordsURL string   `json:"nextRecordsUrl"`
	Records        []Record `json:"records"`
}

// Query runs a SOQL statement and calls each for every record, page after
// page, following nextRecordsUrl until the answer is done ("Execute a SOQL
// Query"). Each record has its fields by API name and an "attributes" map.
// It stops at each's first error and returns it. Errors: an *Error for a
// failed call, or each's error.
func (c *Client) Query(ctx context.Context, statement string, each func(Record) error) error {
	next := statement
	for next != "" {
		answer, err := c.do(ctx, "query", soql(next))
		if err != nil {
			return err
		}
		var page queryPage
		if err := json.Unmarshal(answer, &page); err != nil {
			return &Error{Op: "query", Class: Retry, Message: "answer is not a query result"}
		}
		for _, r := range page.Records {
			if err := each(r); err != nil {
				return err
			}
		}
		next = ""
		if !page.Done {
			if !strings.HasPrefix(page.NextRecordsURL, "/services/data/") {
				return &Error{Op: "query", Class: Retry, Message: "page not done but no nextRecordsUrl"}
			}
			next = page.NextRecordsURL
		}
	}
	return nil
}

// actionResult is one element of an invocable action's answer.
type actionResult struct {
	IsSuccess bool       `json:"isSuccess"`
	Errors    []apiError `json:"errors"`
}

// InvokeAction invokes a standard invocable action with one input per
// element of inputs (POST /services/data/vNN.0/actions/standard/{action},
// body {"inputs": [...]}; "Invoking Actions", Actions Developer Guide). It
// returns one error per input, in order, or a call error, as
// UpsertCollection. When any input fails Salesforce answers 400 with the
// per-input results, isSuccess true and false mixed, and keeps the inputs
// that succeeded (partial save, InvocableActionSettings
// isPartialSaveAllowed): such a 400 is read as per-input results, so only
// the failed inputs are sent again. A 400 without them is a call error.
func (c *Client) InvokeAction(ctx context.Context, action string, inputs []Record) ([]error, error) {
	op := "action " + action
	body, err := json.Marshal(map[string][]Record{"inputs": inputs})
	if err != nil {
		return nil, fmt.Errorf("salesforce: %s: %w", op, err)
	}
	answer, err := c.do(ctx, op, apex(http.MethodPost, c.dataPath("actions/standard/"+action), body))
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !isActionResults(e.body, len(inputs)) {
			return nil, err
		}
		answer = e.body
	}
	var results []actionResult
	if err := json.Unmarshal(answer, &results); err != nil || len(results) != len(inputs) {
		return nil, &Error{Op: op, Class: Retry, Message: fmt.Sprintf("answer is not %d action results", len(inputs))}
	}
	out := make([]error, len(results))
	for i, r := range results {
		if !r.IsSuccess {
			out[i] = recordError(op, r.Errors)
		}
	}
	return out, nil
}

// isActionResults reports whether body is a list of n action results (each
// with isSuccess), as an invocable action's 400 carries them.
func isActionResults(body []byte, n int) bool {
	var results []map[string]json.RawMessage
	if json.Unmarshal(body, &results) != nil || len(results) != n {
		return false
	}
	for _, r := range results {
		if _, ok := r["isSuccess"]; !ok {
			return false
		}
	}
	return true
}

// QuoteSOQL returns s as a SOQL string literal: single quotes around it,
// backslash, quote, newline and the like escaped ("Quoted String Escape
// Sequences", SOQL and SOSL Reference).
func QuoteSOQL(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`,
		"\b", `\b`, "\f", `\f`)
	return "'" + r.Replace(s) + "'"
}
