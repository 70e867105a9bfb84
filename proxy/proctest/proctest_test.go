package proctest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// TestLogBufferAudits: only JSON lines with msg "audit" are audits; HasAudit
// matches every key of want.
func TestLogBufferAudits(t *testing.T) {
	var b LogBuffer
	_, _ = b.Write([]byte(`{"msg":"audit","action":"replay","token":"ops"}` + "\n"))
	_, _ = b.Write([]byte("not json\n" + `{"msg":"started"}` + "\n"))
	_, _ = b.Write([]byte(`{"msg":"audit","action":"pause","token":"viewer"}` + "\n"))
	if got := len(b.Audits()); got != 2 {
		t.Fatalf("%d audits, want 2: %q", got, b.String())
	}
	if !b.HasAudit(map[string]string{"action": "pause", "token": "viewer"}) {
		t.Error("the pause audit by viewer is not found")
	}
	if b.HasAudit(map[string]string{"action": "pause", "token": "ops"}) {
		t.Error("an audit no line has was found")
	}
	b.WaitFor(t, `"msg":"started"`, time.Second)
	if got := len(b.Records("started")); got != 1 {
		t.Errorf("%d started records, want 1", got)
	}
}

// TestFreePort: the port returned can be listened on.
func TestFreePort(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d: %v", p, err)
	}
	_ = l.Close()
}

// TestClosedPort: a connect to the port returned is refused while the
// test runs, and nothing can listen on it meanwhile.
func TestClosedPort(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(ClosedPort(t))
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("connected to %s", addr)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		_ = l.Close()
		t.Fatalf("listened on %s, which ClosedPort holds", addr)
	}
}

// TestWantProblem: a proxy-made error passes; an upstream's JSON answer
// fails (caught by a recording TB, not the test).
func TestWantProblem(t *testing.T) {
	h := http.Header{"Callout-Outcome": {"rejected"}, "Content-Type": {"application/problem+json"}}
	body := []byte(`{"type":"urn:callout-proxy:problem:not-found","title":"Not Found","status":404,` +
		`"detail":"no such callout","outcome":"rejected"}`)
	if pb := WantProblem(t, 404, h, body, 404, problem.NotFound, policy.Rejected); pb.Detail != "no such callout" {
		t.Errorf("decoded %+v", pb)
	}
	rec := &failures{TB: t}
	WantProblem(rec, 200, http.Header{"Content-Type": {"application/json"}}, []byte(`{}`), 404, problem.NotFound,
		policy.Rejected)
	if rec.n == 0 {
		t.Error("an upstream's 200 passed as a problem")
	}
}

// TestSend: Send sends the header fields it is given and an empty body as
// none, and NewClient's client answers a redirect with the redirect
// itself.
func TestSend(t *testing.T) {
	u := NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/elsewhere")
		w.WriteHeader(http.StatusFound)
		_, _ = io.WriteString(w, "moved")
	})
	c := NewClient(10*time.Second, 1)
	t.Cleanup(c.CloseIdleConnections)
	a, err := Send(c, http.MethodGet, u.URL+"/here", http.Header{"X-Test": {"a", "b"}}, "")
	if err != nil || a.Status != http.StatusFound || a.Header.Get("Location") != "/elsewhere" || string(a.Body) != "moved" {
		t.Fatalf("answer %+v, %v; want the 302 itself", a, err)
	}
	if n := u.Hits(); n != 1 {
		t.Fatalf("upstream called %d times, want once (the redirect not followed)", n)
	}
	rec := u.Request(t, "/here")
	if got := rec.Header.Values("X-Test"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("X-Test sent as %q, want a, b", got)
	}
	if len(rec.Body) != 0 {
		t.Errorf("body %q sent, want none", rec.Body)
	}
}

// failures counts Errorf calls instead of failing the test.
type failures struct {
	testing.TB
	n int
}

func (f *failures) Errorf(string, ...any) { f.n++ }

// TestUpstreamRecords: every request is recorded with its numbers (at the
// upstream and per path), body and Idempotency-Key before its handler
// runs; the handler reads the body again; a held handler returns on
// Release; a nil handler answers 200 {"ok":true}.
func TestUpstreamRecords(t *testing.T) {
	var bodies []string
	u := NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if rec := Received(r); rec.Path == "/held" {
			Hold(r)
		}
		fmt.Fprintf(w, "%d/%d", Received(r).N, Received(r).PathN)
	})
	post := func(path, key, body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u.URL+path, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := post("/a?x=1", "k1", "one"); got != "1/1" {
		t.Errorf("first answer %q, want 1/1", got)
	}
	if got := post("/a?x=2", "k1", "two"); got != "2/2" {
		t.Errorf("second answer %q, want 2/2", got)
	}
	if got := post("/b", "k2", "three"); got != "3/1" {
		t.Errorf("third answer %q, want 3/1", got)
	}
	done := make(chan string)
	go func() { done <- post("/held", "k3", "") }()
	if r := u.WaitRequest(t, 5*time.Second); r.Path != "/a" {
		t.Errorf("first arrival %+v", r)
	}
	for range 3 {
		u.WaitRequest(t, 5*time.Second)
	}
	select {
	case got := <-done:
		t.Fatalf("the held request was answered (%q) before Release", got)
	default:
	}
	u.Release()
	if got := <-done; got != "4/1" {
		t.Errorf("held answer %q, want 4/1", got)
	}
	if u.Hits() != 4 || u.HitsFor("/a?x=2") != 1 || u.PathHits("/a") != 2 || u.Attempts("k1") != 2 {
		t.Errorf("hits %d, /a?x=2 %d, /a %d, k1 %d; want 4, 1, 2, 2", u.Hits(), u.HitsFor("/a?x=2"),
			u.PathHits("/a"), u.Attempts("k1"))
	}
	if r := u.Request(t, "/b"); string(r.Body) != "three" || r.Method != http.MethodPost || r.End.Before(r.Start) {
		t.Errorf("request for /b: %+v", r)
	}
	if strings.Join(bodies, ",") != "one,two,three," {
		t.Errorf("the handler read %q", bodies)
	}
	u.CheckNoOverlap(t)
	if u.InFlight.Peak() != 1 || u.InFlight.Running() != 0 {
		t.Errorf("peak %d running %d, want 1 and 0", u.InFlight.Peak(), u.InFlight.Running())
	}
	def := NewUpstream(t, nil)
	resp, err := http.Get(def.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != `{"ok":true}` {
		t.Errorf("nil handler answered %d %s", resp.StatusCode, b)
	}
}

// TestConfigParses: what Config renders is a configuration the proxy
// loads, with each part where it was put.
func TestConfigParses(t *testing.T) {
	yaml := Config{RedisURL: "redis://127.0.0.1:6379/0", Issuers: []string{"https://a.my.salesforce.com"},
		Policy:    []string{"max_attempts: 3"},
		Endpoints: []string{Endpoint("pay", "http://127.0.0.1:9", Loopback, "breaker_failures: 2")}}.YAML()
	cfg, err := config.Parse([]byte(yaml), func(string) string { return "a-secret-of-at-least-32-bytes-long!!" })
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	ep, ok := cfg.Endpoint("pay")
	if !ok || cfg.Redis.URL != "redis://127.0.0.1:6379/0" || cfg.Policy.MaxAttempts != 3 || ep.BreakerFailures != 2 ||
		len(ep.AllowedNetworks) != 1 {
		t.Errorf("parsed %+v, endpoint %+v from:\n%s", cfg, ep, yaml)
	}
}
