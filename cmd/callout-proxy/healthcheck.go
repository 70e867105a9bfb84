package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// defaultHealthURL is /healthz of a default configuration's listener.
const defaultHealthURL = "http://127.0.0.1:8080/healthz"

// runHealthcheck is `callout-proxy healthcheck [--config FILE] [--url URL]
// [--timeout D]`: one GET of a running proxy's /healthz, for the container
// image's health check (distroless has no shell, curl or wget: the binary
// checks itself). With --config it asks the configured listen address on
// loopback (0.0.0.0 and :: mean this host), over https when tls_cert_file
// is set — the certificate is not verified then: the check names the
// host's own loopback address, not the certificate's name, and sends no
// secret. It prints the status and build and returns nil on a 200 with
// status ok from a callout-proxy (its body names a version) — and, with
// --config, only when that proxy runs this very file: /healthz's config
// fingerprint (config.Fingerprint, the one in force, reloads included)
// must equal FILE's, so another program or another proxy holding the port
// fails the check (docs/operating.md, "Health checks"). --url names the
// URL instead (its /healthz when its path is empty or "/"; its certificate
// verified), still compared with FILE's fingerprint when --config is given
// too. An error (exit 1) otherwise; a bad flag, file or URL is a usage
// error (exit 2).
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("callout-proxy healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the proxy's configuration: check its listen address")
	target := fs.String("url", "", "the /healthz URL to check, a URL without a path meaning its /healthz "+
		"(default "+defaultHealthURL+"); with --config, that configuration's proxy must answer")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return usageError{err}
	}
	u, insecure, want := *target, false, ""
	if *path != "" {
		cfg, err := config.Load(*path, getenv)
		if err != nil {
			return usageError{err}
		}
		want = cfg.Fingerprint
		if u == "" {
			if u, err = healthURL(cfg); err != nil {
				return usageError{err}
			}
			insecure = cfg.TLSCertFile != ""
		}
	}
	switch {
	case u == "":
		u = defaultHealthURL
	case *target != "":
		var err error
		if u, err = healthzOf(u); err != nil {
			return usageError{err}
		}
	}
	tr := &http.Transport{Proxy: nil}
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // loopback, no secret sent
	}
	hc := &http.Client{Timeout: *timeout, Transport: tr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return usageError{fmt.Errorf("healthcheck: %w", err)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", u, err)
	}
	defer resp.Body.Close()
	var h proxy.Healthz
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" || h.Version == "" {
		return fmt.Errorf("healthcheck %s: %s %.200s (not a healthy callout-proxy)", u, resp.Status, body)
	}
	if want != "" && h.Config != want {
		return fmt.Errorf("healthcheck %s: a callout-proxy answers, but with configuration fingerprint %q, not "+
			"%s's %q: another proxy holds this port, or the file changed since this one loaded it "+
			"(reload it: SIGHUP or POST /admin/v1/reload)", u, h.Config, *path, want)
	}
	if want != "" {
		fmt.Fprintf(stdout, "ok: %s answers, callout-proxy %s, configuration %s\n", u, h.BuildInfo, h.Config)
		return nil
	}
	fmt.Fprintf(stdout, "ok: %s answers, callout-proxy %s\n", u, h.BuildInfo)
	return nil
}

// healthzOf is raw, or its /healthz when its path is empty or "/" (a
// listener's address, as an operator types it). Errors: raw is not an
// http(s) URL with a host.
func healthzOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("healthcheck: --url %q is not an http(s) URL", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path, u.RawPath = "/healthz", ""
	}
	return u.String(), nil
}

// healthURL is the /healthz URL of cfg's callout listener on this host.
func healthURL(cfg *config.Config) (string, error) {
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "", fmt.Errorf("listen %q: %w", cfg.Listen, err)
	}
	if port == "0" {
		return "", fmt.Errorf("listen %q has port 0: pass --url", cfg.Listen)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/healthz", nil
}
