package admin

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/api"
	"github.com/calloutproxy/callout-proxy/proxy/httpx"
	"github.com/calloutproxy/callout-proxy/proxy/problem"
	"github.com/calloutproxy/callout-proxy/proxy/redisstore/stats"
)

// Stats are the per-endpoint figures the console charts (docs/console.md
// "Charts"). *stats.Recorder implements it.
type Stats interface {
	// Series reads endpoint's attempts by class, dead letters and latency
	// over rng, summed over every replica. Errors: Redis's.
	Series(ctx context.Context, endpoint string, rng stats.Range) (stats.Series, error)
	// DeadLetter counts n callouts of endpoint an admin disable turned
	// into dead letters.
	DeadLetter(endpoint string, n int)
}

// handleEndpointStats serves GET /admin/v1/endpoints/{name}/stats?range=
// (1h, 6h, 24h or 7d; default 1h): a configured endpoint's figures over the
// range, one point per step (stats.Ranges), oldest first. Errors: 404 for
// an endpoint that is not configured, 400 for another range, 503 when
// Redis cannot be read.
func (s *server) handleEndpointStats(w http.ResponseWriter, r *http.Request) {
	ep, ok := s.d.Config.Endpoint(chi.URLParam(r, "name"))
	if !ok {
		problem.Write(w, unknownEndpoint(chi.URLParam(r, "name")))
		return
	}
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "1h"
	}
	rng, ok := stats.RangeOf(name)
	if !ok {
		names := make([]string, len(stats.Ranges))
		for i, r := range stats.Ranges {
			names[i] = r.Name
		}
		problem.Write(w, problem.Errorf(problem.InvalidRequest,
			"range "+strconv.Quote(name)+" is not one of "+strings.Join(names, ", ")))
		return
	}
	sr, err := s.d.Stats.Series(r.Context(), ep.Name, rng)
	if err != nil {
		problem.Write(w, problem.Errorf(problem.StoreUnavailable, "the endpoint's figures could not be read from Redis"))
		return
	}
	doc := api.EndpointStatsDoc{Endpoint: ep.Name, Range: rng.Name, StepSeconds: int(rng.Step.Seconds()),
		Points: make([]api.StatsPointDoc, len(sr.Points)), Total: pointDoc(sr.Total)}
	for i, p := range sr.Points {
		doc.Points[i] = pointDoc(p)
	}
	httpx.WriteJSON(w, http.StatusOK, doc)
}

// pointDoc is p on the wire.
func pointDoc(p stats.Point) api.StatsPointDoc {
	return api.StatsPointDoc{Start: p.Start.UTC(), Success: p.Success, Retryable: p.Retryable,
		Permanent: p.Permanent, DeadLetters: p.DeadLetters, LatencyP50: p.Latency.P50Ms,
		LatencyP95: p.Latency.P95Ms, LatencyP99: p.Latency.P99Ms, LatencyMean: p.Latency.MeanMs}
}
