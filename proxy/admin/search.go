package admin

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/replay"
)

// searchPage is the default page size of GET /admin/v1/search.
const searchPage = 50

// handleSearch serves GET /admin/v1/search?q=&endpoint=&reason=&status=
// &since=&until=&unresolved=&replay=&sort=&offset=&limit= (docs/console.md
// "Admin API routes the console added"). It lists the dead letters, across
// every endpoint unless endpoint is given, that pass the dead-letter
// list's filters, whose replay outcome is replay and that q matches:
//
//   - replay: none (never replayed: what awaits an operator, since a replay
//     that failed again is a dead letter of its own), or pending, succeeded,
//     failed_again (the latest replay's resolution, the chain followed);
//   - q: equal to the dead letter's id, Idempotency-Key or source record
//     (Callout-Source-Record), or contained in its path.
//
// They are sorted by sort and counted (up to api.MaxSearchTotal, reading
// at most maxSearchPages×1000 dead letters that pass the filters;
// total_capped then says more may match), and one page from offset of at
// most limit (0–1000, default 50; 0: the total only) is served. For a q it
// also lists the callouts holding it as an Idempotency-Key on any
// configured endpoint in any configured organisation (contract §5).
// Errors: 400 naming the parameter; the listing's own (problem.From).
func (s *server) handleSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sp, err := searchOf(q)
	if err != nil {
		problem.Write(w, err)
		return
	}
	matches, capped, err := s.scanDeadLetters(r.Context(), sp.filter, sp.match)
	if err != nil {
		problem.Write(w, problem.From(err))
		return
	}
	sortDeadLetters(matches, sp.sort)
	doc := api.SearchDoc{Query: sp.text, Sort: sp.sort, DeadLetters: []api.DeadLetterSummaryDoc{},
		Total: len(matches), TotalCapped: capped, Offset: sp.offset, KeyHolders: []api.SearchKeyHolderDoc{}}
	from := min(sp.offset, len(matches))
	end := from + min(sp.limit, len(matches)-from)
	for _, d := range matches[from:end] {
		doc.DeadLetters = append(doc.DeadLetters, s.summaryDoc(d))
	}
	if end < len(matches) && sp.limit > 0 {
		doc.NextOffset = end
	}
	if doc.KeyHolders, err = s.keyHolders(r.Context(), sp.text); err != nil {
		problem.Write(w, problem.FromStore(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
}

// search is a parsed GET /admin/v1/search.
type search struct {
	filter        replay.Filter
	text, replay  string
	sort          string
	offset, limit int
}

// sortFields are the fields a search sorts by, each compared by its value
// (ties: endpoint, time, id, which is the index order).
var sortFields = map[string]func(a, b policy.DeadLetter) int{
	"dead_lettered_at": func(a, b policy.DeadLetter) int { return a.DeadLetteredAt.Compare(b.DeadLetteredAt) },
	"endpoint":         func(a, b policy.DeadLetter) int { return strings.Compare(a.Endpoint, b.Endpoint) },
	"status":           func(a, b policy.DeadLetter) int { return cmp.Compare(a.Status, b.Status) },
	"attempts":         func(a, b policy.DeadLetter) int { return cmp.Compare(a.Attempts, b.Attempts) },
	"reason":           func(a, b policy.DeadLetter) int { return strings.Compare(string(a.Reason), string(b.Reason)) },
	"path":             func(a, b policy.DeadLetter) int { return strings.Compare(a.Path, b.Path) },
}

// searchOf parses a search's parameters. Errors: InvalidRequest naming the
// parameter.
func searchOf(q map[string][]string) (search, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	var sp search
	var err error
	if sp.filter, err = filterOf(q); err != nil {
		return sp, err
	}
	sp.text, sp.replay, sp.sort = get("q"), get("replay"), get("sort")
	if len(sp.text) > 255 {
		return sp, problem.Errorf(problem.InvalidRequest, "q is longer than 255 bytes (an Idempotency-Key's limit)")
	}
	switch sp.replay {
	case "", "none", "pending", "succeeded", "failed_again":
	default:
		return sp, problem.Errorf(problem.InvalidRequest, "replay must be none, pending, succeeded or failed_again")
	}
	if sp.sort == "" {
		sp.sort = "dead_lettered_at"
	}
	if _, ok := sortFields[strings.TrimPrefix(sp.sort, "-")]; !ok {
		return sp, problem.Errorf(problem.InvalidRequest,
			"sort must be dead_lettered_at, endpoint, status, attempts, reason or path, - first for descending")
	}
	if sp.offset, err = intParam(q, "offset", 0); err != nil {
		return sp, err
	}
	if sp.limit, err = intParam(q, "limit", searchPage); err == nil && sp.limit > 1000 {
		err = problem.Errorf(problem.InvalidRequest, "limit must be 0–1000")
	}
	return sp, err
}

// match reports whether d passes the search's text and replay outcome.
func (sp search) match(d policy.DeadLetter) bool {
	if t := sp.text; t != "" && t != d.ID && t != d.IdempotencyKey && t != d.SourceRecord && !strings.Contains(d.Path, t) {
		return false
	}
	switch sp.replay {
	case "none":
		return d.ReplayedBy == ""
	case "pending", "succeeded", "failed_again":
		return d.ReplayedBy != "" && string(d.Resolution) == sp.replay
	}
	return true
}

// maxSearchPages bounds the pages of 1000 one search reads: 50,000 dead
// letters passing the filter, whatever the search text keeps of them.
const maxSearchPages = 50

// scanDeadLetters reads every dead letter passing f (the replay service's
// listing, 1000 a page, at most maxSearchPages pages) and keeps those match
// accepts, up to api.MaxSearchTotal: capped then says more may match.
func (s *server) scanDeadLetters(ctx context.Context, f replay.Filter, match func(policy.DeadLetter) bool) (
	out []policy.DeadLetter, capped bool, err error) {
	cursor := ""
	for pages := 1; ; pages++ {
		page, err := s.d.DeadLetters.DeadLetters(ctx, replay.Query{Filter: f, Cursor: cursor, Limit: 1000})
		if err != nil {
			return nil, false, err
		}
		for _, d := range page.Items {
			if !match(d) {
				continue
			}
			if len(out) == api.MaxSearchTotal {
				return out, true, nil
			}
			out = append(out, d)
		}
		if page.Next == "" {
			return out, false, nil
		}
		if pages == maxSearchPages {
			return out, true, nil
		}
		cursor = page.Next
	}
}

// sortDeadLetters sorts ds by field ("-" first: descending), ties by id,
// so that the descending order is the ascending one turned round exactly
// (two dead letters of one millisecond included).
func sortDeadLetters(ds []policy.DeadLetter, field string) {
	desc := strings.HasPrefix(field, "-")
	by := sortFields[strings.TrimPrefix(field, "-")]
	slices.SortFunc(ds, func(a, b policy.DeadLetter) int {
		if desc {
			a, b = b, a
		}
		return cmp.Or(by(a, b), strings.Compare(a.ID, b.ID))
	})
}

// keyHolders finds the callouts holding key as an Idempotency-Key on every
// configured endpoint in every configured organisation (one read each);
// none for "" or without Deps.Keys. Errors: policy.ErrUnavailable.
func (s *server) keyHolders(ctx context.Context, key string) ([]api.SearchKeyHolderDoc, error) {
	out := []api.SearchKeyHolderDoc{}
	if key == "" || s.d.Keys == nil {
		return out, nil
	}
	for _, ep := range s.d.Config.EndpointNames() {
		for _, is := range s.d.Config.Auth.Issuers {
			id, err := s.d.Keys.KeyHolder(ctx, is, ep, key)
			if errors.Is(err, policy.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, api.SearchKeyHolderDoc{Endpoint: ep, Issuer: is, CalloutID: id})
		}
	}
	return out, nil
}
