package sfapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Class says what to do about a failed Salesforce call or record. It is
// decided by Salesforce's errorCode (statusCode in collection results), not
// by the HTTP status alone (docs/salesforce.md).
type Class string

// The classes.
const (
	// Retry: a lock (UNABLE_TO_LOCK_ROW), a 5xx, a network error or a
	// timeout. Retried with backoff.
	Retry Class = "retryable"
	// InvalidSession: INVALID_SESSION_ID even after one re-mint and one
	// retry. The writes wait in the outbox with backoff; never a loop.
	InvalidSession Class = "invalid_session"
	// LimitExceeded: REQUEST_LIMIT_EXCEEDED for the org's daily API
	// allocation (TotalRequests). Writes pause for salesforce.limit_pause
	// without re-authenticating and resume later.
	LimitExceeded Class = "limit_exceeded"
	// ConcurrentLimit: REQUEST_LIMIT_EXCEEDED for too many long requests
	// at once (ConcurrentPerOrgLongTxn, ConcurrentRequests: "API Request
	// Limits and Allocations", requests of 20 s or more, 25 in a production
	// org). It passes in seconds: writes hold back briefly, with backoff.
	ConcurrentLimit Class = "concurrent_limit"
	// AuthFailed: the token endpoint refused the JWT bearer assertion
	// (invalid_grant, invalid_client, ...): the connected app, the user's
	// pre-authorisation or the certificate is wrong. Retried with backoff.
	AuthFailed Class = "auth_failed"
	// StorageFull: STORAGE_LIMIT_EXCEEDED, the org's data storage is full
	// ("Data and File Storage Allocations", Salesforce Help; "Status Codes
	// and Error Responses"). No record of the org can be saved until an
	// admin frees storage (or the Failed_Callout__c purge runs), so it is
	// not a rejection of one record: every write of every replica pauses
	// for salesforce.StoragePause and resumes on its own (salesforce.Writer).
	StorageFull Class = "storage_full"
	// Maintenance: the answer is not the API's — a redirect (a 3xx other
	// than 300 and 304, which "Status Codes and Error Responses" gives a
	// meaning: a login or maintenance page, or another domain, Salesforce
	// Help 005228480 "REST API returns 302") or an HTML body whatever the
	// status (a maintenance or an intermediary's error page), or a 4xx with
	// no JSON body (an empty or plain-text 403 or 404, a 407 from an egress
	// proxy: the REST API answers every error with its JSON error list,
	// "Status Codes and Error Responses", so such an answer is an
	// intermediary's, not a refusal of the request) — or the org
	// is in read-only mode (INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE,
	// Salesforce Help "Read-Only Mode": no API writes during planned
	// maintenance). It passes by itself: the writes wait on the outage
	// backoff (BaseBackoff doubling to MaxBackoff), never as a rejection.
	Maintenance Class = "maintenance"
	// Rejected: Salesforce will not accept this as it is (a validation
	// rule, a missing field, a bad value). The proxy keeps its copy,
	// reports it and tries again rarely, in case an admin fixes the org.
	Rejected Class = "rejected"
)

// Error is a failed Salesforce call, or one record of a collection call
// that failed. Its text never holds a token or a body; Message is
// Salesforce's own error message.
type Error struct {
	// Op names the call, e.g. "upsert Failed_Callout__c".
	Op string
	// Status is the HTTP status; 0 for a network error or a record error.
	Status int
	// Code is Salesforce's errorCode (statusCode in collection results) or
	// the OAuth error ("invalid_grant"); "" when none.
	Code string
	// Message is Salesforce's message (or error_description).
	Message string
	// Fields are the fields the error is about, when Salesforce says.
	Fields []string
	// Class is what to do about it.
	Class Class
	// Err is the underlying network error, if any.
	Err error
	// body is the answer's body (never printed): an invocable action's 400
	// carries its per-input results there.
	body []byte
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("salesforce: " + e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if len(e.Fields) > 0 {
		b.WriteString(" (fields " + strings.Join(e.Fields, ", ") + ")")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns err's Class: an *Error's own, Retry for any other error
// (a network failure, a context deadline).
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Retry
}

// retryCodes are the error codes that a later try may not get: row locks,
// a rolled-back batch, and a duplicate external id raced in by a
// concurrent insert of the same record.
var retryCodes = map[string]bool{
	"UNABLE_TO_LOCK_ROW":                true,
	"ALL_OR_NONE_OPERATION_ROLLED_BACK": true,
	"DUPLICATE_VALUE":                   true,
	"SERVER_UNAVAILABLE":                true,
	"REQUEST_RUNNING_TOO_LONG":          true,
	"QUERY_TIMEOUT":                     true,
}

// ReadOnlyCode is the error code of a write while the org is in read-only
// mode (Salesforce Help "Read-Only Mode"; the message says "Updates can't
// be made during maintenance").
const ReadOnlyCode = "INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE"

// classify decides the Class of an error answer from its HTTP status (0 for
// a record of a collection result) and Salesforce's code.
func classify(status int, code string) Class {
	switch {
	case code == ReadOnlyCode:
		return Maintenance
	case status >= 300 && status <= 399 && status != http.StatusMultipleChoices && status != http.StatusNotModified:
		return Maintenance
	case code == "INVALID_SESSION_ID" || status == http.StatusUnauthorized:
		return InvalidSession
	case code == "REQUEST_LIMIT_EXCEEDED":
		return LimitExceeded
	case code == "STORAGE_LIMIT_EXCEEDED":
		return StorageFull
	case retryCodes[code], status >= 500, status == http.StatusRequestTimeout,
		status == http.StatusTooManyRequests:
		return Retry
	}
	return Rejected
}

// apiError is one element of Salesforce's error answer
// [{"message","errorCode","fields"}]; collection results say statusCode
// instead of errorCode.
type apiError struct {
	Message    string   `json:"message"`
	ErrorCode  string   `json:"errorCode"`
	StatusCode string   `json:"statusCode"`
	Fields     []string `json:"fields"`
}

func (a apiError) code() string {
	if a.ErrorCode != "" {
		return a.ErrorCode
	}
	return a.StatusCode
}

// parseError turns a non-2xx answer into an *Error. The body is parsed as
// Salesforce's error list (an empty list or another shape keeps only the
// status); it is never quoted.
func parseError(op string, status int, body []byte) *Error {
	e := &Error{Op: op, Status: status}
	if html(body) {
		e.Class, e.Message = Maintenance, "an HTML page, not an API answer (a login or maintenance page)"
		return e
	}
	if status >= 400 && status <= 499 && !json.Valid(bytes.TrimSpace(body)) {
		if c := classify(status, ""); c != Rejected {
			e.Class = c // 401, 408, 429 mean the same without a body
			return e
		}
		e.Class, e.Message = Maintenance, "a 4xx without the API's JSON error body (an egress proxy, a load balancer, a firewall)"
		return e
	}
	var list []apiError
	if json.Unmarshal(body, &list) == nil && len(list) > 0 {
		e.Code, e.Message, e.Fields = list[0].code(), list[0].Message, list[0].Fields
	}
	e.Class = classify(status, e.Code)
	if e.Class == LimitExceeded && concurrentLimit(e.Message) {
		e.Class = ConcurrentLimit
	}
	return e
}

// html reports whether an answer's body is an HTML page: the REST API
// answers JSON (Accept: application/json), so a body that opens with a tag
// came from a login or maintenance page, or from an intermediary.
func html(body []byte) bool {
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] == '<'
}

// concurrentLimit reports whether a REQUEST_LIMIT_EXCEEDED message names a
// concurrency limit ("ConcurrentPerOrgLongTxn Limit exceeded.",
// "ConcurrentRequests (Concurrent API Requests) Limit exceeded") rather
// than the daily allocation ("TotalRequests Limit exceeded."): the two
// share the error code and differ only in the message.
func concurrentLimit(message string) bool {
	return strings.Contains(strings.ToLower(message), "concurrent")
}

// recordError turns the first error of one collection result into an
// *Error classed by its statusCode.
func recordError(op string, errs []apiError) *Error {
	e := &Error{Op: op, Code: "UNKNOWN_ERROR", Message: "record not saved, no error given"}
	if len(errs) > 0 {
		e.Code, e.Message, e.Fields = errs[0].code(), errs[0].Message, errs[0].Fields
	}
	e.Class = classify(0, e.Code)
	return e
}
