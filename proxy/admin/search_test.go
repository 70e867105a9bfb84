package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/metrics"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/stats"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
	"github.com/prometheus/client_golang/prometheus"
)

var _ Stats = (*stats.Recorder)(nil)

// pagedDeadLetters is a DeadLetters listing n dead letters of pay-api in
// pages of the query's limit, the i-th with path /v1/items/{i}; every
// third replayed (the chain pending), every fifth with source record
// 001000000000005AAA.
func pagedDeadLetters(n int) *fakeDeadLetters {
	return &fakeDeadLetters{DeadLettersFn: func(_ context.Context, q replay.Query) (replay.Page, error) {
		from, _ := strconv.Atoi(q.Cursor)
		var p replay.Page
		for i := from; i < min(n, from+q.Limit); i++ {
			d := policy.DeadLetter{ID: "dl-" + strconv.Itoa(i), Endpoint: "pay-api", Path: "/v1/items/" + strconv.Itoa(i),
				IdempotencyKey: "key-" + strconv.Itoa(i), Attempts: i % 7, DeadLetteredAt: time.UnixMilli(int64(i))}
			if i%3 == 0 {
				d.ReplayedBy, d.Resolution = "chain-"+strconv.Itoa(i), policy.ResolutionPending
			}
			if i%5 == 0 {
				d.SourceRecord = "001000000000005AAA"
			}
			p.Items = append(p.Items, d)
		}
		if from+q.Limit < n {
			p.Next = strconv.Itoa(from + q.Limit)
		}
		return p, nil
	}}
}

// searchAs answers GET /admin/v1/search?query as the viewer.
func searchAs(t *testing.T, e *dltEnv, query string) (int, api.SearchDoc, string) {
	t.Helper()
	w := serve(t, e.h, nextSource(&e.sources), http.MethodGet, "/admin/v1/search?"+query, dltRead, "")
	var doc api.SearchDoc
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
	}
	return w.Code, doc, w.Body.String()
}

func TestSearchScansEveryPage(t *testing.T) {
	e := newFakeEnv(t, pagedDeadLetters(2500), nil)
	tests := []struct {
		query       string
		total, next int
		first       string
	}{
		{"", 2500, 50, "dl-0"},
		{"q=key-2499", 1, 0, "dl-2499"},                             // an Idempotency-Key, on the third page read
		{"q=/v1/items/249&limit=5", 11, 5, "dl-249"},                // a path's part: 249, 2490–2499
		{"q=001000000000005AAA&limit=0", 500, 0, ""},                // a source record: the total only
		{"replay=pending&limit=1000", 834, 0, "dl-0"},               // every third
		{"replay=none&sort=-dead_lettered_at", 1666, 50, "dl-2498"}, // 2499 is replayed
		{"sort=-attempts&limit=1", 2500, 1, "dl-993"},               // 6 attempts, ties by id (descending: the last)
		{"q=dl-7", 1, 0, "dl-7"},                                    // an id
		{"q=nothing", 0, 0, ""},
		{"offset=2490&limit=20", 2500, 0, "dl-2490"},
		{"offset=9223372036854775807", 2500, 0, ""}, // past the end, without overflow
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, doc, body := searchAs(t, e, tt.query)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			first := ""
			if len(doc.DeadLetters) > 0 {
				first = doc.DeadLetters[0].ID
			}
			if doc.Total != tt.total || doc.NextOffset != tt.next || first != tt.first || doc.TotalCapped {
				t.Fatalf("total %d, next %d, first %q, capped %v; want %d, %d, %q", doc.Total, doc.NextOffset, first,
					doc.TotalCapped, tt.total, tt.next, tt.first)
			}
		})
	}
}

func TestSearchCapsItsCount(t *testing.T) {
	e := newFakeEnv(t, pagedDeadLetters(api.MaxSearchTotal+5), nil)
	_, doc, _ := searchAs(t, e, "limit=0")
	if doc.Total != api.MaxSearchTotal || !doc.TotalCapped {
		t.Fatalf("total %d capped %v, want %d and capped", doc.Total, doc.TotalCapped, api.MaxSearchTotal)
	}
	// A text that matches little still reads at most maxSearchPages pages.
	e = newFakeEnv(t, pagedDeadLetters(maxSearchPages*1000+1), nil)
	_, doc, _ = searchAs(t, e, "q=key-50000&limit=0")
	if doc.Total != 0 || !doc.TotalCapped {
		t.Fatalf("past the read budget: total %d capped %v, want 0 and capped", doc.Total, doc.TotalCapped)
	}
	_, doc, _ = searchAs(t, e, "q=key-49999&limit=0")
	if doc.Total != 1 || !doc.TotalCapped {
		t.Fatalf("within the read budget: total %d capped %v, want 1 and capped", doc.Total, doc.TotalCapped)
	}
}

func TestSearchRefusesBadParameters(t *testing.T) {
	e := newFakeEnv(t, pagedDeadLetters(1), nil)
	for query, detail := range map[string]string{
		"sort=colour":                   "sort must be dead_lettered_at",
		"replay=maybe":                  "replay must be none, pending, succeeded or failed_again",
		"limit=1001":                    "limit must be 0–1000",
		"offset=-1":                     "offset must be a non-negative integer",
		"q=" + strings.Repeat("k", 256): "q is longer than 255 bytes",
		"status=abc":                    "status \\\"abc\\\" is not a number",
	} {
		if code, _, body := searchAs(t, e, query); code != http.StatusBadRequest || !strings.Contains(body, detail) {
			t.Errorf("%s: %d %s, want 400 saying %q", query, code, body, detail)
		}
	}
	if w := serve(t, e.h, nextSource(&e.sources), http.MethodGet, "/admin/v1/search", "", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("search without a token: %d, want 401", w.Code)
	}
}

// fakeStats is a Stats whose Series is SeriesFn.
type fakeStats struct {
	SeriesFn func(ctx context.Context, endpoint string, rng stats.Range) (stats.Series, error)
	dead     map[string]int
}

func (f *fakeStats) Series(ctx context.Context, endpoint string, rng stats.Range) (stats.Series, error) {
	return f.SeriesFn(ctx, endpoint, rng)
}
func (f *fakeStats) DeadLetter(endpoint string, n int) { f.dead[endpoint] += n }

func TestEndpointStatsRoute(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	var asked stats.Range
	fs := &fakeStats{dead: map[string]int{}, SeriesFn: func(_ context.Context, ep string, rng stats.Range) (stats.Series, error) {
		asked = rng
		if ep == "crm-api" {
			return stats.Series{}, errors.New("redis: connection refused")
		}
		p := stats.Point{Start: t0, Success: 2, Retryable: 1, DeadLetters: 1, Latency: stats.Latency{Count: 3, P50Ms: 50, P99Ms: 250}}
		return stats.Series{Endpoint: ep, Range: rng, Points: []stats.Point{p}, Total: p}, nil
	}}
	tokens := testTokens(t, dltWrite, dltRead)
	h := New(Deps{Config: dltConfig(), Tokens: tokens, Stats: fs, Logger: slog.New(slog.DiscardHandler)})
	var src = &dltEnv{}
	get := func(path, token string) (int, string) {
		w := serve(t, h, nextSource(&src.sources), http.MethodGet, path, token, "")
		return w.Code, w.Body.String()
	}
	code, body := get("/admin/v1/endpoints/pay-api/stats?range=24h", dltRead)
	var doc api.EndpointStatsDoc
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	if asked.Name != "24h" || doc.Range != "24h" || doc.StepSeconds != 1200 || len(doc.Points) != 1 ||
		doc.Points[0].Success != 2 || doc.Total.LatencyP99 != 250 || !doc.Points[0].Start.Equal(t0) {
		t.Fatalf("stats doc %+v (asked %v)", doc, asked)
	}
	if _, _ = get("/admin/v1/endpoints/pay-api/stats", dltRead); asked.Name != "1h" {
		t.Fatalf("default range %q, want 1h", asked.Name)
	}
	for path, want := range map[string]int{
		"/admin/v1/endpoints/pay-api/stats?range=2d": http.StatusBadRequest,
		"/admin/v1/endpoints/no-such/stats":          http.StatusNotFound,
		"/admin/v1/endpoints/crm-api/stats":          http.StatusServiceUnavailable,
	} {
		if code, body := get(path, dltRead); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}
	if code, _ := get("/admin/v1/endpoints/pay-api/stats", ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", code)
	}
}

// TestDisableCountsItsDeadLetters: the dead letters an admin disable makes
// are counted for the charts.
func TestDisableCountsItsDeadLetters(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeStats{dead: map[string]int{}}
	h := New(Deps{Config: admConfig(), Tokens: testTokens(t, dltWrite, dltRead), Endpoints: admFailingStore{}.fake(),
		Metrics: m, Stats: fs, Logger: slog.New(slog.DiscardHandler)})
	var n atomic.Int32
	if w := serve(t, h, nextSource(&n), http.MethodPost, "/admin/v1/endpoints/pay-api/disable", dltWrite, ""); w.Code != http.StatusOK {
		t.Fatalf("disable: %d %s", w.Code, w.Body)
	}
	if fs.dead["pay-api"] != 1 {
		t.Fatalf("dead letters counted %v, want pay-api 1", fs.dead)
	}
}

// A descending sort is the ascending one turned round exactly, dead
// letters of one millisecond (ties) included: ties go by id both ways.
func TestSortDeadLettersTiesTurnRound(t *testing.T) {
	at := time.Unix(1700000000, 0)
	ds := []policy.DeadLetter{{ID: "b", DeadLetteredAt: at}, {ID: "c", DeadLetteredAt: at.Add(time.Second)},
		{ID: "a", DeadLetteredAt: at}}
	ids := func() []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	sortDeadLetters(ds, "dead_lettered_at")
	asc := ids()
	sortDeadLetters(ds, "-dead_lettered_at")
	desc := ids()
	if !slices.Equal(asc, []string{"a", "b", "c"}) || !slices.Equal(desc, []string{"c", "b", "a"}) {
		t.Fatalf("ascending %v, descending %v; want [a b c] and [c b a]", asc, desc)
	}
}
