package sfapi

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/policy/clocktest"
	"github.com/calloutproxy/callout-proxy/proxy/auth/authtest"
	"github.com/calloutproxy/callout-proxy/salesforce/sfemu"
	"github.com/golang-jwt/jwt/v5"
)

func TestAssertionClaims(t *testing.T) {
	key := authtest.NewRSAKey(t)
	cr := Credentials{LoginURL: "https://login.salesforce.com/", ClientID: sfemu.ClientID, Username: sfemu.Username, Key: key}
	s, err := cr.Assertion(t0)
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(s, claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil },
		jwt.WithTimeFunc(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Method.Alg() != "RS256" {
		t.Errorf("alg = %s", tok.Method.Alg())
	}
	for _, c := range []struct {
		claim string
		want  any
	}{
		{"iss", sfemu.ClientID}, {"sub", sfemu.Username}, {"aud", "https://login.salesforce.com"},
		{"exp", float64(t0.Add(3 * time.Minute).Unix())},
	} {
		if claims[c.claim] != c.want {
			t.Errorf("%s = %#v, want %#v", c.claim, claims[c.claim], c.want)
		}
	}
}

func TestTokenRefused(t *testing.T) {
	e := newEnv(t)
	e.emu.Inject(sfemu.Fault{Kind: "token", Status: 400, Body: sfemu.InvalidGrant})
	_, err := e.client.UpsertCollection(ctxT(t), object, extField, []Record{{extField: "x"}})
	var se *Error
	if !errors.As(err, &se) || se.Class != AuthFailed || se.Code != "invalid_grant" {
		t.Fatalf("error = %v, want invalid_grant (auth_failed)", err)
	}
	if got := e.emu.Calls("upsert"); got != 0 {
		t.Errorf("%d upserts without a token", got)
	}
	if got := e.authFailed.Load(); got != 1 {
		t.Errorf("auth_failed count = %v", got)
	}
	// A wrong username is refused by the emulator's own check.
	e2 := newEnv(t)
	e2.client.tokens.creds.Username = "someone@else.com"
	_, err = e2.client.UpsertCollection(ctxT(t), object, extField, []Record{{extField: "x"}})
	if ClassOf(err) != AuthFailed || !strings.Contains(err.Error(), "approved") {
		t.Errorf("wrong sub: %v", err)
	}
}

// TestOneTokenForAllGoroutines: concurrent first calls mint one token, and
// after the sessions expire, concurrent calls re-mint once.
func TestOneTokenForAllGoroutines(t *testing.T) {
	e := newEnv(t)
	run := func() {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				_, err := e.client.UpsertCollection(ctxT(t), object, extField,
					[]Record{{extField: fmt.Sprint("id-", i)}})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	run()
	if got := e.emu.Calls("token"); got != 1 {
		t.Errorf("token calls = %d, want 1", got)
	}
	e.emu.ExpireSessions()
	run()
	if got := e.emu.Calls("token"); got != 2 {
		t.Errorf("token calls after expiry = %d, want 2", got)
	}
}

// TestSimpleforceLogsNoBodyOrToken: simpleforce logs through the standard
// logger, and logs whole error bodies; the client's RoundTripper never lets
// it see one, so nothing it logs carries a body or a token.
func TestSimpleforceLogsNoBodyOrToken(t *testing.T) {
	var buf bytes.Buffer
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(&buf)
	t.Cleanup(func() { log.SetOutput(prev); log.SetFlags(flags) })

	e := newEnv(t)
	secret := "4242424242424242"
	body := `[{"message":"bad value ` + secret + `","errorCode":"INVALID_FIELD"}]`
	for _, f := range []sfemu.Fault{
		{Kind: "upsert", Status: 400, Body: body},
		{Kind: "upsert", Status: 400, Body: `[]`}, // simpleforce's ParseSalesforceError panics on this
		{Kind: "upsert", Status: 500, Body: "<html>" + secret + "</html>"},
		{Kind: "upsert", Drop: true},
	} {
		e.emu.Inject(f)
		_, err := e.client.UpsertCollection(ctxT(t), object, extField,
			[]Record{{extField: "x", "Request_Body__c": secret}})
		if err == nil {
			t.Errorf("fault %+v: no error", f)
		}
	}
	if err := e.client.Query(ctxT(t), "SELECT Id FROM Nothing__c", func(Record) error { return nil }); err == nil {
		t.Error("a query of an unknown object succeeded")
	}
	if out := buf.String(); strings.Contains(out, secret) || strings.Contains(out, "token-") {
		t.Errorf("the standard logger got a body or a token:\n%s", out)
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   Class
	}{
		{401, "INVALID_SESSION_ID", InvalidSession}, {401, "", InvalidSession},
		{403, "REQUEST_LIMIT_EXCEEDED", LimitExceeded}, {0, "REQUEST_LIMIT_EXCEEDED", LimitExceeded},
		{0, "UNABLE_TO_LOCK_ROW", Retry}, {400, "UNABLE_TO_LOCK_ROW", Retry}, {500, "UNKNOWN_EXCEPTION", Retry},
		{503, "", Retry}, {0, "DUPLICATE_VALUE", Retry},
		{400, "INVALID_FIELD", Rejected}, {0, "FIELD_CUSTOM_VALIDATION_EXCEPTION", Rejected},
		{403, "INSUFFICIENT_ACCESS", Rejected}, {404, "NOT_FOUND", Rejected},
	} {
		if got := classify(c.status, c.code); got != c.want {
			t.Errorf("classify(%d, %q) = %s, want %s", c.status, c.code, got, c.want)
		}
	}
	if ClassOf(errors.New("network")) != Retry {
		t.Error("a plain error must be Retry")
	}
}

// TestLimitInfoAPIUsage: the api-usage entry of Sforce-Limit-Info, in any
// order and separator, is what the client's usage reads; no well-formed
// entry reads as no limit.
func TestLimitInfoAPIUsage(t *testing.T) {
	for _, c := range []struct {
		in          string
		used, limit int64
		ok          bool
	}{
		{"api-usage=18/5000", 18, 5000, true},
		{"api-usage=25/5000, per-app-api-usage=17/250(appName=sample)", 25, 5000, true},
		{"per-app-api-usage=17/250(appName=x), api-usage=3/100", 3, 100, true},
		{"api-usage=18", 0, 0, false}, {"api-usage=a/b", 0, 0, false}, {"api-usage=1/0", 0, 0, false}, {"", 0, 0, false},
	} {
		info, _ := ParseLimitInfoHeader(c.in)
		u, l, ok := info.APIUsage.Used, info.APIUsage.Limit, info.APIUsage.Limit != 0
		if u != c.used || l != c.limit || ok != c.ok {
			t.Errorf("ParseLimitInfoHeader(%q).APIUsage = %d %d %v", c.in, u, l, ok)
		}
	}
}

func TestQuoteSOQL(t *testing.T) {
	if got := QuoteSOQL(`it's a \ "x"` + "\n"); got != `'it\'s a \\ \"x\"\n'` {
		t.Errorf("QuoteSOQL = %s", got)
	}
}

func TestQueryPages(t *testing.T) {
	key := authtest.NewRSAKey(t)
	clk := clocktest.New(t0)
	emu := sfemu.New(t, sfemu.Options{PublicKey: &key.PublicKey, ClientID: sfemu.ClientID, Username: sfemu.Username,
		PageSize: 2, Now: clk.Now})
	c, err := NewClient(Options{Credentials: Credentials{LoginURL: emu.URL, ClientID: sfemu.ClientID, Username: sfemu.Username, Key: key},
		Transport: emu.Client().Transport, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for i := range 5 {
		recs = append(recs, Record{extField: fmt.Sprint("c", i), "Status__c": policy.RecordDiscarded})
	}
	recs = append(recs, Record{extField: "other", "Status__c": policy.RecordNew})
	if _, err := c.UpsertCollection(ctxT(t), object, extField, recs); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = c.Query(ctxT(t), "SELECT Callout_Id__c FROM Failed_Callout__c WHERE Status__c = 'Discarded' ORDER BY Callout_Id__c DESC",
		func(r Record) error {
			got = append(got, r[extField].(string))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "c4,c3,c2,c1,c0" {
		t.Errorf("got %v", got)
	}
	if q := emu.Calls("query"); q != 3 {
		t.Errorf("%d query calls, want 3 pages", q)
	}
	stop := errors.New("stop here")
	if err := c.Query(ctxT(t), "SELECT Callout_Id__c FROM Failed_Callout__c", func(Record) error { return stop }); err != stop {
		t.Errorf("each's error = %v", err)
	}
}
