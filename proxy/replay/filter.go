package replay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/config"
)

// Filter selects dead letters (contract §8 "filtered (endpoint, time range,
// status code, reason)"): the admin API's api.ReplayFilter, whose fields and
// JSON names it has (a job's stored spec encodes it the same way), with
// Validate and Match. Every part that is set must match; an empty part
// matches everything. Since and Until are compared at millisecond
// precision; Endpoints, when none, is every endpoint: the configured ones
// and any the store still holds dead letters of.
type Filter api.ReplayFilter

// endpointName is contract §10's endpoint name rule.
var endpointName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// MaxFilterValues bounds the endpoints, statuses and reasons of a filter.
const MaxFilterValues = 100

// Validate reports the first malformed part of f: an *policy.Error, code
// ErrInvalid.
func (f Filter) Validate() error {
	if len(f.Endpoints) > MaxFilterValues || len(f.Statuses) > MaxFilterValues || len(f.Reasons) > MaxFilterValues {
		return invalid("a filter takes at most %d endpoints, statuses and reasons each", MaxFilterValues)
	}
	for _, e := range f.Endpoints {
		if !endpointName.MatchString(e) {
			return invalid("%q is not an endpoint name (^[a-z0-9][a-z0-9-]{0,62}$)", e)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return invalid("until (%s) is before since (%s)",
			f.Until.Format(time.RFC3339Nano), f.Since.Format(time.RFC3339Nano))
	}
	for _, st := range f.Statuses {
		if st != 0 && (st < 100 || st > 599) {
			return invalid("status %d is not 0 (no response) or 100–599", st)
		}
	}
	for _, r := range f.Reasons {
		switch r {
		case policy.DeadLetterExhausted, policy.DeadLetterPermanent, policy.DeadLetterAmbiguous,
			policy.DeadLetterEndpointDisabled:
		default:
			return invalid("reason %q is not exhausted, permanent, ambiguous or endpoint_disabled", r)
		}
	}
	return nil
}

// Match reports whether d's status and reason pass f (its endpoint and
// time are selected by the store query).
func (f Filter) Match(d policy.DeadLetter) bool {
	return (len(f.Statuses) == 0 || slices.Contains(f.Statuses, d.Status)) &&
		(len(f.Reasons) == 0 || slices.Contains(f.Reasons, d.Reason))
}

// Query is one page of a dead-letter listing.
type Query struct {
	Filter Filter
	// Cursor is the previous page's Next; "" for the first page.
	Cursor string
	// Limit is the page size: 1–1000, default 100.
	Limit int
}

// Page is one page of dead letters: by endpoint name, then oldest first.
type Page struct {
	Items []policy.DeadLetter
	// Next is the cursor of the following page; "" when this is the last.
	// A page may hold fewer than Limit items (even none) and still have a
	// Next: the status and reason filters are applied after reading, and
	// one page reads at most scanFactor×Limit entries.
	Next string
}

// scanFactor bounds the index entries one page reads: scanFactor × Limit.
const scanFactor = 20

// cursor is the decoded form of a Page.Next: the endpoint the page
// stopped in and the store's cursor within it.
type cursor struct {
	Endpoint string `json:"e"`
	Store    string `json:"c,omitempty"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	if s == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Endpoint == "" {
		return c, invalid("malformed cursor %q", s)
	}
	return c, nil
}

// DeadLetters lists dead letters matching q.Filter (contract §7, §8): endpoint
// by endpoint in name order, oldest first within one, with a stable cursor
// (entries added or removed between pages neither repeat nor skip others).
// Each item's Resolution says what became of its replays (resolve).
// Errors: ErrInvalid (filter or cursor), ErrNoSuchEndpoint,
// policy.ErrUnavailable.
func (s *Service) DeadLetters(ctx context.Context, q Query) (Page, error) {
	if err := q.Filter.Validate(); err != nil {
		return Page{}, err
	}
	cur, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	eps, err := s.endpoints(ctx, q.Filter.Endpoints)
	if err != nil {
		return Page{}, err
	}
	i, _ := slices.BinarySearch(eps, cur.Endpoint)
	page := Page{Items: []policy.DeadLetter{}}
	budget := scanFactor * limit
	for ; i < len(eps); i++ {
		sc := ""
		if eps[i] == cur.Endpoint {
			sc = cur.Store
		}
		for {
			want := limit - len(page.Items)
			sp, err := s.o.DeadLetters.DeadLetters(ctx, policy.DeadLetterQuery{Endpoint: eps[i],
				Since: q.Filter.Since, Until: q.Filter.Until, Cursor: sc, Limit: want})
			if err != nil {
				return Page{}, err
			}
			budget -= want
			var matched []policy.DeadLetter
			for _, d := range sp.Items {
				if q.Filter.Match(d) {
					matched = append(matched, d)
				}
			}
			if err := s.resolve(ctx, matched); err != nil {
				return Page{}, err
			}
			for _, d := range matched {
				if !q.Filter.Unresolved || !d.Resolution.Resolved() {
					page.Items = append(page.Items, d)
				}
			}
			sc = sp.Next
			if sc == "" {
				break
			}
			if len(page.Items) == limit || budget <= 0 {
				page.Next = cursor{Endpoint: eps[i], Store: sc}.encode()
				return page, nil
			}
		}
		if (len(page.Items) == limit || budget <= 0) && i+1 < len(eps) {
			page.Next = cursor{Endpoint: eps[i+1]}.encode()
			return page, nil
		}
	}
	return page, nil
}

// endpoints returns names sorted and deduplicated, or, when names is
// empty, every configured endpoint and every endpoint the store has seen.
// Errors: ErrNoSuchEndpoint for a name that is neither (a typo must not
// look like an endpoint without dead letters), policy.ErrUnavailable.
func (s *Service) endpoints(ctx context.Context, names []string) ([]string, error) {
	known := s.o.Config.EndpointNames()
	var seen []string
	if len(names) == 0 || !allConfigured(s.o.Config, names) {
		var err error
		if seen, err = s.o.Store.Endpoints(ctx); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(names)
	if len(out) == 0 {
		out = append(known, seen...)
	}
	for _, n := range names {
		if _, ok := s.o.Config.Endpoint(n); !ok && !slices.Contains(seen, n) {
			return nil, &policy.Error{Code: ErrNoSuchEndpoint, Endpoint: n}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// allConfigured reports whether every name is a configured endpoint.
func allConfigured(cfg *config.Config, names []string) bool {
	for _, n := range names {
		if _, ok := cfg.Endpoint(n); !ok {
			return false
		}
	}
	return true
}

// invalid is the ErrInvalid error saying, as fmt.Sprintf(format, args...)
// would, what is wrong with the request as a whole.
func invalid(format string, args ...any) error {
	return &policy.Error{Code: ErrInvalid, Detail: fmt.Sprintf(format, args...)}
}

// inField is err (an invalid() error) about the part field of a request,
// e.g. "filters[0]"; any other error is returned as it is.
func inField(err error, field string) error {
	var pe *policy.Error
	if !errors.As(err, &pe) {
		return err
	}
	cp := *pe
	cp.Field = field
	return &cp
}
