package sfemu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
)

// Composite limits ("Send Multiple Requests Using Composite"): up to 25
// subrequests in one call, up to 5 of them sObject Collections or query
// operations.
const (
	maxSubrequests = 25
	maxCollections = 5
)

// compositeBody is the Composite request body ("Composite Request Body").
type compositeBody struct {
	AllOrNone          bool         `json:"allOrNone"`
	CollateSubrequests bool         `json:"collateSubrequests"`
	CompositeRequest   []subrequest `json:"compositeRequest"`
	subPaths           [][]string   // each subrequest's segments after the version
	subKinds           []string     // each subrequest's kind
	subURLs            []*url.URL   // each subrequest's parsed url
}

// subrequest is one Composite subrequest.
type subrequest struct {
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	ReferenceID string            `json:"referenceId"`
	Body        json.RawMessage   `json:"body"`
	HTTPHeaders map[string]string `json:"httpHeaders"`
}

// subResult is one Composite Subrequest Result ("Composite Response
// Body": body, httpHeaders, httpStatusCode, referenceId).
type subResult struct {
	Body           json.RawMessage   `json:"body"`
	HTTPHeaders    map[string]string `json:"httpHeaders"`
	HTTPStatusCode int               `json:"httpStatusCode"`
	ReferenceID    string            `json:"referenceId"`
}

// readComposite decodes a Composite request body and the kind of each
// subrequest.
func readComposite(r *http.Request) (*compositeBody, error) {
	var b compositeBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return nil, err
	}
	for _, sr := range b.CompositeRequest {
		u, err := url.Parse(sr.URL)
		if err != nil {
			return nil, fmt.Errorf("subrequest %q: url: %w", sr.ReferenceID, err)
		}
		parts := strings.Split(u.EscapedPath(), "/")
		var p []string
		if len(parts) >= 4 && parts[1] == "services" && parts[2] == "data" {
			p = parts[4:]
			for i, seg := range p {
				if un, err := url.PathUnescape(seg); err == nil {
					p[i] = un
				}
			}
		}
		b.subPaths = append(b.subPaths, p)
		b.subKinds = append(b.subKinds, kindOf(strings.ToUpper(sr.Method), p))
		b.subURLs = append(b.subURLs, u)
	}
	return &b, nil
}

// kinds returns the kinds of the subrequests.
func (b *compositeBody) kinds() []string { return b.subKinds }

// composite serves POST …/composite: the subrequests in order, each as its
// own resource would answer, in one response ({"compositeResponse": […]},
// top-level 200 whatever the subrequests answered). allOrNone false: a
// failed subrequest does not stop the others (none of ours depend on
// another). More than 25 subrequests, or more than 5 sObject Collections
// and queries, or a subrequest of another API version or an unsupported
// resource, refuse the whole call with 400.
func (s *Server) composite(w http.ResponseWriter, r *http.Request, drop bool, b *compositeBody) {
	version := r.PathValue("version")
	n, collections := len(b.CompositeRequest), 0
	for _, k := range b.subKinds {
		if k == "upsert" || k == "create" || k == "query" {
			collections++
		}
	}
	switch {
	case n == 0:
		apiError(w, http.StatusBadRequest, "INVALID_INPUT", "compositeRequest must have at least one subrequest")
		return
	case n > maxSubrequests:
		apiError(w, http.StatusBadRequest, "LIMIT_EXCEEDED",
			fmt.Sprintf("Limit Exceeded: A composite request may have at most %d subrequests", maxSubrequests))
		return
	case collections > maxCollections:
		apiError(w, http.StatusBadRequest, "LIMIT_EXCEEDED", fmt.Sprintf(
			"Limit Exceeded: A composite request may have at most %d sObject Collections or query subrequests",
			maxCollections))
		return
	}
	seen := map[string]bool{}
	for i, sr := range b.CompositeRequest {
		why := ""
		switch {
		case sr.ReferenceID == "" || seen[sr.ReferenceID]:
			why = "each subrequest needs a unique referenceId"
		case !strings.HasPrefix(sr.URL, "/services/data/"+version+"/"):
			why = "subrequest " + sr.ReferenceID + " must use " + "/services/data/" + version + "/"
		case b.subKinds[i] == "unknown" || b.subKinds[i] == "action" || b.subKinds[i] == "composite":
			why = "subrequest " + sr.ReferenceID + ": resource not supported in a composite request"
		}
		if why != "" {
			apiError(w, http.StatusBadRequest, "INVALID_INPUT", why)
			return
		}
		seen[sr.ReferenceID] = true
	}
	out := make([]subResult, n)
	for i, sr := range b.CompositeRequest {
		var body []byte
		if len(sr.Body) > 0 && string(sr.Body) != "null" {
			body = sr.Body
		}
		req := httptest.NewRequestWithContext(r.Context(), strings.ToUpper(sr.Method), b.subURLs[i].String(),
			bytes.NewReader(body))
		req.SetPathValue("version", version)
		rec := httptest.NewRecorder()
		s.serve(rec, req, false, b.subKinds[i], b.subPaths[i])
		res := subResult{HTTPStatusCode: rec.Code, ReferenceID: sr.ReferenceID, HTTPHeaders: map[string]string{},
			Body: json.RawMessage("null")}
		if bs := bytes.TrimSpace(rec.Body.Bytes()); len(bs) > 0 {
			res.Body = bs
		}
		out[i] = res
	}
	reply(w, drop, http.StatusOK, map[string]any{"compositeResponse": out})
}
