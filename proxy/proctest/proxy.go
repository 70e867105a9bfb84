package proctest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proxy is one callout-proxy process of a test.
type Proxy struct {
	*Process
	// URL and AdminURL are the base URLs of its two listeners; Addr the
	// callout listener's host:port.
	URL, AdminURL, Addr string
	// ConfigPath is its configuration file (StartProxy's yaml), for a test
	// that rewrites it and reloads.
	ConfigPath string
}

// ProxyOptions are what differ between the proxies the suites start. The
// zero value starts "callout-proxy" with PATH as its only environment.
type ProxyOptions struct {
	// Name names the process in failure output and its config file
	// (default "callout-proxy").
	Name string
	// Env is the process's environment besides PATH, which it always gets.
	Env map[string]string
	// CleanExit makes the test fail unless the process exits with status 0
	// on the SIGTERM it gets when the test ends (within 30 s).
	CleanExit bool
}

// StartProxy writes yaml to a config file and runs the binary bin on it,
// waiting until it logs its listening addresses ("listening", with listen
// and admin_listen). When the test ends it gets SIGTERM (SIGKILL after
// 30 s), and the test fails if its output shows a panic, a fatal runtime
// error or a data race (a -race binary's report).
func StartProxy(t testing.TB, bin, yaml string, opts ProxyOptions) *Proxy {
	t.Helper()
	name := cmp.Or(opts.Name, "callout-proxy")
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan [2]string, 1)
	onLine := func(line string) {
		var rec struct {
			Msg         string `json:"msg"`
			Listen      string `json:"listen"`
			AdminListen string `json:"admin_listen"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
			select {
			case addrs <- [2]string{rec.Listen, rec.AdminListen}:
			default:
			}
		}
	}
	p := Start(t, name, bin, []string{"--config", path}, EnvList(opts.Env), onLine)
	t.Cleanup(func() { checkStopped(t, p, opts.CleanExit) })
	select {
	case a := <-addrs:
		return &Proxy{Process: p, URL: "http://" + a[0], AdminURL: "http://" + a[1], Addr: a[0], ConfigPath: path}
	case <-p.Exited():
		t.Fatalf("%s exited before listening (%v):\n%s", name, p.ExitErr(), p.Tail(40))
	case <-time.After(StartupTimeout):
		t.Fatalf("%s did not log \"listening\" within %s:\n%s", name, StartupTimeout, p.Tail(40))
	}
	return nil
}

// checkStopped stops p (SIGTERM, SIGKILL after 30 s) unless it has exited
// and fails the test on what StartProxy and CleanExit promise to catch.
func checkStopped(t testing.TB, p *Process, cleanExit bool) {
	select {
	case <-p.Exited():
		cleanExit = false // the test ended it itself (Kill)
	default:
		p.Signal(syscall.SIGTERM, 30*time.Second)
	}
	logs := p.Logs.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if strings.Contains(logs, bad) {
			t.Errorf("%s printed %q:\n%s", p.Name, bad, p.Tail(60))
		}
	}
	if err := p.ExitErr(); cleanExit && err != nil {
		t.Errorf("%s did not exit cleanly on SIGTERM: %v", p.Name, err)
	}
}

// EnvList renders env as sorted KEY=value entries, with PATH: the
// environment StartProxy gives a process, for a test that starts one with
// Start itself (one meant to exit at once).
func EnvList(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// StartReplicas starts n replicas of yaml with StartProxy, named r0, r1, …,
// each with env plus its name as REPLICA (what an endpoint's
// "headers: {X-Replica: {env: REPLICA}}" injects upstream, so an upstream
// can tell which process sent a request), and returns them in order.
func StartReplicas(t testing.TB, bin string, n int, yaml string, env map[string]string) []*Proxy {
	t.Helper()
	out := make([]*Proxy, n)
	for i := range out {
		name := fmt.Sprintf("r%d", i)
		e := maps.Clone(env)
		if e == nil {
			e = map[string]string{}
		}
		e["REPLICA"] = name
		out[i] = StartProxy(t, bin, yaml, ProxyOptions{Name: name, Env: e})
	}
	return out
}

// Metric is the value of one sample of the proxy's GET /metrics on its
// admin listener: an unlabelled one ("name") or one with every label
// (`name{l="v"}`), as the Prometheus text format writes it; -1 when there
// is no such sample.
func (p *Proxy) Metric(t testing.TB, sample string) float64 {
	t.Helper()
	resp, err := http.Get(p.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := Sample(t, string(ReadBody(t, resp)), sample); ok {
		return v
	}
	return -1
}

// Sample is the value of one sample in text, a /metrics answer in the
// Prometheus text format: sample is the whole name ("name" or
// `name{l="v"}`) as written before the value; false when there is none.
func Sample(t testing.TB, text, sample string) (float64, bool) {
	t.Helper()
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}
