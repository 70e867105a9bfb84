package sfemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// query serves GET …/query?q=SOQL and GET …/query/{cursor} (the
// nextRecordsUrl of a previous page).
func (s *Server) query(w http.ResponseWriter, r *http.Request, drop bool, p []string) {
	version := r.PathValue("version")
	var rows []Record
	if len(p) == 2 {
		s.mu.Lock()
		rows, ok := s.cursors[p[1]]
		delete(s.cursors, p[1])
		s.mu.Unlock()
		if !ok {
			apiError(w, http.StatusBadRequest, "INVALID_QUERY_LOCATOR", "invalid query locator")
			return
		}
		s.page(w, drop, version, rows)
		return
	}
	soql := r.URL.Query().Get("q")
	q, err := parseSOQL(soql)
	if err != nil {
		apiError(w, http.StatusBadRequest, "MALFORMED_QUERY", err.Error())
		return
	}
	s.mu.Lock()
	s.queries = append(s.queries, soql)
	if _, ok := s.records[q.object]; !ok && s.o.Objects != nil {
		if _, declared := s.o.Objects[q.object]; !declared {
			s.mu.Unlock()
			apiError(w, http.StatusBadRequest, "INVALID_TYPE", "sObject type '"+q.object+"' is not supported.")
			return
		}
	}
	rows = q.run(s.records[q.object], version)
	s.mu.Unlock()
	s.page(w, drop, version, rows)
}

// Queries returns the SOQL of every query run so far (a call or a
// Composite subrequest; a cursor's next page is no new query), in order.
// A query is listed as its rows are read, under one lock: a change made
// after Queries listed it is not in its answer.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// page answers the first Options.PageSize rows and keeps the rest behind a
// nextRecordsUrl.
func (s *Server) page(w http.ResponseWriter, drop bool, version string, rows []Record) {
	ans := map[string]any{"totalSize": len(rows), "done": true, "records": rows}
	if rows == nil {
		ans["records"] = []Record{}
	}
	if len(rows) > s.o.PageSize {
		s.mu.Lock()
		s.cursorSeq++
		cur := fmt.Sprintf("01gEMU%08d-%d", s.cursorSeq, s.o.PageSize)
		s.cursors[cur] = rows[s.o.PageSize:]
		s.mu.Unlock()
		ans["records"], ans["done"] = rows[:s.o.PageSize], false
		ans["nextRecordsUrl"] = "/services/data/" + version + "/query/" + cur
	}
	reply(w, drop, http.StatusOK, ans)
}

// notification is one input of customNotificationAction.
type notification struct {
	CustomNotifTypeID string   `json:"customNotifTypeId"`
	RecipientIDs      []string `json:"recipientIds"`
	Title             string   `json:"title"`
	Body              string   `json:"body"`
	TargetID          string   `json:"targetId"`
	TargetPageRef     string   `json:"targetPageRef"`
}

// action serves POST …/actions/standard/customNotificationAction: every
// input needs a known notification type, recipients, a title, a body and
// a target (targetId or targetPageRef); a RecordFault whose ExtID is a
// recipient fails that input. The answer is one result per input
// ("Invoking Actions", Actions Developer Guide: actionName, errors,
// isSuccess, outputValues), 200 when every input succeeded and 400 when any
// failed; the inputs that succeeded are kept (partial save,
// InvocableActionSettings isPartialSaveAllowed).
func (s *Server) action(w http.ResponseWriter, r *http.Request, drop bool, name string) {
	if name != "customNotificationAction" {
		apiError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	var body struct {
		Inputs []notification `json:"inputs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Inputs) == 0 {
		apiError(w, http.StatusBadRequest, "JSON_PARSER_ERROR", "inputs required")
		return
	}
	s.mu.Lock()
	status := http.StatusOK
	results := make([]map[string]any, len(body.Inputs))
	for i, in := range body.Inputs {
		res := map[string]any{"actionName": name, "isSuccess": true, "errors": nil,
			"outputValues": map[string]string{"SuccessMessage": "Your custom notification is processed successfully."}}
		code, why := "INVALID_ARGUMENT", s.checkNotification(in)
		for _, rcpt := range in.RecipientIDs {
			if rf := s.recordFaultLocked(rcpt); why == "" && rf != nil {
				code, why = rf.Code, rf.Message
			}
		}
		if why != "" {
			status = http.StatusBadRequest
			res["isSuccess"], res["outputValues"] = false, nil
			res["errors"] = []map[string]any{{"statusCode": code, "message": why, "fields": []string{}}}
		} else {
			s.notes = append(s.notes, Record{"customNotifTypeId": in.CustomNotifTypeID,
				"recipientIds": strings.Join(in.RecipientIDs, ","), "title": in.Title, "body": in.Body,
				"targetId": in.TargetID, "targetPageRef": in.TargetPageRef})
		}
		results[i] = res
	}
	s.mu.Unlock()
	reply(w, drop, status, results)
}

// checkNotification says what is wrong with one input ("" nothing).
func (s *Server) checkNotification(in notification) string {
	known := false
	for _, t := range s.records["CustomNotificationType"] {
		known = known || t["Id"] == in.CustomNotifTypeID
	}
	switch {
	case !known:
		return "invalid customNotifTypeId"
	case len(in.RecipientIDs) == 0:
		return "recipientIds is required"
	case in.Title == "" || in.Body == "":
		return "title and body are required"
	case in.TargetID == "" && in.TargetPageRef == "":
		return "targetId or targetPageRef is required"
	case in.TargetID != "" && !s.knownIDLocked(in.TargetID):
		return "invalid targetId: no record has this id"
	}
	return ""
}

// knownIDLocked reports whether a record of any object has id.
func (s *Server) knownIDLocked(id string) bool {
	for _, recs := range s.records {
		for _, r := range recs {
			if r["Id"] == id {
				return true
			}
		}
	}
	return false
}
