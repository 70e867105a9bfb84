// Package sfemu is a Salesforce REST API emulator for tests. It behaves as
// Salesforce documents it; each behaviour cites its page next to the code,
// and where the emulator and the documentation disagree the emulator is
// wrong. It speaks:
//
//   - POST /services/oauth2/token, the OAuth 2.0 JWT bearer flow ("OAuth
//     2.0 JWT Bearer Flow for Server-to-Server Integration"): the
//     assertion is verified (RS256 against the connected app's
//     certificate, iss, sub, exp at most 3 minutes ahead, aud
//     https://login.salesforce.com — or test.salesforce.com, or a site URL:
//     Options.Audiences — never the URL it is posted to); a refusal is 400
//     {"error":"invalid_grant","error_description":…} ("OAuth 2.0
//     Authorization Errors"); more than Options.LoginsPerHour logins an
//     hour are refused as Login Rate Exceeded (Salesforce Help "Sign In
//     Error 'Login Rate Exceeded'": 3,600 per user);
//   - POST …/composite ("Send Multiple Requests Using Composite"): up to 25
//     subrequests, up to 5 of them sObject Collections or queries, one API
//     call, a compositeResponse of each subrequest's status and body;
//   - PATCH …/composite/sobjects/{object}/{extField} ("Upsert Records Using
//     sObject Collections": up to 200 records, per-record results whose
//     errors carry statusCode) and POST …/composite/sobjects (create;
//     publishes platform events, objects ending in __e: success true with
//     OPERATION_ENQUEUED in errors, "Publish Event Messages with Salesforce
//     APIs"); an unknown object or a field the user cannot see refuses the
//     whole collection with 400 INVALID_TYPE / INVALID_FIELD ("Status Codes
//     and Error Responses"); a new record takes its fields' default values
//     (Options.Defaults: a picklist's default);
//   - PATCH …/sobjects/{object}/{extField}/{id} (single upsert: 201
//     created, 204 updated) and POST …/sobjects/{object};
//   - GET …/query?q=SOQL with paging through nextRecordsUrl, for the SOQL
//     subset the proxy writes (see query);
//   - POST …/actions/standard/customNotificationAction ("Invoking
//     Actions"): one result per input, 400 when any input failed, the
//     successful ones kept (partial save);
//   - errors as [{"message","errorCode","fields"}], 401 INVALID_SESSION_ID
//     for an unknown token; Sforce-Limit-Info on every data answer in the
//     documented form ("Limit Info Header": api-usage=N/M; api-bursts=…;
//     per-app-api-usage=N/M(appName=…), entries separated by "; ");
//   - fault injection (Inject): any status and body — 403
//     REQUEST_LIMIT_EXCEEDED for the daily allocation or for concurrent long
//     requests, told apart by the message ("API Request Limits and
//     Allocations") — or committing a request and then dropping the
//     connection unanswered.
//
// It is a test helper: state lives in memory, guarded by one mutex.
package sfemu

import (
	"crypto/rsa"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Record is one stored record or event: field name -> JSON value.
type Record map[string]any

// ClientID and Username are a test connected app's consumer key and its
// integration user: what tests give Options.ClientID and Options.Username
// and the client they point at the Server.
const (
	ClientID = "3MVG9-test-consumer-key"
	Username = "integration@example.com"
)

// Options configure a Server.
type Options struct {
	// PublicKey verifies JWT bearer assertions (the certificate uploaded to
	// the connected app). Required.
	PublicKey *rsa.PublicKey
	// ClientID and Username are the accepted `iss` and `sub`.
	ClientID, Username string
	// Audiences are the accepted `aud` values. Default
	// [https://login.salesforce.com] (a production org); a sandbox accepts
	// https://test.salesforce.com, an Experience Cloud site its URL.
	Audiences []string
	// Objects declares the custom objects and events records may be written
	// to, each field with its most characters (0: any). A write of an
	// undeclared field fails with INVALID_FIELD, a longer string with
	// STRING_TOO_LONG. Nil: any object and field is accepted.
	Objects map[string]map[string]int
	// LoginsPerHour is how many token requests of the user an hour are
	// answered; more are refused as Login Rate Exceeded. Default 3600.
	LoginsPerHour int
	// Defaults are the default values of fields by object, set on a record
	// created without them (a picklist's default value), e.g.
	// Failed_Callout__c: {Status__c: New}.
	Defaults map[string]Record
	// DailyLimit is the M of Sforce-Limit-Info api-usage=N/M. Default 15000.
	DailyLimit int64
	// AppName and AppLimit, when both set, add the connected app's quota
	// to Sforce-Limit-Info: per-app-api-usage=N/AppLimit(appName=AppName).
	AppName  string
	AppLimit int64
	// PageSize is the most records of one query page. Default 2000.
	PageSize int
	// Now is the clock of SystemModstamp and assertion checks. Default
	// time.Now.
	Now func() time.Time
}

// Server is a running emulator, served over TLS. Use Client (or
// Client().Transport) to reach it.
type Server struct {
	*httptest.Server
	o Options

	mu        sync.Mutex
	tokens    map[string]bool
	logins    []time.Time // token requests in the last hour that passed the assertion check
	tokenSeq  int
	idSeq     int
	eventSeq  int
	records   map[string][]Record // object -> records (each with Id, SystemModstamp)
	events    map[string][]Record // event -> published events
	notes     []Record            // custom notifications sent
	used      int64               // api-usage N: apiCalls plus SetUsage's offset
	apiCalls  int64               // data requests received (each one API call)
	largest   int64               // the largest data request body (bytes)
	faults    []*Fault
	recFaults []*RecordFault
	calls     map[string]int
	cursors   map[string][]Record
	cursorSeq int
	queries   []string // the SOQL of every query run (Queries)
	pubsub    *PubSub  // the Pub/Sub API server (StartPubSub), nil until started
	readOnly  bool     // SetReadOnly
}

// New starts an emulator; it is closed when the test ends. The org has the
// custom notification type Callout_Proxy_Alert.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.PublicKey == nil {
		t.Fatal("sfemu: Options.PublicKey is required")
	}
	if len(o.Audiences) == 0 {
		o.Audiences = []string{"https://login.salesforce.com"}
	}
	if o.LoginsPerHour <= 0 {
		o.LoginsPerHour = 3600
	}
	if o.DailyLimit <= 0 {
		o.DailyLimit = 15000
	}
	if o.PageSize <= 0 {
		o.PageSize = 2000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, tokens: map[string]bool{}, records: map[string][]Record{},
		events: map[string][]Record{}, calls: map[string]int{}, cursors: map[string][]Record{}}
	s.records["CustomNotificationType"] = []Record{{
		"Id": "0MLEMU000000001AAA", "DeveloperName": "Callout_Proxy_Alert", "MasterLabel": "Callout Proxy Alert",
	}}
	s.Server = httptest.NewUnstartedServer(s.routes())
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // dropped connections are on purpose
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// routes is the emulator's handler.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /services/oauth2/token", s.token)
	mux.HandleFunc("/services/data/{version}/{rest...}", s.data)
	return mux
}

// Calls returns how many requests of a kind reached the emulator: "token",
// "upsert" (collection), "upsert1" (single), "create" (collection),
// "create1" (single), "query", "action", "unknown". Requests answered by a
// fault count too.
func (s *Server) Calls(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[kind]
}

// Records returns copies of object's records.
func (s *Server) Records(object string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.records[object])
}

// Record returns a copy of the record of object whose field equals value.
func (s *Server) Record(object, field, value string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records[object] {
		if r[field] == value {
			return maps.Clone(r), true
		}
	}
	return nil, false
}

// Events returns copies of the published events of event.
func (s *Server) Events(event string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.events[event])
}

// Notifications returns copies of the custom notifications sent (the
// action's inputs).
func (s *Server) Notifications() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneAll(s.notes)
}

// Set sets a field of the record of object whose extField is extID, as an
// admin editing it would (SystemModstamp moves). It fails the test when
// there is no such record.
func (s *Server) Set(t testing.TB, object, extField, extID, field string, value any) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records[object] {
		if r[extField] == extID {
			r[field] = value
			r["SystemModstamp"] = s.stamp()
			s.changeLocked(object, r, Record{field: value}, false)
			return
		}
	}
	t.Fatalf("sfemu: no %s with %s = %s", object, extField, extID)
}

// APICalls returns how many API calls the emulator received: every
// request under /services/data/, a Composite request counting once
// ("Send Multiple Requests Using Composite": the entire series counts as a
// single call toward your API limits). Token requests are not API calls.
func (s *Server) APICalls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiCalls
}

// HideField makes a field of object unknown to the integration user, as
// when it is not deployed or its field-level security is missing: writes
// of it are refused (INVALID_FIELD). ShowField undoes it with the field's
// most characters (0: any).
func (s *Server) HideField(object, field string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.o.Objects[object], field)
}

// ShowField declares a field of object, with its most characters (0: any).
func (s *Server) ShowField(object, field string, length int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.o.Objects[object] == nil {
		s.o.Objects[object] = map[string]int{}
	}
	s.o.Objects[object][field] = length
}

// LargestRequest returns the size of the largest request body received
// under /services/data/ (bytes).
func (s *Server) LargestRequest() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.largest
}

// SetUsage sets the api usage N reported in Sforce-Limit-Info.
func (s *Server) SetUsage(used int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used = used
}

// ExpireSessions invalidates every access token minted so far (a session
// timeout, or an admin revoking them).
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// stamp is now as a Salesforce dateTime.
func (s *Server) stamp() string {
	return s.o.Now().UTC().Format("2006-01-02T15:04:05.000Z")
}

// newID returns a fresh 18-character record id with the key prefix.
func (s *Server) newID(prefix string) string {
	s.idSeq++
	return fmt.Sprintf("%s%012dAAA", prefix, s.idSeq)
}

func cloneAll(rs []Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = maps.Clone(r)
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
