package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// apiError is a problem the admin API answered: its status and document.
type apiError struct {
	Problem api.Problem
}

func (e *apiError) Error() string {
	return fmt.Sprintf("admin API: %d %s: %s", e.Problem.Status, e.Problem.Title, e.Problem.Detail)
}

// recorder is the in-memory http.ResponseWriter of one in-process API
// request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// call sends one request to the admin API in-process, as the session's
// token (Authorization: Bearer), from the browser request's address (the
// API's audit lines name it): method, path with its query, and body
// encoded as JSON when not nil. A 2xx answer is decoded into out (when not
// nil) and its status returned; any other answer is an *apiError with the
// API's problem document.
func (c *console) call(ctx context.Context, from *http.Request, s *session, method, path string, body, out any) (int, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	// A fresh routing context: the browser request's (the console's mount)
	// would make the API's router route what is left of that path.
	ctx = context.WithValue(ctx, chi.RouteCtxKey, (*chi.Context)(nil))
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return 0, err
	}
	req.RequestURI = path // as a server request has it; the API's guard checks it
	req.RemoteAddr = from.RemoteAddr
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := &recorder{header: http.Header{}}
	c.d.API.ServeHTTP(w, req)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status < 200 || w.status > 299 {
		ae := &apiError{}
		if !strings.HasPrefix(w.header.Get("Content-Type"), "application/problem+json") ||
			json.Unmarshal(w.body.Bytes(), &ae.Problem) != nil {
			ae.Problem = api.Problem{Status: w.status, Title: http.StatusText(w.status),
				Detail: "the admin API answered " + http.StatusText(w.status)}
		}
		if ae.Problem.Status == 0 {
			ae.Problem.Status = w.status
		}
		return w.status, ae
	}
	if out != nil && w.status != http.StatusNoContent {
		if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
			return w.status, fmt.Errorf("admin API %s %s: undecodable answer: %w", method, path, err)
		}
	}
	return w.status, nil
}

// get is call with GET and no body.
func (c *console) get(r *http.Request, s *session, path string, out any) error {
	_, err := c.call(r.Context(), r, s, http.MethodGet, path, nil, out)
	return err
}
