package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/app"
	"github.com/calloutproxy/callout-proxy/proxy/auth"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Names of the dev configuration's generated secrets. They exist only in
// the dev command's own lookup (devEnv), never in the process environment.
const (
	devJWTSecretEnv  = "CALLOUT_DEV_JWT_SECRET"
	devAdminTokenEnv = "CALLOUT_DEV_ADMIN_TOKEN"
	devIssuer        = "https://dev.my.salesforce.com"
	devAudience      = "callout-proxy"
	// devTokenLifetime is the printed caller token's lifetime, and the dev
	// configuration's auth.max_token_lifetime.
	devTokenLifetime = 12 * time.Hour
	// devFirstKey is the Idempotency-Key of the printed first curl: the
	// store is new at each start, so the first send is a first attempt and
	// a second send gets the recorded answer (contract §5).
	devFirstKey = "first-callout-1"
)

// devFlaky is how many requests the flaky demo upstream fails (503) for
// each Idempotency-Key (each path when there is none) before it answers
// 200: enough for the proxy to retry and recover.
const devFlaky = 2

// devBaseDelay is the dev configuration's policy.base_delay: a flaky
// callout's retries come within a second or two instead of the default's
// 5 s, 10 s, ... (contract §3's full jitter under the same ceiling
// formula).
const devBaseDelay = 500 * time.Millisecond

// devSlowDefault is how long the slow demo upstream waits before it
// answers; ?delay=D (a Go duration, at most 60 s) changes it.
const devSlowDefault = 3 * time.Second

// runDev is `callout-proxy dev [--listen ADDR] [--admin-listen ADDR]`:
// the proxy on the embedded store with secrets generated in memory, three
// demo upstreams on loopback registered as endpoints (echo, flaky, slow),
// the admin listener and the console on. Once it listens it prints the
// admin token, a caller token and a first curl (a synchronous write with
// an Idempotency-Key), the console's URL and the CALLOUTCTL_* exports,
// then serves until ctx ends. A port already taken is a usageError naming
// the flag that changes it.
func runDev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("callout-proxy dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "the callout listener's address")
	adminListen := fs.String("admin-listen", "127.0.0.1:8081", "the admin listener's address (admin API, console, /metrics)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("dev: unexpected argument %q (flags: --listen, --admin-listen)", fs.Arg(0))}
	}
	ups, err := startDemoUpstreams()
	if err != nil {
		return err
	}
	defer ups.close()
	secrets := map[string]string{devJWTSecretEnv: randomHex(32), devAdminTokenEnv: randomHex(24)}
	env := func(k string) string {
		if v, ok := secrets[k]; ok {
			return v
		}
		return getenv(k)
	}
	cfg, err := config.Parse([]byte(demoConfig(*listen, *adminListen, ups)), env)
	if err != nil {
		return fmt.Errorf("dev: the built-in configuration: %w", err) // a defect of this file
	}
	err = runApp(ctx, app.Options{Config: cfg, Getenv: env, Logs: stderr}, func(a *app.App) error {
		tok, err := auth.MintHS256([]byte(secrets[devJWTSecretEnv]), devIssuer, devAudience, "dev-user",
			devTokenLifetime, time.Now())
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, devBanner(a, tok, secrets[devAdminTokenEnv], ups))
		return err
	})
	var ce app.ConfigError
	if errors.As(err, &ce) && strings.Contains(err.Error(), "listen ") {
		return usageError{fmt.Errorf("dev: %w\n  choose free ports with --listen ADDR and --admin-listen ADDR "+
			"(defaults 127.0.0.1:8080 and 127.0.0.1:8081)", err)}
	}
	return err
}

// demoConfig is the dev configuration: the embedded store (no redis
// section), HS256 callers of devIssuer, one write-scope admin token, the
// three demo upstreams as endpoints, each allowed to reach loopback (a
// private address is blocked unless an endpoint lists it,
// docs/configuration.md), a short retry backoff (devBaseDelay) and text
// logs.
func demoConfig(listen, adminListen string, ups *demoUpstreams) string {
	ep := func(name, url string) string {
		return "  " + name + ":\n    url: " + url + "\n    allowed_networks: [127.0.0.0/8]\n"
	}
	return `listen: ` + listen + `
admin_listen: ` + adminListen + `
log:
  format: text
policy:
  base_delay: ` + devBaseDelay.String() + `
auth:
  issuers: [` + devIssuer + `]
  audience: ` + devAudience + `
  algorithms: [HS256]
  hs256_secret_env: ` + devJWTSecretEnv + `
  max_token_lifetime: ` + devTokenLifetime.String() + `
admin:
  tokens:
    - {name: dev, token_env: ` + devAdminTokenEnv + `, scope: write}
endpoints:
` + ep("echo", ups.echo) + ep("flaky", ups.flaky) + ep("slow", ups.slow)
}

// devBanner is what the dev command prints once it listens.
func devBanner(a *app.App, callerToken, adminToken string, ups *demoUpstreams) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Callout Proxy (dev): embedded in-memory store, nothing is kept after this process exits;\n")
	p("secrets generated for this run only. Stop it with Ctrl-C.\n\n")
	p("  callout listener  %s\n", a.URL())
	p("  admin listener    %s   (admin API, /metrics)\n", a.AdminURL())
	p("  console           %s/console/   (log in with the admin token)\n", a.AdminURL())
	p("  admin token       %s\n", adminToken)
	p("  caller token      %s\n", callerToken)
	p("                    (HS256, issuer %s, valid %s)\n\n", devIssuer, devTokenLifetime)
	p("Endpoints (demo upstreams on loopback):\n")
	p("  echo   %s   answers 200 with what it received\n", ups.echo)
	p("  flaky  %s   answers 503 to the first %d requests of each Idempotency-Key, then 200\n", ups.flaky, devFlaky)
	p("                                   (retries here back off from %s: add -H 'Prefer: respond-async' and watch\n", devBaseDelay)
	p("                                   it recover with calloutctl callouts get ID)\n")
	p("  slow   %s   answers 200 after %s (?delay=500ms to change it)\n\n", ups.slow, devSlowDefault)
	p("A first callout, a synchronous write with an Idempotency-Key (send it twice: the second answer\n")
	p("is the recorded one):\n\n")
	p("  %s\n\n", devCurl(a.URL(), callerToken))
	p("calloutctl, in another shell:\n\n")
	p("  export CALLOUTCTL_SERVER=%s\n", a.AdminURL())
	p("  export CALLOUTCTL_TOKEN=%s\n", adminToken)
	p("  go run ./cmd/calloutctl endpoints list\n\n")
	return b.String()
}

// devCurl is the printed first callout: a POST to the echo endpoint with
// an Idempotency-Key, answered synchronously (no Prefer: respond-async).
func devCurl(base, token string) string {
	return `curl -si -X POST -H 'Authorization: Bearer ` + token + `' -H 'Idempotency-Key: ` + devFirstKey +
		`' -H 'Content-Type: application/json' --data '{"amount":100}' ` + base + `/callout/echo/charges`
}

// demoUpstreams are the dev command's upstreams: in-process HTTP servers
// on loopback ports the system picks.
type demoUpstreams struct {
	echo, flaky, slow string // base URLs
	servers           []*http.Server
}

// startDemoUpstreams starts the three demo upstreams. Errors: a loopback
// port could not be opened.
func startDemoUpstreams() (*demoUpstreams, error) {
	u := &demoUpstreams{}
	var mu sync.Mutex
	seen := map[string]int{}
	handlers := []struct {
		url *string
		h   http.HandlerFunc
	}{
		{&u.echo, echoHandler},
		{&u.flaky, func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			if key == "" {
				key = r.URL.Path
			}
			mu.Lock()
			seen[key]++
			n := seen[key]
			mu.Unlock()
			if n <= devFlaky {
				http.Error(w, `{"error":"flaky: failing request `+strconv.Itoa(n)+` of `+strconv.Itoa(devFlaky)+
					` for this key"}`, http.StatusServiceUnavailable)
				return
			}
			echoHandler(w, r)
		}},
		{&u.slow, func(w http.ResponseWriter, r *http.Request) {
			d := devSlowDefault
			if v, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil && v >= 0 && v <= time.Minute {
				d = v
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				echoHandler(w, r)
			case <-r.Context().Done():
			}
		}},
	}
	for _, h := range handlers {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			u.close()
			return nil, fmt.Errorf("dev: a demo upstream: %w", err)
		}
		srv := &http.Server{Handler: h.h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		u.servers = append(u.servers, srv)
		*h.url = "http://" + l.Addr().String()
	}
	return u, nil
}

// close stops the demo upstreams.
func (u *demoUpstreams) close() {
	for _, s := range u.servers {
		_ = s.Close()
	}
}

// echoHandler answers 200 with a JSON document of the request: method,
// path, query, the Idempotency-Key and the body (as text, up to 64 KiB).
func echoHandler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "path": r.URL.Path,
		"query": r.URL.RawQuery, "idempotency_key": r.Header.Get("Idempotency-Key"), "body": string(body)})
}

// randomHex is n random bytes, hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
