package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/auth"
)

// Secrets of the measurement's throwaway proxy (never used elsewhere).
const (
	jwtSecret  = "sizing-measurement-hs256-secret-0123456789"
	adminToken = "sizing-measurement-admin-token"
	issuer     = "https://sizing.my.salesforce.com"
)

// proxyProcess is a running callout-proxy binary with its listeners.
type proxyProcess struct {
	cmd         *exec.Cmd
	Listen      string
	AdminListen string
	Token       string
}

// configText is the proxy's configuration: the measurement's Redis, HS256
// callers, and one endpoint "up" on the local upstream.
func configText(redisAddr, upstream string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
redis: {url: "redis://%s/0"}
auth:
  issuers: [%s]
  audience: callout-proxy
  algorithms: [HS256]
  hs256_secret_env: SIZING_JWT_SECRET
admin:
  tokens: [{name: sizing, token_env: SIZING_ADMIN_TOKEN, scope: write}]
endpoints:
  up:
    url: %s
    allowed_networks: [127.0.0.0/8]
`, redisAddr, issuer, upstream)
}

// startProxy runs binary with a configuration for redisAddr and upstream
// written under dir, and waits up to 20 s for its "listening" log line.
func startProxy(ctx context.Context, binary, dir, redisAddr, upstream string) (*proxyProcess, error) {
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(configText(redisAddr, upstream)), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "--config", path)
	cmd.Env = append(os.Environ(), "SIZING_JWT_SECRET="+jwtSecret, "SIZING_ADMIN_TOKEN="+adminToken)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &proxyProcess{cmd: cmd}
	listening := make(chan error, 1)
	go p.readLog(stderr, listening)
	select {
	case err = <-listening:
	case <-time.After(20 * time.Second):
		err = errors.New("no \"listening\" log line within 20 s")
	}
	if err != nil {
		p.Stop()
		return nil, err
	}
	tok, err := auth.MintHS256([]byte(jwtSecret), issuer, "callout-proxy", "sizing", 30*time.Minute, time.Now())
	if err != nil {
		p.Stop()
		return nil, err
	}
	p.Token = tok
	return p, nil
}

// readLog reads the proxy's JSON log until the "listening" line, reports
// it (or the end of the log) on ready, then discards the rest.
func (p *proxyProcess) readLog(r io.Reader, ready chan<- error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var line struct {
			Msg         string `json:"msg"`
			Listen      string `json:"listen"`
			AdminListen string `json:"admin_listen"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
			p.Listen, p.AdminListen = line.Listen, line.AdminListen
			ready <- nil
			_, _ = io.Copy(io.Discard, r)
			return
		}
	}
	ready <- errors.New("the proxy exited before listening")
}

// Stop sends SIGKILL and waits: the measurement needs no graceful drain.
func (p *proxyProcess) Stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// Pid is the proxy's process id.
func (p *proxyProcess) Pid() int { return p.cmd.Process.Pid }

// upstream is the measurement's upstream: 200 with a 90-byte JSON body,
// like a payment API's answer to a charge.
func upstream() *httptest.Server {
	body := []byte(`{"id":"ch_3PqX7sLkdIwHu7ix0a1b2c3d","object":"charge","status":"succeeded","amount":1999}`)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}
