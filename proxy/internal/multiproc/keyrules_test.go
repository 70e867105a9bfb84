package multiproc

import (
	"bufio"
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/proctest"
)

// keyRules checks contract §4's table and §5's syntax: which writes need a
// key, which keys are refused, and that an accepted key reaches the
// upstream exactly as sent, while a write without one sends none.
func (s *idemSetup) keyRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("k", n) }
	tests := []struct {
		name   string
		method string
		key    []string // nil: no Idempotency-Key field
		// code is the refusal (400); "" means forwarded (200).
		code problem.Code
	}{
		{"POST without key", http.MethodPost, nil, problem.IdempotencyKeyMissing},
		{"PATCH without key", http.MethodPatch, nil, problem.IdempotencyKeyMissing},
		{"PUT without key", http.MethodPut, nil, ""},
		{"DELETE without key", http.MethodDelete, nil, ""},
		{"unterminated sf-string", http.MethodPost, []string{`"unterminated`}, problem.IdempotencyKeyInvalid},
		{"256 characters", http.MethodPost, []string{long(256)}, problem.IdempotencyKeyInvalid},
		{"256 characters quoted", http.MethodPost, []string{`"` + long(256) + `"`}, problem.IdempotencyKeyInvalid},
		{"non-ASCII token", http.MethodPost, []string{"café-1"}, problem.IdempotencyKeyInvalid},
		{"non-ASCII sf-string", http.MethodPost, []string{`"café-1"`}, problem.IdempotencyKeyInvalid},
		{"two fields", http.MethodPost, []string{`"a"`, `"b"`}, problem.IdempotencyKeyInvalid},
		{"255 characters", http.MethodPost, []string{long(255)}, ""},
		{"quoted sf-string", http.MethodPost, []string{`"abc-123"`}, ""},
		{"bare token", http.MethodPatch, []string{"tok-9"}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/keys/" + strconv.Itoa(i)
			h := http.Header{"Content-Type": {"application/json"}}
			if tt.key != nil {
				h["Idempotency-Key"] = tt.key
			}
			resp := s.h.call(t, []*proctest.Proxy{s.a, s.b}[i%2], tt.method, "/callout/fast"+path, h, `{"k":1}`)
			hits := s.fast.Requests(path)
			if tt.code != "" {
				wantProblem(t, resp, http.StatusBadRequest, tt.code, policy.Rejected)
				if len(hits) != 0 {
					t.Errorf("a refused request reached the upstream %d times", len(hits))
				}
				return
			}
			if resp.Status != http.StatusOK || len(hits) != 1 {
				t.Fatalf("status %d, upstream hits %d; want forwarded once: %s", resp.Status, len(hits), resp.Body)
			}
			if got := hits[0].Header.Values("Idempotency-Key"); !slices.Equal(got, tt.key) {
				t.Errorf("upstream got Idempotency-Key %q, want %q exactly as sent", got, tt.key)
			}
		})
	}
}

// metrics checks callout_idempotency_total (contract §5) summed over
// both replicas after the subtests above: every result label counted.
// The concurrent duplicate counts as conflict or replayed depending on
// timing, hence the ranges.
func (s *idemSetup) metrics(t *testing.T) {
	got := map[string]float64{}
	for _, r := range []*proctest.Proxy{s.a, s.b} {
		for k, v := range s.h.scrape(t, r, "callout_idempotency_total") {
			got[k] += v
		}
	}
	for _, w := range []struct {
		result   string
		min, max float64
	}{
		// concurrent 1, mismatch 1, keys 3, reset 1, orgs 2, replay 1, dead 1
		{"new", 10, 10},
		{"replayed", 1, 2}, // the replay, maybe the concurrent duplicate
		{"conflict", 1, 2}, // the dead letter, maybe the concurrent duplicate
		{"mismatch", 2, 2}, // other body, other path
		{"missing", 4, 4},  // POST and PATCH refused, PUT and DELETE forwarded
	} {
		if v := got[`result="`+w.result+`"`]; v < w.min || v > w.max {
			t.Errorf("callout_idempotency_total{result=%q} = %v, want %v…%v (all: %v)", w.result, v, w.min, w.max, got)
		}
	}
	if sum := got[`result="replayed"`] + got[`result="conflict"`]; sum != 3 {
		t.Errorf("replayed + conflict = %v, want 3: the concurrent duplicate is exactly one of them", sum)
	}
}

// scrape reads /metrics on r's admin listener and returns the samples of
// family name by their label text (`result="new"`).
func (h *harness) scrape(t *testing.T, r *proctest.Proxy, name string) map[string]float64 {
	t.Helper()
	resp, err := h.send(r.AdminURL, http.MethodGet, "/metrics", nil, "")
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("GET /metrics on %s: %v %d", r.Name, err, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(resp.Body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			t.Fatalf("unexpected sample line %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[labels] = v
	}
	return out
}
