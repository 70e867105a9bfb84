package sfemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf16"
)

// maxCollection is the sObject Collections limit per call.
const maxCollection = 200

// kindOf names a data request's kind (Server.Calls).
func kindOf(method string, p []string) string {
	switch {
	case method == http.MethodPatch && len(p) == 4 && p[0] == "composite" && p[1] == "sobjects":
		return "upsert"
	case method == http.MethodPost && len(p) == 2 && p[0] == "composite" && p[1] == "sobjects":
		return "create"
	case method == http.MethodPatch && len(p) == 4 && p[0] == "sobjects":
		return "upsert1"
	case method == http.MethodPost && len(p) == 2 && p[0] == "sobjects":
		return "create1"
	case method == http.MethodGet && (len(p) == 1 || len(p) == 2) && p[0] == "query":
		return "query"
	case method == http.MethodPost && len(p) == 3 && p[0] == "actions" && p[1] == "standard":
		return "action"
	case method == http.MethodPost && len(p) == 1 && p[0] == "composite":
		return "composite"
	}
	return "unknown"
}

// data serves /services/data/vNN.0/…: usage header, faults, session check,
// then the resource. Every request is one API call; a Composite request is
// one call whatever it holds ("Send Multiple Requests Using Composite").
// A fault for a kind applies to a Composite request holding a subrequest
// of that kind, to the whole call: sessions, API limits, server errors and
// dropped connections are the call's, not a subrequest's.
func (s *Server) data(w http.ResponseWriter, r *http.Request) {
	p := segments(r)
	kind := kindOf(r.Method, p)
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	s.used++
	s.apiCalls++
	s.largest = max(s.largest, int64(len(body)))
	w.Header().Set("Sforce-Limit-Info", s.limitInfoLocked())
	s.mu.Unlock()
	kinds := []string{kind}
	var comp *compositeBody
	if kind == "composite" {
		var err error
		if comp, err = readComposite(r); err != nil {
			s.takeFault(kinds...)
			apiError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "malformed JSON: "+err.Error())
			return
		}
		kinds = append(kinds, comp.kinds()...)
	}
	w, handled, drop := s.fault(w, r, kinds...)
	if handled || !s.authorized(w, r) {
		return
	}
	if v := r.PathValue("version"); !strings.HasPrefix(v, "v") || !strings.HasSuffix(v, ".0") {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	if comp != nil {
		s.composite(w, r, drop, comp)
		return
	}
	s.serve(w, r, drop, kind, p)
}

// serve answers one resource request (a call, or a Composite subrequest).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, drop bool, kind string, p []string) {
	switch kind {
	case "upsert":
		s.upsertCollection(w, r, drop, p[2], p[3])
	case "create":
		s.createCollection(w, r, drop)
	case "upsert1":
		s.upsertOne(w, r, drop, p[1], p[2], p[3])
	case "create1":
		s.createOne(w, r, drop, p[1])
	case "query":
		s.query(w, r, drop, p)
	case "action":
		s.action(w, r, drop, p[2])
	default:
		apiError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}
}

// limitInfoLocked is the Sforce-Limit-Info value of an answer, in the
// documented form ("Limit Info Header", REST API Developer Guide): entries
// separated by "; " — api-usage=N/M always; api-bursts=1/750 once the org
// is past its daily allocation; per-app-api-usage=N/M(appName=…) when the
// connected app has a quota (Options.AppName, AppLimit).
func (s *Server) limitInfoLocked() string {
	v := fmt.Sprintf("api-usage=%d/%d", s.used, s.o.DailyLimit)
	if s.used > s.o.DailyLimit {
		v += "; api-bursts=1/750"
	}
	if s.o.AppName != "" && s.o.AppLimit > 0 {
		v += fmt.Sprintf("; per-app-api-usage=%d/%d(appName=%s)", s.apiCalls, s.o.AppLimit, s.o.AppName)
	}
	return v
}

// segments returns the path segments after /services/data/vNN.0/, each
// unescaped on its own (an external id may hold an escaped '/').
func segments(r *http.Request) []string {
	parts := strings.Split(r.URL.EscapedPath(), "/")
	if len(parts) < 4 {
		return nil
	}
	out := parts[4:] // "", "services", "data", version
	for i, seg := range out {
		if u, err := url.PathUnescape(seg); err == nil {
			out[i] = u
		}
	}
	return out
}

// saveError is one error of a save result (statusCode, as collections say).
type saveError struct {
	StatusCode string   `json:"statusCode"`
	Message    string   `json:"message"`
	Fields     []string `json:"fields"`
}

// saveResult is one element of a collection's answer.
type saveResult struct {
	ID      string      `json:"id,omitempty"`
	Success bool        `json:"success"`
	Errors  []saveError `json:"errors"`
	Created *bool       `json:"created,omitempty"`
}

func failed(code, message string, fields ...string) saveResult {
	if fields == nil {
		fields = []string{}
	}
	return saveResult{Errors: []saveError{{StatusCode: code, Message: message, Fields: fields}}}
}

// collectionBody is the body of a collection create or upsert.
type collectionBody struct {
	AllOrNone bool     `json:"allOrNone"`
	Records   []Record `json:"records"`
}

// readCollection decodes a collection body, answering 400 when it is not
// one or holds more than 200 records.
func readCollection(w http.ResponseWriter, r *http.Request) ([]Record, bool) {
	var body collectionBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "malformed JSON: "+err.Error())
		return nil, false
	}
	if len(body.Records) > maxCollection {
		apiError(w, http.StatusBadRequest, "EXCEEDED_ID_LIMIT",
			"record limit reached. cannot submit more than 200 records into this call")
		return nil, false
	}
	return body.Records, true
}

// typeOf returns a collection record's attributes.type and the record
// without its attributes.
func typeOf(rec Record) (string, Record) {
	attrs, _ := rec["attributes"].(map[string]any)
	t, _ := attrs["type"].(string)
	out := Record{}
	for k, v := range rec {
		if k != "attributes" {
			out[k] = v
		}
	}
	return t, out
}

// schemaErrorLocked checks the object and every field of every record of
// a call against Options.Objects. A real org refuses the whole call with
// 400 — not record by record — when the object is unknown (INVALID_TYPE)
// or a field is unknown or invisible to the user for lack of field-level
// security (INVALID_FIELD, "No such column"); "Status Codes and Error
// Responses": 400, the request couldn't be understood. It answers and
// returns true then.
func (s *Server) schemaErrorLocked(w http.ResponseWriter, object string, records []Record) bool {
	if s.o.Objects == nil {
		return false
	}
	for _, rec := range records {
		t, fields := typeOf(rec)
		if t == "" {
			t = object
		}
		decl, ok := s.o.Objects[t]
		if !ok {
			apiError(w, http.StatusBadRequest, "INVALID_TYPE", "sObject type '"+t+"' is not supported. If you are "+
				"attempting to use a custom object, be sure to append the '__c' after the entity name.")
			return true
		}
		for _, name := range sortedKeys(fields) {
			if _, ok := decl[name]; !ok {
				apiError(w, http.StatusBadRequest, "INVALID_FIELD", "No such column '"+name+"' on sobject of type "+t)
				return true
			}
		}
	}
	return false
}

// upsertCollection serves PATCH …/composite/sobjects/{object}/{extField}
// ("Upsert Records Using sObject Collections"): up to 200 records, each
// upserted on its external id, one result each in order (allOrNone false:
// a failed record does not stop the others); a duplicate external id in
// the request fails that record with DUPLICATE_VALUE.
func (s *Server) upsertCollection(w http.ResponseWriter, r *http.Request, drop bool, object, extField string) {
	records, ok := readCollection(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.schemaErrorLocked(w, object, records) {
		s.mu.Unlock()
		return
	}
	results := make([]saveResult, len(records))
	seen := map[string]bool{}
	for i, rec := range records {
		t, fields := typeOf(rec)
		extID, _ := fields[extField].(string)
		switch {
		case t != object:
			results[i] = failed("INVALID_TYPE", "record type does not match the URI's sObject")
		case extID == "":
			results[i] = failed("MISSING_ARGUMENT", extField+" not specified", extField)
		case seen[extID]:
			results[i] = failed("DUPLICATE_VALUE", "Duplicate external id specified: "+extID, extField)
		default:
			seen[extID] = true
			results[i] = s.upsertLocked(object, extField, extID, fields)
		}
	}
	s.mu.Unlock()
	reply(w, drop, http.StatusOK, results)
}

func (s *Server) upsertOne(w http.ResponseWriter, r *http.Request, drop bool, object, extField, extID string) {
	var fields Record
	if err := json.NewDecoder(r.Body).Decode(&fields); err != nil {
		apiError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "malformed JSON")
		return
	}
	fields[extField] = extID
	s.mu.Lock()
	res := s.upsertLocked(object, extField, extID, fields)
	s.mu.Unlock()
	switch {
	case !res.Success:
		e := res.Errors[0]
		apiError(w, http.StatusBadRequest, e.StatusCode, e.Message, e.Fields...)
	case *res.Created:
		reply(w, drop, http.StatusCreated, saveResult{ID: res.ID, Success: true, Errors: []saveError{}, Created: res.Created})
	default:
		reply(w, drop, http.StatusNoContent, nil)
	}
}

// upsertLocked writes fields to the record of object whose extField is
// extID, creating it when there is none; a null value clears a field.
func (s *Server) upsertLocked(object, extField, extID string, fields Record) saveResult {
	if res, bad := s.checkLocked(object, fields); bad {
		return res
	}
	if rf := s.recordFaultLocked(extID); rf != nil {
		return failed(rf.Code, rf.Message)
	}
	for _, rec := range s.records[object] {
		if rec[extField] == extID {
			before := maps.Clone(rec)
			merge(rec, fields)
			rec["SystemModstamp"] = s.stamp()
			s.changeLocked(object, rec, changedOf(before, fields), false)
			created := false
			return saveResult{ID: rec["Id"].(string), Success: true, Errors: []saveError{}, Created: &created}
		}
	}
	rec := s.newRecordLocked(object)
	merge(rec, fields)
	s.records[object] = append(s.records[object], rec)
	s.changeLocked(object, rec, fields, true)
	created := true
	return saveResult{ID: rec["Id"].(string), Success: true, Errors: []saveError{}, Created: &created}
}

// newRecordLocked returns a new record of object: an id, CreatedDate,
// SystemModstamp and the fields' default values (Options.Defaults; a
// picklist's default value applies to a record created without the field,
// as <default>true</default> in its value set says).
func (s *Server) newRecordLocked(object string) Record {
	rec := Record{"Id": s.newID("a00"), "CreatedDate": s.stamp(), "SystemModstamp": s.stamp()}
	for k, v := range s.o.Defaults[object] {
		rec[k] = v
	}
	return rec
}

func merge(rec, fields Record) {
	for k, v := range fields {
		if v == nil {
			delete(rec, k)
		} else {
			rec[k] = v
		}
	}
}

// ReadOnlyMessage is the message of a write refused in read-only mode.
const ReadOnlyMessage = "Updates can't be made during maintenance. Try again when maintenance is complete."

// SetReadOnly puts the org in read-only mode, or takes it out: while it
// is, every record write and event publish is refused, record by record,
// with INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE (Salesforce
// Help "Read-Only Mode": during planned maintenance no API write or edit
// action is allowed; queries still answer).
func (s *Server) SetReadOnly(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readOnly = on
}

// checkLocked refuses every write in read-only mode and validates fields
// against Options.Objects.
func (s *Server) checkLocked(object string, fields Record) (saveResult, bool) {
	if s.readOnly {
		return failed("INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE", ReadOnlyMessage), true
	}
	if s.o.Objects == nil {
		return saveResult{}, false
	}
	decl, ok := s.o.Objects[object]
	if !ok {
		return failed("INVALID_TYPE", "sObject type '"+object+"' is not supported"), true
	}
	for _, name := range sortedKeys(fields) {
		max, ok := decl[name]
		if !ok {
			return failed("INVALID_FIELD", "No such column '"+name+"' on sobject of type "+object, name), true
		}
		if str, isStr := fields[name].(string); isStr && max > 0 && len(utf16.Encode([]rune(str))) > max {
			return failed("STRING_TOO_LONG", fmt.Sprintf("%s: data value too large (max length=%d)", name, max), name), true
		}
	}
	return saveResult{}, false
}

// createCollection serves POST …/composite/sobjects ("Create Records Using
// sObject Collections"): each record's attributes.type names its object;
// one result each, in order.
func (s *Server) createCollection(w http.ResponseWriter, r *http.Request, drop bool) {
	records, ok := readCollection(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	if s.schemaErrorLocked(w, "", records) {
		s.mu.Unlock()
		return
	}
	results := make([]saveResult, len(records))
	for i, rec := range records {
		t, fields := typeOf(rec)
		results[i] = s.createLocked(t, fields)
	}
	s.mu.Unlock()
	reply(w, drop, http.StatusOK, results)
}

func (s *Server) createOne(w http.ResponseWriter, r *http.Request, drop bool, object string) {
	var fields Record
	if err := json.NewDecoder(r.Body).Decode(&fields); err != nil {
		apiError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "malformed JSON")
		return
	}
	s.mu.Lock()
	res := s.createLocked(object, fields)
	s.mu.Unlock()
	if !res.Success {
		e := res.Errors[0]
		apiError(w, http.StatusBadRequest, e.StatusCode, e.Message, e.Fields...)
		return
	}
	reply(w, drop, http.StatusCreated, res)
}

// createLocked creates a record, or publishes an event (object ending in
// __e: its id has the key prefix e00).
func (s *Server) createLocked(object string, fields Record) saveResult {
	if object == "" {
		return failed("INVALID_TYPE", "attributes.type is required")
	}
	if res, bad := s.checkLocked(object, fields); bad {
		return res
	}
	if strings.HasSuffix(object, "__e") {
		ev := Record{"ReplayId": fmt.Sprint(len(s.events[object]) + 1)}
		merge(ev, fields)
		s.events[object] = append(s.events[object], ev)
		// "Publish Event Messages with Salesforce APIs": a successful
		// publish is queued and published asynchronously; the result says
		// success true and carries an OPERATION_ENQUEUED entry, whose
		// message is the event's UUID, in errors.
		s.eventSeq++
		return saveResult{ID: s.newID("e01"), Success: true, Errors: []saveError{{StatusCode: "OPERATION_ENQUEUED",
			Message: fmt.Sprintf("00000000-0000-4000-8000-%012d", s.eventSeq), Fields: []string{}}}}
	}
	rec := s.newRecordLocked(object)
	merge(rec, fields)
	s.records[object] = append(s.records[object], rec)
	return saveResult{ID: rec["Id"].(string), Success: true, Errors: []saveError{}}
}
