package sfemu

import (
	"bufio"
	"net"
	"net/http"
	"slices"
)

// Fault is a failure the emulator injects into the next requests of a
// kind (see Server.Calls for the kinds; "" matches any).
type Fault struct {
	// Kind is the request kind it applies to; "" any.
	Kind string
	// Times is how many requests it applies to. Default 1.
	Times int
	// Status and Body answer the request instead of handling it (Body is
	// sent as application/json). Ignored when Drop is set.
	Status int
	Body   string
	// Drop handles the request normally — records are committed — and
	// then closes the connection without answering.
	Drop bool
	// HTML sends Body as text/html: a login or maintenance page, as an
	// org's domain answers a request it will not serve as API (Salesforce
	// Help 005228480, "REST API returns 302": a redirect to another domain
	// or the login page).
	HTML bool
	// Location, with a 3xx Status, is the redirect's target.
	Location string
	// Hold keeps the request waiting until Hold is closed or the caller
	// goes away, as a call Salesforce takes long to answer does ("API
	// Request Limits and Allocations": a request may run up to 10 minutes;
	// one of 20 s or more counts toward the concurrent long-request limit).
	// Without Drop it waits before anything is committed (and commits
	// nothing when the caller went away); with Drop it commits first, then
	// waits, then closes the connection without answering.
	Hold <-chan struct{}
}

// Canned fault bodies in Salesforce's documented shapes.
const (
	// SessionExpired is the 401 body of an expired or revoked token.
	SessionExpired = `[{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID"}]`
	// LoginPage is the HTML a redirect to the login page, or a maintenance
	// page, carries (Fault.HTML).
	LoginPage = `<!DOCTYPE html><html><head><title>Login | Salesforce</title></head><body>` +
		`<form method="post" action="/"></form></body></html>`
	// LimitExceeded is the 403 body of an org over its daily API limit
	// ("Status Codes and Error Responses": 403 REQUEST_LIMIT_EXCEEDED).
	LimitExceeded = `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`
	// ConcurrentLimitExceeded is the 403 body when too many requests of
	// 20 seconds or longer run at once ("API Request Limits and
	// Allocations": Concurrent API Request Limits, 25 in production orgs
	// and sandboxes); the same errorCode as the daily limit, told apart by
	// the message.
	ConcurrentLimitExceeded = `[{"message":"ConcurrentPerOrgLongTxn Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`
	// ServerError is a 500 body.
	ServerError = `[{"message":"An unexpected error occurred.","errorCode":"UNKNOWN_EXCEPTION"}]`
	// InvalidGrant is the token endpoint's 400 body for a refused assertion.
	InvalidGrant = `{"error":"invalid_grant","error_description":"user hasn't approved this consumer"}`
)

// Inject queues f; faults apply in the order injected.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults drops every fault and record fault not yet used up.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.recFaults = nil, nil
}

// takeFault counts a request of kinds (a Composite request: "composite"
// and the kind of each subrequest) and returns the fault that applies to
// it, if any, using one of its times.
func (s *Server) takeFault(kinds ...string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range kinds {
		s.calls[k]++
	}
	for i, f := range s.faults {
		if f.Kind != "" && !slices.Contains(kinds, f.Kind) {
			continue
		}
		f.Times--
		if f.Times <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		copy := *f
		return &copy
	}
	return nil
}

// fault counts the request and, when a status fault applies, answers it
// (handled true). drop is true when a Drop fault applies: the caller
// handles the request and then calls reply with drop set, on the returned
// writer (which holds the reply for a Hold fault). A Hold fault without
// Drop waits here: handled when the caller went away meanwhile.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, kinds ...string) (out http.ResponseWriter,
	handled, drop bool) {
	f := s.takeFault(kinds...)
	switch {
	case f == nil:
		return w, false, false
	case f.Drop && f.Hold != nil:
		return &heldWriter{ResponseWriter: w, hold: f.Hold, gone: r.Context().Done()}, false, true
	case f.Drop:
		return w, false, true
	case f.Hold != nil:
		select {
		case <-f.Hold:
			return w, false, false
		case <-r.Context().Done():
			return w, true, false
		}
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	if f.HTML {
		w.Header().Set("Content-Type", "text/html;charset=UTF-8")
	}
	if f.Location != "" {
		w.Header().Set("Location", f.Location)
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte(f.Body))
	return w, true, false
}

// heldWriter is the writer of a request under a Drop fault with Hold: its
// reply waits for Hold (or the caller going away) before the connection
// is closed.
type heldWriter struct {
	http.ResponseWriter
	hold, gone <-chan struct{}
}

func (h *heldWriter) wait() {
	select {
	case <-h.hold:
	case <-h.gone:
	}
}

// Hijack hands over the connection (reply closes it).
func (h *heldWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// reply answers v as JSON with status, or, when drop is set, closes the
// connection without answering (the work is already done).
func reply(w http.ResponseWriter, drop bool, status int, v any) {
	if drop {
		if h, ok := w.(*heldWriter); ok {
			h.wait()
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, v)
}

// RecordFault fails the write of one record (by its external id value) in
// collection and single upserts with a Salesforce statusCode, as a
// validation rule, a lock or a trigger would; or one input of a custom
// notification action whose recipient is ExtID.
type RecordFault struct {
	// ExtID is the record's external id value, or a notification's
	// recipient (a user id).
	ExtID string
	// Code and Message are the error's statusCode and message, e.g.
	// UNABLE_TO_LOCK_ROW or FIELD_CUSTOM_VALIDATION_EXCEPTION.
	Code, Message string
	// Times is how many writes it fails; default 1, negative: every one.
	Times int
}

// InjectRecord queues a record fault.
func (s *Server) InjectRecord(f RecordFault) {
	if f.Times == 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recFaults = append(s.recFaults, &f)
}

// recordFaultLocked returns the fault for a write of extID, using one of
// its times.
func (s *Server) recordFaultLocked(extID string) *RecordFault {
	for i, f := range s.recFaults {
		if f.ExtID != extID {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.recFaults = append(s.recFaults[:i:i], s.recFaults[i+1:]...)
			}
		}
		return f
	}
	return nil
}
