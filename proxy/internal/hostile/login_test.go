//go:build hostile

package hostile

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// loginSend sends one admin token check like TestHostileLoginFlood: an
// even i an admin write, an odd i a console login, i < 0 an admin read;
// from local address src when set.
func loginSend(p *proctest.Proxy, src string, i int, token string) (int, string) {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if src != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		tr.DialContext = d.DialContext
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	var req *http.Request
	switch {
	case i < 0:
		req, _ = http.NewRequest(http.MethodGet, p.AdminURL+"/admin/v1/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+token)
	case i%2 == 0:
		req, _ = http.NewRequest(http.MethodPost, p.AdminURL+"/admin/v1/endpoints/shared/enable", nil)
		req.Header.Set("Authorization", "Bearer "+token)
	default:
		form := "nonce=n" + strconv.Itoa(i) + "&token=" + token
		req, _ = http.NewRequest(http.MethodPost, p.AdminURL+"/console/login", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", "callout_console_login=n"+strconv.Itoa(i))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestHostileLoginRotatingPrefixes: 300 wrong tokens from one
// address, each with a prefix of its own (so no prefix is ever counted
// twice), with admin_login_failures 10 in a 4 s window: the source alone
// throttles them (at most 10 × 401 a window), the right token is accepted
// during the throttle, and the audit lines stay a handful. Then 150
// sources (127.0.0.2 …) each with one wrong token of its own prefix: no
// throttle can apply (each source and prefix failed once); their audit
// lines stay within the documented bound (100 first lines and one line
// for the rest).
func TestHostileLoginRotatingPrefixes(t *testing.T) {
	p, admin := tenantProxy(t, "  admin_login_failures: 10\n  admin_login_window: 4s")
	auditBefore := p.Count(`"msg":"audit"`)
	var mu sync.Mutex
	codes := map[int]int{}
	start := time.Now()
	parallel(300, 16, func(i int) {
		code, _ := loginSend(p, "", i, fmt.Sprintf("%08x-wrong-token-value", 0x10000000+i*7919))
		mu.Lock()
		codes[code]++
		mu.Unlock()
	})
	took := time.Since(start)
	during, _ := loginSend(p, "", -1, admin)
	lines := p.Count(`"msg":"audit"`) - auditBefore
	windows := int(took/(4*time.Second)) + 1
	t.Logf("300 wrong tokens of 300 prefixes from one address in %s: %v; right token during %d; %d audit lines",
		took.Round(time.Millisecond), codes, during, lines)
	if codes[http.StatusUnauthorized] > 10*windows || during != 200 || lines > 4*windows {
		t.Errorf("rotating prefixes: %v over %d window(s), right token %d, %d audit lines; want at most %d × 401, "+
			"200, at most %d lines", codes, windows, during, lines, 10*windows, 4*windows)
	}

	time.Sleep(4200 * time.Millisecond) // a new window
	auditBefore = p.Count(`"msg":"audit"`)
	srcCodes := map[int]int{}
	parallel(150, 16, func(i int) {
		code, _ := loginSend(p, "127.0.0."+strconv.Itoa(2+i), 2*i, fmt.Sprintf("%08x-src-token-value", 0x20000000+i*104729))
		mu.Lock()
		srcCodes[code]++
		mu.Unlock()
	})
	srcLines := p.Count(`"msg":"audit"`) - auditBefore
	t.Logf("150 sources, one wrong admin write each (own prefix): %v; %d audit lines", srcCodes, srcLines)
	if srcLines > 101 {
		t.Errorf("150 rotating sources wrote %d audit lines, want at most 101", srcLines)
	}
}
