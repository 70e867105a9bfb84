package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/calloutproxy/callout-proxy/policy"
	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
)

// Callouts lists an endpoint's pending callouts (contract §4 states).
// *pending.Reader (proxy/redisstore/pending) implements it.
type Callouts interface {
	// Pending returns one page of endpoint's callouts in state scheduled,
	// held or in_flight from offset, at most limit (1–1000), without
	// bodies, and the next page's offset (0 after the last). Errors:
	// policy.ErrUnavailable.
	Pending(ctx context.Context, endpoint string, state policy.State, offset, limit int) ([]*policy.Callout, int, error)
}

// Keys finds the callout holding an Idempotency-Key (contract §5).
// *redisstore.Store implements it.
type Keys interface {
	// KeyHolder returns the id of the callout holding key of issuer on
	// endpoint. Errors: policy.ErrNotFound, policy.ErrUnavailable.
	KeyHolder(ctx context.Context, issuer, endpoint, key string) (string, error)
}

// handleListCallouts serves GET /admin/v1/callouts?endpoint=&state=
// &cursor=&limit=: one page of a configured endpoint's callouts in state
// scheduled, held or in_flight (soonest due, or lease end, first); limit
// 1–1000, default 100; cursor is the previous page's next_cursor.
func (s *server) handleListCallouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("endpoint") == "" {
		problem.Write(w, problem.Errorf(problem.InvalidRequest, "endpoint is required: the endpoint whose pending callouts to list"))
		return
	}
	ep, ok := s.d.Config.Endpoint(q.Get("endpoint"))
	if !ok {
		problem.Write(w, unknownEndpoint(q.Get("endpoint")))
		return
	}
	state := policy.State(q.Get("state"))
	if state != policy.Scheduled && state != policy.Held && state != policy.InFlight {
		problem.Write(w, problem.Errorf(problem.InvalidRequest, "state must be scheduled, held or in_flight"))
		return
	}
	offset, err := intParam(q, "cursor", 0)
	if err != nil {
		problem.Write(w, err)
		return
	}
	limit, err := intParam(q, "limit", 100)
	if err == nil && (limit < 1 || limit > 1000) {
		err = problem.Errorf(problem.InvalidRequest, "limit must be 1–1000")
	}
	if err != nil {
		problem.Write(w, err)
		return
	}
	page, next, err := s.d.Callouts.Pending(r.Context(), ep.Name, state, offset, limit)
	if err != nil {
		problem.Write(w, problem.FromStore(err))
		return
	}
	out := api.CalloutList{Items: make([]api.CalloutSummaryDoc, 0, len(page))}
	if next > 0 {
		out.NextCursor = strconv.Itoa(next)
	}
	for _, c := range page {
		due := c.NextAttemptAt
		if state == policy.InFlight {
			due = c.LeaseExpiresAt
		}
		out.Items = append(out.Items, api.CalloutSummaryDoc{ID: c.ID, Endpoint: c.Endpoint, State: c.State,
			Method: c.Method, Path: c.Path, IdempotencyKey: c.IdempotencyKey, SourceRecord: c.SourceRecord,
			ReplayOf: c.ReplayOf, Attempts: c.Attempts, CreatedAt: c.CreatedAt.UTC(), NextAttemptAt: timeOrNil(due),
			Issuer: c.Issuer, LastError: s.redactions.For(ep.Name).Text(c.LastError)})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// handleKeyHolders serves GET /admin/v1/idempotency-keys?endpoint=&key=
// [&issuer=]: the callouts holding the Idempotency-Key key (without
// sf-string quotes) on endpoint, in the given organisation or in each
// configured one (auth.issuers); 404 when none does.
func (s *server) handleKeyHolders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	endpoint, key := q.Get("endpoint"), q.Get("key")
	if endpoint == "" || key == "" {
		problem.Write(w, problem.Errorf(problem.InvalidRequest, "endpoint and key are required"))
		return
	}
	issuers := s.d.Config.Auth.Issuers
	if is := q.Get("issuer"); is != "" {
		issuers = []string{is}
	}
	doc := api.IdempotencyKeyDoc{Endpoint: endpoint, IdempotencyKey: key, Holders: []api.KeyHolderDoc{}}
	for _, is := range issuers {
		id, err := s.d.Keys.KeyHolder(r.Context(), is, endpoint, key)
		if errors.Is(err, policy.ErrNotFound) {
			continue
		}
		if err != nil {
			problem.Write(w, problem.FromStore(err))
			return
		}
		doc.Holders = append(doc.Holders, api.KeyHolderDoc{Issuer: is, CalloutID: id})
	}
	if len(doc.Holders) == 0 {
		problem.Write(w, problem.Errorf(problem.NotFound,
			"no callout of "+endpoint+" holds Idempotency-Key "+strconv.Quote(key)+" (never used, or its retention ended)"))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
}
