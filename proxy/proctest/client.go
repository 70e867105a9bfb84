package proctest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// NewClient is an HTTP client for the proxies of a test: it follows no
// redirect, so a test sees what the proxy sent, takes no HTTP proxy from
// the environment, asks for no compression and keeps up to maxIdle idle
// connections a host (0: net/http's default). A client made for one test
// has it close its idle connections when it ends
// (t.Cleanup(c.CloseIdleConnections)).
func NewClient(timeout time.Duration, maxIdle int) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: maxIdle},
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Answer is a response with its whole body read.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Send makes one request with c: method, url, the header fields of hdr and
// body ("" for none). It returns errors instead of failing a test, so it
// may run on any goroutine; when the body cannot be read to its end, the
// answer has what was read.
func Send(c *http.Client, method, url string, hdr http.Header, body string) (Answer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// GetJSON GETs url with c, the Authorization field set to auth (a whole
// value, "Bearer …"), and decodes its answer's JSON body into v. It fails
// the test unless the answer is 200 and decodes.
func GetJSON(t testing.TB, c *http.Client, url, auth string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", auth)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
}
