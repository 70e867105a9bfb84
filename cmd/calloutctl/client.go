package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// client calls the proxy's admin API (contract §9) with a named bearer token.
type client struct {
	// server is the --server URL as given, for messages.
	server string
	base   *url.URL
	token  string
	hc     *http.Client
}

// unreachableError is an admin API that could not be reached at all
// (connection refused, no such host, a dial timeout): it names the server
// and says how to point calloutctl elsewhere.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the admin API at %s: %v\n"+
		"  is the proxy running, and is this its admin_listen? Point calloutctl at it with\n"+
		"  --server URL or %s=URL (%s is accepted too)", e.server, rootCause(e.err), envServer, envServerAlias)
}
func (e *unreachableError) Unwrap() error { return e.err }

// rootCause is the innermost error of a dial failure's chain (e.g.
// "connect: connection refused"), without the *url.Error's method and URL.
func rootCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	return err
}

// wrongListenerError is a --server that is the proxy's callout listener:
// it answered an admin path with its not-admin-listener problem.
type wrongListenerError struct{ server string }

func (e *wrongListenerError) Error() string {
	return fmt.Sprintf("%s is the callout listener, not admin_listen: point --server (or %s) at the "+
		"proxy's admin_listen address (default %s)", e.server, envServer, defaultServer)
}

// apiError is a refusal or failure the admin API answered with.
type apiError struct {
	Status  int
	Problem api.Problem
}

func (e *apiError) Error() string {
	code := strings.TrimPrefix(e.Problem.Type, "urn:callout-proxy:problem:")
	if code == "" {
		code = http.StatusText(e.Status)
	}
	msg := fmt.Sprintf("%d %s: %s", e.Status, code, e.Problem.Detail)
	if e.Problem.CalloutID != "" {
		msg += " (callout " + e.Problem.CalloutID + ")"
	}
	return msg
}

// code is the problem's code, the last segment of its type.
func (e *apiError) code() string {
	return strings.TrimPrefix(e.Problem.Type, "urn:callout-proxy:problem:")
}

// exitCode maps the answer to calloutctl's exit codes.
func (e *apiError) exitCode() int {
	switch {
	case e.Status == http.StatusNotFound:
		return exitNotFound
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden, e.Status == http.StatusConflict,
		e.code() == "endpoint-disabled", e.code() == "backlog-full":
		return exitRefused
	case e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity:
		return exitUsage
	}
	return exitError
}

// call sends one request; body, when not nil, is sent as JSON. The
// answer's body is returned raw (for -o json) and, on a 2xx with out not
// nil, decoded into out. A non-2xx answer is an *apiError.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, int, error) {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err() // interrupted (Ctrl-C): run says so
		}
		var op *net.OpError
		var dns *net.DNSError
		if errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) {
			return nil, 0, &unreachableError{server: c.server, err: err}
		}
		return nil, 0, err // a *url.Error naming the method and URL
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("%s %s: reading the answer: %w", method, u.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(raw, &ae.Problem) != nil || ae.Problem.Detail == "" {
			ae.Problem.Detail = strings.TrimSpace(string(raw))
		}
		if ae.code() == "not-admin-listener" {
			return raw, resp.StatusCode, withCode(exitError, &wrongListenerError{server: c.server})
		}
		return raw, resp.StatusCode, ae
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, resp.StatusCode, fmt.Errorf("%s %s: unexpected answer: %w", method, u.Redacted(), err)
		}
	}
	return raw, resp.StatusCode, nil
}

// pages GETs the list at route with query q from cursor on ("" for the
// first page), appending each page's items to *items: one page, or every
// page when all is set. It returns the next_cursor of the last page read
// ("" when that was the last page).
func pages[T any](ctx context.Context, cl *client, route string, q url.Values, cursor string, all bool, items *[]T) (string, error) {
	for {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []T    `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if _, _, err := cl.call(ctx, "GET", route, q, nil, &page); err != nil {
			return "", err
		}
		*items = append(*items, page.Items...)
		cursor = page.NextCursor
		if !all || cursor == "" {
			return cursor, nil
		}
	}
}
