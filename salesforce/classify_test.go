package salesforce

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/salesforce/sfapi"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
)

// TestWholeCallAnswersClassified (docs/salesforce.md "What the writer does
// about each answer"; the refusals with Salesforce's own JSON error list:
// sfapi.TestErrorBodiesClassified): a redirect to a login page and an HTML 403 are a
// session or maintenance condition, not a rejection — the batch waits on
// the outage backoff (seconds, not an hour), one log line however many
// calls meet it, each call counted as maintenance — and the writes land
// once the page is gone.
func TestWholeCallAnswersClassified(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault sfemu.Fault
	}{
		{"302 to the login page", sfemu.Fault{Kind: "composite", Status: http.StatusFound, HTML: true,
			Body: sfemu.LoginPage, Location: "https://login.salesforce.com/?ec=302"}},
		{"HTML 403", sfemu.Fault{Kind: "composite", Status: http.StatusForbidden, HTML: true, Body: sfemu.LoginPage}},
		{"empty 403", sfemu.Fault{Kind: "composite", Status: http.StatusForbidden}},
		{"plain-text 403", sfemu.Fault{Kind: "composite", Status: http.StatusForbidden, Body: "Forbidden"}},
		{"407 from an egress proxy", sfemu.Fault{Kind: "composite", Status: http.StatusProxyAuthRequired,
			Body: "Proxy Authentication Required"}},
		{"empty 404", sfemu.Fault{Kind: "composite", Status: http.StatusNotFound}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ids := e.quietDeadLetters(3)
			c.fault.Times = 3
			e.emu.Inject(c.fault)
			for range 3 {
				e.clk.Advance(e.roundWaitsOutage(t, ids[0], "after the page the batch"))
			}
			if got := testutil.ToFloat64(e.metrics.Requests.WithLabelValues(string(sfapi.Maintenance))); got != 3 {
				t.Errorf("requests{result=maintenance} = %v, want 3", got)
			}
			if n := strings.Count(e.logs.String(), "Salesforce call failed"); n != 1 {
				t.Errorf("%d log lines for three calls meeting the page, want 1", n)
			}
			e.drain()
			for _, id := range ids {
				e.record(id)
			}
			if !strings.Contains(e.logs.String(), "Salesforce calls succeed again") {
				t.Error("no log line when the calls succeeded again")
			}
		})
	}
}

// roundWaitsOutage runs a writer round and fails t unless the mirror
// entry of dead letter id then waits the outage backoff (longer than 0, at
// most MaxBackoff), naming what waits; it returns that wait.
func (e *env) roundWaitsOutage(t *testing.T, id, what string) time.Duration {
	t.Helper()
	e.round(t)
	wait := e.entry(policy.EntryName(policy.EntryMirror, id)).Due.Sub(e.clk.Now())
	if wait <= 0 || wait > MaxBackoff {
		t.Fatalf("%s waits %v, want the outage backoff (at most %v)", what, wait, MaxBackoff)
	}
	return wait
}

// TestReadOnlyMaintenanceRetriesSoon: in read-only mode every record is
// refused with INSERT_UPDATE_DELETE_NOT_ALLOWED_DURING_MAINTENANCE
// (Salesforce Help "Read-Only Mode"); the entries wait on the outage
// backoff, not RejectedRetry, are counted in write_errors by that code and
// logged once, and are written when the maintenance ends.
func TestReadOnlyMaintenanceRetriesSoon(t *testing.T) {
	e := newEnv(t)
	ids := e.quietDeadLetters(3)
	e.emu.SetReadOnly(true)
	for range 2 {
		e.roundWaitsOutage(t, ids[0], "in read-only mode a record")
		e.clk.Advance(MaxBackoff)
	}
	if got := testutil.ToFloat64(e.metrics.WriteErrors.WithLabelValues(sfapi.ReadOnlyCode)); got < 3 {
		t.Errorf("write_errors{code=%s} = %v, want every refused record", sfapi.ReadOnlyCode, got)
	}
	if n := strings.Count(e.logs.String(), "read-only maintenance: its records are refused"); n != 1 {
		t.Errorf("%d log lines for the read-only window, want 1", n)
	}
	e.emu.SetReadOnly(false)
	e.clk.Advance(time.Hour)
	e.drain()
	for _, id := range ids {
		e.record(id)
	}
}

// TestRevokedTokenRecoversWithinOnePoll: while Salesforce refuses every
// token (a revoked connected app: invalid_grant) for minutes, the writes
// wait briefly each time (the token layer's own backoff, at most
// MintBackoffMax, spares Salesforce) instead of on a backoff that kept
// growing; once the app is fixed, the next mint works and the next round
// writes everything.
func TestRevokedTokenRecoversWithinOnePoll(t *testing.T) {
	e := newEnv(t)
	ids := e.refusedTokens(t, func() {
		defs, err := e.outbox.Deferrals(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if wait := defs[""].Until.Sub(e.clk.Now()); wait > BaseBackoff {
			t.Fatalf("after %d refused tokens the writes wait %v, want at most %v", defs[""].Fails, wait, BaseBackoff)
		}
	})
	e.clk.Advance(sfapi.MintBackoffMax)
	e.round(t)
	for _, id := range ids {
		e.record(id)
	}
	if got := testutil.ToFloat64(e.metrics.Requests.WithLabelValues(string(sfapi.AuthFailed))); got < 5 {
		t.Errorf("requests{result=auth_failed} = %v, want each refused mint counted", got)
	}
}

// TestGoodTokenResetsBackoff: refused mints are not counted in the writes'
// backoff, so after four minutes of invalid_grant and the fix, a first call
// that meets one 503 waits the first step of the outage backoff (at most
// BaseBackoff), not one grown by the refusals; the next round writes
// everything.
func TestGoodTokenResetsBackoff(t *testing.T) {
	e := newEnv(t)
	ids := e.refusedTokens(t, func() {})
	e.emu.Inject(sfemu.Fault{Kind: "composite", Status: http.StatusServiceUnavailable, Body: sfemu.ServerError})
	e.clk.Advance(sfapi.MintBackoffMax)
	e.round(t)
	defs, err := e.outbox.Deferrals(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := defs[""]; d.Fails != 1 || d.Until.Sub(e.clk.Now()) > BaseBackoff {
		t.Fatalf("after the fix and one 503: %d failures counted, writes wait %v; want 1 and at most %v",
			d.Fails, d.Until.Sub(e.clk.Now()), BaseBackoff)
	}
	e.clk.Advance(BaseBackoff)
	e.round(t)
	for _, id := range ids {
		e.record(id)
	}
}

// refusedTokens makes three quiet dead letters and, for four minutes of
// the env's clock, has Salesforce refuse every token (invalid_grant: a
// revoked connected app) while the writer runs a round every BaseBackoff,
// calling each after every round; then the app is fixed (no more faults).
// It returns the dead letters' ids.
func (e *env) refusedTokens(t *testing.T, each func()) []string {
	t.Helper()
	ids := e.quietDeadLetters(3)
	e.emu.ExpireSessions()
	e.emu.Inject(sfemu.Fault{Kind: "token", Status: http.StatusBadRequest, Body: sfemu.InvalidGrant, Times: 1 << 30})
	for end := e.clk.Now().Add(4 * time.Minute); e.clk.Now().Before(end); {
		e.round(t)
		each()
		e.clk.Advance(BaseBackoff)
	}
	e.emu.ClearFaults()
	return ids
}
